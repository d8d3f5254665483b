package imaging

import (
	"context"
	"math"
	"testing"
)

// smallPhantom is a reduced cube (same 6 × 6 mm field, fewer samples) so
// the tests stay quick; the full-size cube is exercised by the benchmark.
func smallPhantom(seed uint64, fluid bool) *Phantom {
	return NewPhantom(PhantomOptions{Seed: seed, Frames: 13, Rows: 248, Cols: 256, Fluid: fluid})
}

func TestSubfieldFollowsETDRSGeometry(t *testing.T) {
	cases := []struct {
		x, y float64
		want string
	}{
		{0, 0, "C"}, {0.3, 0.3, "C"}, {0, 1, "IS"}, {1, 0, "IN"}, {0, -1, "II"}, {-1, 0, "IT"},
		{0, 2, "OS"}, {2, 0, "ON"}, {0, -2.9, "OI"}, {-2.9, 0, "OT"}, {3.1, 0, ""}, {2.2, 2.2, ""},
	}
	for _, c := range cases {
		if got := subfield(c.x, c.y, math.Hypot(c.x, c.y)); got != c.want {
			t.Errorf("subfield(%v, %v) = %q, want %q", c.x, c.y, got, c.want)
		}
	}
}

// TestStagesWorkAtReducedSampling runs the stages on the reduced cubes the
// end-to-end tests upload (13 × 248 × 256, twice the axial spacing): the
// boundaries stay within 1.5 px and the fluid is found and typed.
func TestStagesWorkAtReducedSampling(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		a := measureAccuracy(t, PhantomOptions{Seed: seed, Frames: 13, Rows: 248, Cols: 256, Fluid: seed == 2}, ExportLinear16, false)
		for _, n := range BoundaryNames {
			if a.maePx[n] > 1.5 {
				t.Errorf("seed %d: %s mean absolute error %.2f px, want ≤ 1.5", seed, n, a.maePx[n])
			}
		}
		if seed == 2 && (a.fluidDice < 0.7 || lesionTypes(a.found) != lesionTypes(a.truth.Lesions)) {
			t.Errorf("seed %d: fluid Dice %.2f, lesions %s, truth %s", seed, a.fluidDice, lesionTypes(a.found), lesionTypes(a.truth.Lesions))
		}
	}
}

// TestLayerThicknessesAddUpToTheRetina checks the per-layer maps: the
// six layers tile the retina from ILM to BM, in the truth as in a
// segmentation, and the report schema carries them with their subfields.
func TestLayerThicknessesAddUpToTheRetina(t *testing.T) {
	ctx := context.Background()
	p := NewPhantom(PhantomOptions{Seed: 7, Frames: 13, Rows: 248, Cols: 256, Drusen: true})
	truth, err := p.Truth(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Measure(ctx, p.Clean, p.Layers())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != len(RetinalLayers) || len(truth.Measurements.Layers) != len(RetinalLayers) {
		t.Fatalf("%d layers measured, %d in the truth; want %d", len(m.Layers), len(truth.Measurements.Layers), len(RetinalLayers))
	}
	for i, total := range m.ThicknessMapUm {
		var sum float32
		for _, l := range m.Layers {
			sum += l.MapUm[i]
		}
		if math.Abs(float64(sum-total)) > 0.01 {
			t.Fatalf("A-scan %d: layers add up to %.2f µm, retina is %.2f µm", i, sum, total)
		}
	}
	for _, l := range truth.Measurements.Layers {
		if l.MapUm != nil || len(l.ETDRS) != len(ETDRSSubfields) || l.MeanUm <= 0 {
			t.Errorf("truth layer %s = %+v; want subfield means and no map", l.Name, l)
		}
	}
	if got := lesionTypes(truth.Lesions); got != "[drusen]" {
		t.Errorf("truth lesions %s, want drusen", got)
	}
}
