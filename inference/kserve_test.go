package inference

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"octflow/imaging"
)

// modelFunc is what a served test model computes from its input volume:
// the output tensor's shape and values.
type modelFunc func(v *imaging.Volume) ([]int, []float32)

// serveModel serves fn over the KServe v2 HTTP protocol at
// /v2/models/test/infer, reading the binary tensor extension and replying
// in binary, or in plain JSON when jsonReply is set. Inputs must be
// volumes of the geometry of like.
func serveModel(t *testing.T, like *imaging.Volume, fn modelFunc, jsonReply bool) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/models/test/infer", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := strconv.Atoi(r.Header.Get(inferHeaderLength))
		if err != nil || n > len(body) {
			http.Error(w, `{"error":"missing binary header length"}`, http.StatusBadRequest)
			return
		}
		var req inferHeader
		if err := json.Unmarshal(body[:n], &req); err != nil || len(req.Inputs) != 1 || req.Inputs[0].Datatype != "FP32" {
			http.Error(w, `{"error":"want one FP32 input"}`, http.StatusBadRequest)
			return
		}
		in := req.Inputs[0]
		raw := body[n:]
		if !slices.Equal(in.Shape, []int{like.Frames, like.Rows, like.Cols}) || len(raw) != 4*like.Frames*like.Rows*like.Cols {
			http.Error(w, `{"error":"unexpected input shape"}`, http.StatusBadRequest)
			return
		}
		v := imaging.NewVolume(like.Frames, like.Rows, like.Cols, like.Spacing)
		for i := range v.Data {
			v.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		shape, out := fn(v)
		reply := inferHeader{ModelName: "test", Outputs: []tensor{{Name: "other", Shape: []int{1}, Datatype: "FP32",
			Parameters: map[string]any{"binary_data_size": 4}}}}
		bin := []byte{0, 0, 0, 0} // an output the client did not ask for comes first
		o := tensor{Name: "output", Shape: shape, Datatype: "FP32"}
		if jsonReply {
			reply.Outputs = reply.Outputs[:0]
			for _, x := range out {
				o.Data = append(o.Data, float64(x))
			}
			reply.Outputs = append(reply.Outputs, o)
			json.NewEncoder(w).Encode(reply)
			return
		}
		o.Parameters = map[string]any{"binary_data_size": 4 * len(out)}
		reply.Outputs = append(reply.Outputs, o)
		for _, x := range out {
			bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(x))
		}
		head, _ := json.Marshal(reply)
		w.Header().Set(inferHeaderLength, strconv.Itoa(len(head)))
		w.Write(append(head, bin...))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/v2/models/test"
}

// TestModelBackendsMatchTheReference serves the reference algorithms as
// models and checks that each model-backed stage returns exactly what the
// reference computes: the protocol loses nothing on the way.
func TestModelBackendsMatchTheReference(t *testing.T) {
	ctx := context.Background()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 5, Rows: 248, Cols: 128, Fluid: true, Drusen: true})
	ref := Backends{}.WithDefaults()
	den, err := ref.Denoise.Denoise(ctx, p.Volume)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := ref.Layers.SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := p.Truth(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}

	for _, jsonReply := range []bool{false, true} {
		name := map[bool]string{false: "binary", true: "json"}[jsonReply]
		t.Run(name+"/denoise", func(t *testing.T) {
			url := serveModel(t, p.Volume, func(v *imaging.Volume) ([]int, []float32) {
				d, _ := imaging.Denoise(ctx, v, imaging.DenoiseOptions{})
				return []int{v.Frames, v.Rows, v.Cols}, d.Data
			}, jsonReply)
			got, err := ModelDenoiser{Model{URL: url}}.Denoise(ctx, p.Volume)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Data, den.Data) || got.Laterality != p.Volume.Laterality {
				t.Fatal("model denoiser differs from the reference served as a model")
			}
		})
		t.Run(name+"/layers", func(t *testing.T) {
			url := serveModel(t, den, func(v *imaging.Volume) ([]int, []float32) {
				l, _ := imaging.SegmentLayers(ctx, v)
				var out []float32
				for _, n := range imaging.BoundaryNames {
					out = append(out, l.Boundaries[n]...)
				}
				out = append(out, l.RPEBottom...)
				return []int{len(imaging.BoundaryNames) + 1, v.Frames, v.Cols}, out
			}, jsonReply)
			got, err := ModelSegmenter{Model{URL: url}}.SegmentLayers(ctx, den)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range imaging.BoundaryNames {
				if !slices.Equal(got.Boundaries[n], layers.Boundaries[n]) {
					t.Errorf("boundary %s differs from the reference", n)
				}
			}
			if !slices.Equal(got.RPEBottom, layers.RPEBottom) {
				t.Error("RPE bottom differs from the reference")
			}
		})
	}
	t.Run("lesions", func(t *testing.T) {
		// A "model" that labels the phantom's true fluid and drusen: the
		// stage must list exactly the truth's lesions.
		url := serveModel(t, den, func(v *imaging.Volume) ([]int, []float32) {
			out := make([]float32, len(v.Data))
			for i := range out {
				switch {
				case p.FluidMask[i]:
					out[i] = imaging.LabelFluid
				case p.DrusenMask[i]:
					out[i] = imaging.LabelDrusen
				}
			}
			return []int{v.Frames, v.Rows, v.Cols}, out
		}, false)
		trueLayers := p.Layers()
		masks, err := ModelLesionMarker{Model{URL: url}}.LesionMasks(ctx, den, trueLayers)
		if err != nil {
			t.Fatal(err)
		}
		got, err := masks.Lesions(den, trueLayers)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(truth.Lesions) || len(got) < 3 {
			t.Fatalf("%d lesions from the model, %d in the truth", len(got), len(truth.Lesions))
		}
		for i := range got {
			if got[i].Type != truth.Lesions[i].Type || got[i].Voxels != truth.Lesions[i].Voxels {
				t.Errorf("lesion %d = %s (%d voxels), truth %s (%d)", i, got[i].Type, got[i].Voxels, truth.Lesions[i].Type, truth.Lesions[i].Voxels)
			}
		}
	})
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
			return Model{URL: serveModel(t, other, nil, false)}
		}},
		{"wrong output shape", "output shape [2 32]", func(t *testing.T) Model {
			return Model{URL: serveModel(t, v, func(v *imaging.Volume) ([]int, []float32) {
				return []int{2, 32}, make([]float32, 64)
			}, false)}
		}},
		{"no such output", `no output named "probabilities"`, func(t *testing.T) Model {
			return Model{URL: serveModel(t, v, func(v *imaging.Volume) ([]int, []float32) {
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
			_, err := ModelDenoiser{c.model(t)}.Denoise(ctx, v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestBackendsDefaultToTheReference(t *testing.T) {
	b := Backends{Layers: ModelSegmenter{Model{URL: "http://triton:8000/v2/models/layers"}}}.WithDefaults()
	got := []string{b.Denoise.Name(), b.Layers.Name(), b.Lesions.Name()}
	want := []string{"nlm-log/v1", "kserve:http://triton:8000/v2/models/layers", "fluid-drusen/v1"}
	if !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
}
