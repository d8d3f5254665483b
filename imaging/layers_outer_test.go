package imaging

import (
	"math"
	"testing"
)

// TestBMBaselineLiftsADomeAndNotAStep: under a dome raised off a flat
// membrane (a druse) Bruch's membrane is put back on the baseline; where
// the retina steps down (an eye's movement between A-scans) the higher
// side is no raise and keeps its edge; so does a flat edge.
func TestBMBaselineLiftsADomeAndNotAStep(t *testing.T) {
	const n, half, tol = 300, 85, 2.0
	flat := func(c int) float32 { return 100 + float32(c)/100 }
	for _, c := range []struct {
		name  string
		edge  func(c int) float32
		moved func(c int) bool // where the baseline must replace the edge
	}{
		{"flat", flat, func(int) bool { return false }},
		{"dome", func(c int) float32 {
			if d := math.Abs(float64(c - 150)); d < 15 {
				return flat(c) - float32(8*(1-d*d/225))
			}
			return flat(c)
		}, func(c int) bool { return math.Abs(float64(c-150)) < 8 }},
		{"step", func(c int) float32 {
			if c >= 150 {
				return flat(c) + 10
			}
			return flat(c)
		}, func(int) bool { return false }},
	} {
		for _, h := range []int{half, n} { // a local fit, and one over the whole B-scan (both with deeperBothSides)
			edge := make([]float32, n)
			for i := range edge {
				edge[i] = c.edge(i)
			}
			bmBaseline(edge, tol, h)
			for i, z := range edge {
				want := c.edge(i)
				if c.moved(i) {
					want = flat(i)
				}
				if c.name == "dome" && !c.moved(i) && math.Abs(float64(i-150)) < 15 {
					continue // the dome's flanks, within tolerance of the baseline or not
				}
				if math.Abs(float64(z-want)) > 0.75 {
					t.Errorf("%s, half %d: A-scan %d at row %.2f, want %.2f", c.name, h, i, z, want)
					break
				}
			}
		}
	}
}

// TestTheRPEBandEndsWhereItFallsIntoTheChoroid: an outer retina of
// three bands, the top one (EZ) the brightest and each parted from the
// next by a two-row dip (the first a steeper step down than the fall
// into the choroid), over a dimmer choroid: the band's lower edge is
// found under the lowest band, not under the ridge.
func TestTheRPEBandEndsWhereItFallsIntoTheChoroid(t *testing.T) {
	const rows, cols = 120, 64
	sp := Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120}
	s := newFrameSegmenter(rows, cols, sp)
	level := func(r int) float32 {
		switch {
		case r < 40:
			return 8.5 // the outer nuclear layer
		case r < 44:
			return 10.6 // EZ
		case r < 46:
			return 9.0 // a dip that steps down more than the fall into the choroid
		case r < 49:
			return 10.2 // interdigitation zone
		case r < 51:
			return 9.7
		case r < 56:
			return 10.0 // RPE
		default:
			return 8.8 // choroid
		}
	}
	for r := range rows {
		for c := range cols {
			s.logs[r*cols+c] = level(r)
		}
	}
	for c := range cols {
		s.ridge[c] = 41
	}
	px := func(um float64) int { return max(1, int(math.Round(um/sp.AxialUm))) }
	s.fallIntoChoroid(px, px(8))
	for c, r := range s.bottom {
		if r != 56 {
			t.Fatalf("A-scan %d: the band's lower edge at row %d, want 56 (under the RPE, the lowest band)", c, r)
		}
	}
}
