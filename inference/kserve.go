// Package inference calls trained models served over the KServe v2
// (Triton) HTTP inference protocol. A stage a site points at a served
// model (exam.StageSpec.Model, OCTFLOW_MODEL_<MODEL>) sends it its volume
// as one tensor and reads one back; what the tensors mean is the stage's
// own (activities, one file per stage), and its Go reference
// implementation stays what the model is checked against.
package inference

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Model is a model served over the KServe v2 HTTP inference protocol, as
// Triton Inference Server and KServe serve it. Tensors travel with the
// binary tensor data extension (raw little-endian bytes after a JSON
// header), since a volume as JSON numbers would be ten times larger;
// replies in plain JSON are read too.
type Model struct {
	// URL is the model's endpoint, e.g.
	// http://triton:8000/v2/models/oct-denoise (a version path may follow).
	URL string
	// Input and Output name the model's tensors (default "input" and
	// "output").
	Input, Output string
	// Client makes the requests (default http.DefaultClient; a timeout
	// comes from the stage's context).
	Client *http.Client
}

// tensor is a named tensor in the protocol's JSON, without its data.
type tensor struct {
	Name       string         `json:"name"`
	Shape      []int          `json:"shape,omitempty"`
	Datatype   string         `json:"datatype,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       []float64      `json:"data,omitempty"` // JSON replies only
}

// inferHeader is the JSON part of a request or reply.
type inferHeader struct {
	ModelName string   `json:"model_name,omitempty"`
	Inputs    []tensor `json:"inputs,omitempty"`
	Outputs   []tensor `json:"outputs"`
	Error     string   `json:"error,omitempty"`
}

// inferHeaderLength is the binary extension's header: the length of the
// JSON part before the raw tensor bytes.
const inferHeaderLength = "Inference-Header-Content-Length"

// InferAs is Infer for a model whose output must have one of the shapes
// want: any other is an error naming the model and the shape it gave.
func (m Model) InferAs(ctx context.Context, shape []int, data []float32, want ...[]int) ([]float32, []int, error) {
	out, got, err := m.Infer(ctx, shape, data)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range want {
		if slices.Equal(got, w) {
			return out, got, nil
		}
	}
	return nil, nil, fmt.Errorf("model %s: output shape %v, want %v", m.URL, got, want[0])
}

// Name names the model in reports: kserve: and its URL.
func (m Model) Name() string { return "kserve:" + m.URL }

// Infer sends one FP32 tensor of shape and returns the model's output
// tensor as float32 values with its shape.
func (m Model) Infer(ctx context.Context, shape []int, data []float32) ([]float32, []int, error) {
	raw := make([]byte, 4*len(data))
	for i, x := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	head, err := json.Marshal(inferHeader{
		Inputs: []tensor{{Name: cmp.Or(m.Input, "input"), Shape: shape, Datatype: "FP32",
			Parameters: map[string]any{"binary_data_size": len(raw)}}},
		Outputs: []tensor{{Name: cmp.Or(m.Output, "output"), Parameters: map[string]any{"binary_data": true}}},
	})
	if err != nil {
		return nil, nil, err
	}
	url := strings.TrimSuffix(m.URL, "/") + "/infer"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, io.MultiReader(bytes.NewReader(head), bytes.NewReader(raw)))
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", m.URL, err)
	}
	req.ContentLength = int64(len(head) + len(raw))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(inferHeaderLength, strconv.Itoa(len(head)))
	resp, err := cmp.Or(m.Client, http.DefaultClient).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", m.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: read reply: %w", m.URL, err)
	}
	jsonLen := len(body)
	if s := resp.Header.Get(inferHeaderLength); s != "" {
		if jsonLen, err = strconv.Atoi(s); err != nil || jsonLen < 0 || jsonLen > len(body) {
			return nil, nil, fmt.Errorf("model %s: bad %s %q", m.URL, inferHeaderLength, s)
		}
	}
	var reply inferHeader
	if err := json.Unmarshal(body[:jsonLen], &reply); err != nil {
		return nil, nil, fmt.Errorf("model %s: HTTP %d, unreadable reply: %w", m.URL, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || reply.Error != "" {
		return nil, nil, fmt.Errorf("model %s: HTTP %d: %s", m.URL, resp.StatusCode, reply.Error)
	}
	return m.output(reply, body[jsonLen:])
}

// output finds the wanted output tensor in a reply and decodes it.
func (m Model) output(reply inferHeader, binaryPart []byte) ([]float32, []int, error) {
	offset := 0
	for _, t := range reply.Outputs {
		size := 0
		if n, ok := t.Parameters["binary_data_size"].(float64); ok {
			size = int(n)
		}
		if t.Name != cmp.Or(m.Output, "output") {
			offset += size
			continue
		}
		count := 1
		for _, d := range t.Shape {
			count *= d
		}
		if size == 0 { // plain JSON data
			if len(t.Data) != count {
				return nil, nil, fmt.Errorf("model %s: output %s holds %d values for shape %v", m.URL, t.Name, len(t.Data), t.Shape)
			}
			out := make([]float32, count)
			for i, x := range t.Data {
				out[i] = float32(x)
			}
			return out, t.Shape, nil
		}
		if offset+size > len(binaryPart) {
			return nil, nil, fmt.Errorf("model %s: output %s is truncated", m.URL, t.Name)
		}
		out, err := decode(t.Datatype, binaryPart[offset:offset+size], count)
		if err != nil {
			return nil, nil, fmt.Errorf("model %s: output %s: %w", m.URL, t.Name, err)
		}
		return out, t.Shape, nil
	}
	return nil, nil, fmt.Errorf("model %s: no output named %q", m.URL, cmp.Or(m.Output, "output"))
}

// decode reads count little-endian values of a protocol datatype.
func decode(datatype string, raw []byte, count int) ([]float32, error) {
	width := map[string]int{"FP32": 4, "UINT8": 1, "INT64": 8}[datatype]
	if width == 0 {
		return nil, fmt.Errorf("datatype %q not supported (want FP32, UINT8 or INT64)", datatype)
	}
	if len(raw) != width*count {
		return nil, fmt.Errorf("%d bytes for %d %s values", len(raw), count, datatype)
	}
	out := make([]float32, count)
	for i := range out {
		switch datatype {
		case "FP32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		case "UINT8":
			out[i] = float32(raw[i])
		case "INT64":
			out[i] = float32(int64(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	}
	return out, nil
}
