package imaging

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTheRetinaIsFoundUnderAVitreousHaze: a faint, featureless haze in
// the vitreous that the tissue threshold joins to the retina (over the
// optic disc's rim, at the edge of a wide scan) is not taken for the
// retina's top; a dim retina whose surface reflex lies over a dark outer
// nuclear layer (a foveal floor) is not taken for a haze.
func TestTheRetinaIsFoundUnderAVitreousHaze(t *testing.T) {
	const rows, cols, surface = 300, 200, 120
	sp := Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120}
	bg, span := math.Log1p(workingBackground), 3.9
	type band struct {
		from  int
		level float64 // share of the way from the background to the brightest tissue
	}
	for _, c := range []struct {
		name string
		// column is the A-scan's bands, top down, in A-scan c
		column func(c int) []band
	}{
		{"a haze over half the B-scan", func(c int) []band {
			haze := 0.3 // none: the vitreous's own level
			if c >= cols/2 {
				haze = 0.45
			}
			return []band{{0, 0.3}, {60, haze}, {surface, 1}, {140, 0.75}, {200, 0.6}, {230, 1}, {242, 0.6}}
		}},
		{"a dim foveal floor over the ellipsoid zone", func(int) []band {
			return []band{{0, 0.05}, {surface, 0.45}, {128, 0.2}, {180, 1}, {196, 0.6}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			logs := make([]float32, rows*cols)
			for col := range cols {
				bands := c.column(col)
				for r := range rows {
					level := 0.0
					for _, b := range bands {
						if r >= b.from {
							level = b.level
						}
					}
					logs[r*cols+col] = float32(bg + span*(level+0.05*rng.NormFloat64()))
				}
			}
			rf := newRetinaFinder(rows, cols, sp)
			top := make([]int, cols)
			found, clipped := make([]bool, cols), make([]bool, cols)
			if !rf.find(logs, top, found, clipped) {
				t.Fatal("no retina found")
			}
			for col := range cols {
				if !found[col] || clipped[col] || math.Abs(float64(top[col]-surface)) > 4 {
					t.Fatalf("A-scan %d: the retina's top at row %d (found %v, clipped %v), its surface at %d", col, top[col], found[col], clipped[col], surface)
				}
			}
		})
	}
}
