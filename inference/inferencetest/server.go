// Package inferencetest serves test models over the KServe v2 HTTP
// inference protocol, as Triton serves a model: the binary tensor data
// extension in, binary or plain JSON out. Tests of served-model stages
// point a stage at one.
package inferencetest

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"octflow/imaging"
)

// ModelFunc is what a served test model computes from its input volume:
// the output tensor's shape and values.
type ModelFunc func(v *imaging.Volume) ([]int, []float32)

type tensor struct {
	Name       string         `json:"name"`
	Shape      []int          `json:"shape,omitempty"`
	Datatype   string         `json:"datatype,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       []float64      `json:"data,omitempty"`
}

type header struct {
	ModelName string   `json:"model_name,omitempty"`
	Inputs    []tensor `json:"inputs,omitempty"`
	Outputs   []tensor `json:"outputs"`
}

// headerLength is the binary extension's header: the length of the JSON
// part before the raw tensor bytes.
const headerLength = "Inference-Header-Content-Length"

// Serve serves fn as model "test" at /v2/models/test/infer until the
// test ends and returns the model's URL. Inputs must be one FP32 tensor
// of the geometry of like (else 400, as a model server refuses a wrong
// shape). The reply is binary, or plain JSON when jsonReply is set; in
// binary it carries an output the client did not ask for first, as a
// real model's may.
func Serve(t *testing.T, like *imaging.Volume, fn ModelFunc, jsonReply bool) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/models/test/infer", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := strconv.Atoi(r.Header.Get(headerLength))
		if err != nil || n > len(body) {
			http.Error(w, `{"error":"missing binary header length"}`, http.StatusBadRequest)
			return
		}
		var req header
		if err := json.Unmarshal(body[:n], &req); err != nil || len(req.Inputs) != 1 || req.Inputs[0].Datatype != "FP32" {
			http.Error(w, `{"error":"want one FP32 input"}`, http.StatusBadRequest)
			return
		}
		in, raw := req.Inputs[0], body[n:]
		if !slices.Equal(in.Shape, []int{like.Frames, like.Rows, like.Cols}) || len(raw) != 4*like.Frames*like.Rows*like.Cols {
			http.Error(w, `{"error":"unexpected input shape"}`, http.StatusBadRequest)
			return
		}
		v := imaging.NewVolume(like.Frames, like.Rows, like.Cols, like.Spacing)
		for i := range v.Data {
			v.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		shape, out := fn(v)
		o := tensor{Name: "output", Shape: shape, Datatype: "FP32"}
		if jsonReply {
			for _, x := range out {
				o.Data = append(o.Data, float64(x))
			}
			json.NewEncoder(w).Encode(header{ModelName: "test", Outputs: []tensor{o}})
			return
		}
		reply := header{ModelName: "test", Outputs: []tensor{{Name: "other", Shape: []int{1}, Datatype: "FP32",
			Parameters: map[string]any{"binary_data_size": 4}}}}
		bin := []byte{0, 0, 0, 0} // the output not asked for comes first
		o.Parameters = map[string]any{"binary_data_size": 4 * len(out)}
		reply.Outputs = append(reply.Outputs, o)
		for _, x := range out {
			bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(x))
		}
		head, _ := json.Marshal(reply)
		w.Header().Set(headerLength, strconv.Itoa(len(head)))
		w.Write(append(head, bin...))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/v2/models/test"
}
