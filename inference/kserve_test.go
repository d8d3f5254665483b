package inference

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"octflow/imaging"
	"octflow/inference/inferencetest"
)

func TestATensorCrossesTheProtocolWhole(t *testing.T) {
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 2, Frames: 3, Rows: 40, Cols: 24}).Volume
	for _, jsonReply := range []bool{false, true} {
		url := inferencetest.Serve(t, v, func(v *imaging.Volume) ([]int, []float32) {
			out := make([]float32, len(v.Data))
			for i, x := range v.Data {
				out[i] = 2*x + 1
			}
			return []int{v.Frames, v.Rows, v.Cols}, out
		}, jsonReply)
		got, shape, err := Model{URL: url}.Infer(context.Background(), []int{v.Frames, v.Rows, v.Cols}, v.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, []int{v.Frames, v.Rows, v.Cols}) || len(got) != len(v.Data) {
			t.Fatalf("shape %v, %d values", shape, len(got))
		}
		for i := range got {
			// A JSON reply carries float64 numbers: the values are the
			// float32s written, read back exactly.
			if got[i] != 2*v.Data[i]+1 {
				t.Fatalf("json %v: value %d = %v, want %v", jsonReply, i, got[i], 2*v.Data[i]+1)
			}
		}
	}
}

func TestModelErrorsAreReported(t *testing.T) {
	ctx := context.Background()
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 32, Cols: 16}).Volume
	cases := []struct {
		name, want string
		model      func(t *testing.T) Model
	}{
		{"model error", "HTTP 400: unexpected input shape", func(t *testing.T) Model {
			other := imaging.NewVolume(1, 32, 16, v.Spacing)
			return Model{URL: inferencetest.Serve(t, other, nil, false)}
		}},
		{"no such output", `no output named "probabilities"`, func(t *testing.T) Model {
			return Model{URL: inferencetest.Serve(t, v, func(v *imaging.Volume) ([]int, []float32) {
				return []int{v.Frames, v.Rows, v.Cols}, v.Data
			}, false), Output: "probabilities"}
		}},
		{"no server", "connection refused", func(t *testing.T) Model {
			srv := httptest.NewServer(http.NotFoundHandler())
			srv.Close()
			return Model{URL: srv.URL + "/v2/models/gone"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.model(t).Infer(ctx, []int{v.Frames, v.Rows, v.Cols}, v.Data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
