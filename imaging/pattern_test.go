package imaging

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestPatternIsReadFromTheDICOMAndChecked(t *testing.T) {
	sp := Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120}
	for _, c := range []struct {
		description string
		frames      int
		declared    Pattern
		want        Pattern
		err         string
	}{
		{"", 49, "", Cube, ""},
		{"", 1, "", Line, ""},
		{"", 1, Circle, Circle, ""},
		{"HEYEX HSF-OCT-103, scan pattern 2 (circle)", 1, "", Circle, ""},
		{"Macular Cube 512x128", 128, "", Cube, ""},
		{"RNFL circle", 1, Cube, "", "describes a circle"},
		{"HD 21 Line", 1, "", Line, ""},
		{"Radial 6 lines", 6, "", Radial, ""},
		{"", 3, Line, "", "has one B-scan"},
		{"", 3, Circle, "", "has one B-scan"},
		{"Volume scan", 1, "", Line, ""},
	} {
		v := NewVolume(c.frames, 16, 16, sp)
		var buf bytes.Buffer
		if err := WriteDICOM(&buf, v, Header{SOPInstanceUID: "1.2", Description: c.description}); err != nil {
			t.Fatal(err)
		}
		read, _, err := ReadDICOM(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResolvePattern(read, c.declared)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q, %d frames, declared %q: %v, %v; want an error saying %q", c.description, c.frames, c.declared, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q, %d frames, declared %q: %q %v, want %q", c.description, c.frames, c.declared, got, err, c.want)
		}
	}
}

// TestALineThroughTheFoveaHasACentralThickness measures single B-scans of
// a phantom cube: the one through the fovea gives the central thickness
// the phantom drew there (mean over the central 1 mm, from its exact
// boundaries); one 2.5 mm away says it crosses no fovea and gives none.
func TestALineThroughTheFoveaHasACentralThickness(t *testing.T) {
	o := PhantomOptions{Seed: 6, Frames: 49, Rows: 248, Cols: 256}
	p := NewPhantom(o)
	through := int(math.Round(p.Geometry.FoveaYMm*1000/p.Volume.Spacing.FrameUm + float64(o.Frames-1)/2))
	for _, c := range []struct {
		name  string
		frame int
		fovea bool
	}{{"through the fovea", through, true}, {"2.5 mm away", through - 20, false}} {
		t.Run(c.name, func(t *testing.T) {
			line := NewVolume(1, o.Rows, o.Cols, p.Volume.Spacing)
			copy(line.Data, p.Volume.Frame(c.frame))
			line.Pattern = Line
			a, _ := analyze(t, line)
			if a.line() == nil {
				t.Fatalf("not measured: %q", a.NotMeasurable)
			}
			if !c.fovea {
				if a.line().CentralThicknessUm != 0 || a.line().NoFovea == "" {
					t.Errorf("central thickness %.1f on a line away from the fovea (no fovea: %q)", a.line().CentralThicknessUm, a.line().NoFovea)
				}
				return
			}
			var sum float64
			var n int
			for col := range o.Cols {
				x := (float64(col) - float64(o.Cols-1)/2) * p.Volume.Spacing.LateralUm / 1000
				if math.Abs(x-p.Geometry.FoveaXMm) <= 0.5 {
					i := c.frame*o.Cols + col
					sum += (p.Boundaries[BM][i] - p.Boundaries[ILM][i]) * p.Volume.Spacing.AxialUm
					n++
				}
			}
			want := sum / float64(n)
			if a.line().NoFovea != "" || math.Abs(a.line().CentralThicknessUm-want) > 8 {
				t.Errorf("central thickness %.1f µm (no fovea: %q), the phantom's %.1f", a.line().CentralThicknessUm, a.line().NoFovea, want)
			}
		})
	}
}
