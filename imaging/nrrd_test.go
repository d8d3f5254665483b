package imaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"strings"
	"testing"
)

// TestLabelsNRRDHoldsTheMasks writes a phantom's true lesion masks and
// reads the file back as a NRRD reader would: header fields, then the
// gzip-compressed labels in column, row, B-scan order.
func TestLabelsNRRDHoldsTheMasks(t *testing.T) {
	p := NewPhantom(PhantomOptions{Seed: 4, Frames: 5, Rows: 128, Cols: 64, Fluid: true, Drusen: true})
	masks := &LesionMasks{Fluid: p.FluidMask, Drusen: p.DrusenMask}
	labels := masks.Labels()
	var buf bytes.Buffer
	if err := WriteLabelsNRRD(&buf, p.Volume, labels); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(&buf)
	fields := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ": "); ok {
			fields[k] = v
		}
	}
	for k, want := range map[string]string{"type": "uint8", "dimension": "3", "sizes": "64 128 5", "encoding": "gzip"} {
		if fields[k] != want {
			t.Errorf("%s: %q, want %q", k, fields[k], want)
		}
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, labels) {
		t.Fatal("labels read back differ")
	}
	// And the labels carry the masks: reading them back lists the truth's lesions.
	back := MasksFromLabels(toFloats(got))
	truth, err := p.Truth(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	found, err := back.Lesions(p.Volume, p.Layers())
	if err != nil {
		t.Fatal(err)
	}
	if len(truth.Lesions) == 0 || lesionTypes(found) != lesionTypes(truth.Lesions) || len(found) != len(truth.Lesions) {
		t.Errorf("lesions from the labels %s (%d), truth %s (%d)", lesionTypes(found), len(found), lesionTypes(truth.Lesions), len(truth.Lesions))
	}
}

func toFloats(b []uint8) []float32 {
	out := make([]float32, len(b))
	for i, x := range b {
		out[i] = float32(x)
	}
	return out
}
