package imaging

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// analyze runs a volume as a device stored it through every image stage.
func analyze(t *testing.T, v *Volume) (*Analysis, *Layers) {
	a, l, _ := analyzeWith(t, v)
	return a, l
}

// analyzeWith is analyze that also says what normalisation found.
func analyzeWith(t *testing.T, v *Volume) (*Analysis, *Layers, Intensity) {
	t.Helper()
	ctx := context.Background()
	w, intensity := Normalize(v)
	den, err := Denoise(ctx, w, DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(ctx, den, l)
	if err != nil {
		t.Fatal(err)
	}
	return a, l, intensity
}

// TestTheQualityGateRefusesWhatShowsNoRetina: a valid scan of pure
// speckle, of uniform noise or of one level is ungradable, with reasons,
// and carries no measurement at all.
func TestTheQualityGateRefusesWhatShowsNoRetina(t *testing.T) {
	sp := Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name  string
		fill  func(i int) float32
		cols  int
		frame int
	}{
		{"speckle", func(int) float32 { return float32(rng.ExpFloat64() * 1000) }, 256, 3},
		{"uniform 8-bit noise, one B-scan", func(int) float32 { return float32(rng.IntN(256)) }, 384, 1},
		{"blank", func(int) float32 { return 0 }, 256, 3},
		{"one level", func(int) float32 { return 700 }, 256, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := NewVolume(c.frame, 248, c.cols, sp)
			for i := range v.Data {
				v.Data[i] = c.fill(i)
			}
			a, _ := analyze(t, v)
			if a.Quality.Gradable != Ungradable || a.Measurable() || len(a.NotMeasurable) == 0 || len(a.Quality.Reasons) == 0 {
				t.Errorf("gradable %s, measurable %v, reasons %q, not measurable %q", a.Quality.Gradable, a.Measurable(),
					a.Quality.Reasons, a.NotMeasurable)
			}
			if a.Quality.SignalStrength >= 4 {
				t.Errorf("signal strength %.1f of what shows no retina", a.Quality.SignalStrength)
			}
		})
	}
}

// TestHalfBlankedCubesArePartlyGradable blanks half the B-scans of a
// cube: every other one (the cube is then as dense as a 25-line one, and
// is measured over the rest, close to the truth), or the superior half
// (the fovea lies at its edge, so no central subfield is reported).
func TestHalfBlankedCubesArePartlyGradable(t *testing.T) {
	o := PhantomOptions{Seed: 3, Frames: 49, Rows: 248, Cols: 256}
	truth, err := NewPhantom(o).Truth(context.Background(), o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		blank      func(f int) bool
		measurable bool
	}{
		{"every other B-scan", func(f int) bool { return f%2 == 1 }, true},
		{"the superior half", func(f int) bool { return f < 25 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPhantom(o)
			for f := range p.Volume.Frames {
				if c.blank(f) {
					clear(p.Volume.Frame(f))
				}
			}
			a, _ := analyze(t, p.Volume)
			q := a.Quality
			if q.Gradable != PartlyGradable || math.Abs(q.GradableFraction-0.5) > 0.05 || len(q.Reasons) == 0 {
				t.Fatalf("gradable %s over %.2f of the A-scans, reasons %q", q.Gradable, q.GradableFraction, q.Reasons)
			}
			for _, b := range q.BScans {
				if blank := c.blank(b.Frame); blank != (b.GradableFraction == 0) {
					t.Errorf("B-scan %d (blanked %v): %.2f gradable, confidence %.2f", b.Frame, blank, b.GradableFraction, b.Confidence)
				}
			}
			if !c.measurable {
				if a.cube() != nil || !strings.Contains(strings.Join(a.NotMeasurable, " "), "fovea") {
					t.Errorf("measured (%v) around a fovea at the edge of the blanked half; not measurable %q", a.cube() != nil, a.NotMeasurable)
				}
				return
			}
			if a.cube() == nil {
				t.Fatalf("nothing measured: %q", a.NotMeasurable)
			}
			if d := a.cube().CentralSubfieldThicknessUm - truth.Measurements.CentralSubfieldThicknessUm; math.Abs(d) > 8 {
				t.Errorf("CST %.1f µm over the gradable half, truth %.1f", a.cube().CentralSubfieldThicknessUm, truth.Measurements.CentralSubfieldThicknessUm)
			}
			if math.Abs(a.cube().GradableCoverage-0.5) > 0.05 {
				t.Errorf("coverage of the 6 mm circle %.2f, want about half", a.cube().GradableCoverage)
			}
		})
	}
}

// TestAFullScanIsFullyGradable: a phantom in every export passes the
// gate whole.
func TestAFullScanIsFullyGradable(t *testing.T) {
	for _, e := range Exports {
		t.Run(string(e), func(t *testing.T) {
			p := NewPhantom(PhantomOptions{Seed: 7, Frames: 9, Rows: 248, Cols: 256, Fluid: true})
			lv, _ := e.Levels(p.Volume)
			a, _ := analyze(t, lv)
			if a.Quality.Gradable != Gradable || a.Quality.GradableFraction < 0.95 || a.Quality.Grade != "good" || a.cube() == nil {
				q := a.Quality
				t.Errorf("gradable %s over %.3f, grade %s (%q); cube %v, not measurable %q, withheld %+v", q.Gradable, q.GradableFraction, q.Grade, q.Reasons,
					a.cube() != nil, a.NotMeasurable, a.Withheld)
			}
		})
	}
}
