package imaging

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// RetinaMeasured is where the retina was measured: a cube's measured
// A-scans, a line's profile; nothing for an analysis read back from
// JSON, which cannot say it for a cube.
func TestRetinaMeasuredIsWhereTheRetinaWasMeasured(t *testing.T) {
	ctx := context.Background()
	p := NewPhantom(PhantomOptions{Seed: 3, Frames: 9, Rows: 256, Cols: 96})
	w, _ := Normalize(p.Volume)
	den, err := Denoise(ctx, w, DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	an, err := Analyze(ctx, den, l)
	if err != nil {
		t.Fatal(err)
	}
	if an.Pattern != Cube || !an.Measurable() {
		t.Fatalf("the phantom cube was not measured: %v %v", an.Pattern, an.NotMeasurable)
	}
	m := an.RetinaMeasured()
	if len(m) != den.Frames*den.Cols || !slices.Contains(m, true) {
		t.Fatalf("retina measured on %d of %d A-scans", countTrue(m), den.Frames*den.Cols)
	}
	for i, on := range m {
		if on && !an.Quality.Mask[i] {
			t.Fatalf("A-scan %d is measured but not graded", i)
		}
	}
	b, err := json.Marshal(an)
	if err != nil {
		t.Fatal(err)
	}
	var back Analysis
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.RetinaMeasured() != nil {
		t.Error("an analysis read back from JSON claims to know where a cube was measured")
	}
	line := &Analysis{Pattern: Line, Figures: &LineMeasurements{ProfileUm: []float32{0, 250, 251, 0}}}
	if got := line.RetinaMeasured(); !slices.Equal(got, []bool{false, true, true, false}) {
		t.Errorf("a line's measured A-scans %v", got)
	}
	if (&Analysis{Pattern: Circle, Figures: &RNFLMeasurements{}}).RetinaMeasured() != nil {
		t.Error("a circle's retina is not measured, only its RNFL")
	}
}

func countTrue(m []bool) int {
	n := 0
	for _, on := range m {
		if on {
			n++
		}
	}
	return n
}

// ReadLabelsNRRD reads back what WriteLabelsNRRD wrote, and refuses what
// it did not.
func TestReadLabelsNRRDReadsWhatWasWritten(t *testing.T) {
	p := NewPhantom(PhantomOptions{Seed: 4, Frames: 3, Rows: 64, Cols: 32, Fluid: true, Drusen: true})
	labels := (&LesionMasks{Fluid: p.FluidMask, Drusen: p.DrusenMask}).Labels()
	var buf bytes.Buffer
	if err := WriteLabelsNRRD(&buf, p.Volume, labels); err != nil {
		t.Fatal(err)
	}
	got, sizes, err := ReadLabelsNRRD(bytes.NewReader(buf.Bytes()), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if sizes != [3]int{32, 64, 3} || !bytes.Equal(got, labels) {
		t.Errorf("read back sizes %v and %d labels, want [32 64 3] and the %d written", sizes, len(got), len(labels))
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"over the limit", buf.Bytes()[:0:0]},
		{"not NRRD", []byte("P5\n2 2\n255\n....")},
		{"raw encoding", []byte(strings.Replace(buf.String(), "encoding: gzip", "encoding: raw", 1))},
		{"truncated", buf.Bytes()[:buf.Len()-20]},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, limit := c.b, 1<<20
			if len(b) == 0 {
				b, limit = buf.Bytes(), 32*64*3-1
			}
			if _, _, err := ReadLabelsNRRD(bytes.NewReader(b), limit); err == nil {
				t.Error("read without error")
			}
		})
	}
}
