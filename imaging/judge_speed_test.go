package imaging

import (
	"context"
	"math"
	"slices"
	"testing"
)

// boundaryCNRReference is boundaryCNR as its definition reads: each
// A-scan's window summed and sorted on its own. boundaryCNR takes each
// A-scan's part once and must give the same ratios to the last bit.
func boundaryCNRReference(v *Volume, rows []float32) []float64 {
	out := make([]float64, v.Frames*v.Cols)
	if len(rows) != len(out) {
		return out
	}
	e := max(2, int(math.Round(cnrDepthUm/v.Spacing.AxialUm)))
	for f := range v.Frames {
		img := v.Frame(f)
		lg := func(r, c int) float64 {
			r = min(max(r, 0), v.Rows-1)
			return math.Log1p(float64(max(img[r*v.Cols+c], 0)))
		}
		row := func(c int) (int, bool) {
			x := float64(rows[f*v.Cols+c])
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x >= float64(v.Rows) {
				return 0, false
			}
			return int(math.Round(x)), true
		}
		for c := range v.Cols {
			var step float64
			var n int
			var diffs []float64
			ok := true
			for cc := max(0, c-cnrHalfCols); cc <= min(v.Cols-1, c+cnrHalfCols); cc++ {
				r, in := row(cc)
				if !in {
					ok = false
					break
				}
				for k := 1; k <= e; k++ {
					step += lg(r-k, cc) - lg(r+k-1, cc)
					n++
					if cc > max(0, c-cnrHalfCols) {
						diffs = append(diffs, math.Abs(lg(r-k, cc)-lg(r-k, cc-1)), math.Abs(lg(r+k-1, cc)-lg(r+k-1, cc-1)))
					}
				}
			}
			if !ok || n == 0 || len(diffs) == 0 {
				continue
			}
			slices.Sort(diffs)
			sigma := max(diffs[len(diffs)/2]*1.4826/math.Sqrt2, 1e-3)
			out[f*v.Cols+c] = math.Abs(step/float64(n)) / sigma
		}
	}
	return out
}

// TestBoundaryCNRIsItsDefinition: the contrast-to-noise ratio taken
// once per A-scan equals the window-by-window definition bit for bit,
// on every boundary of a phantom and of a real circle, and on rows and
// samples no eye gives (NaN and infinite rows, rows outside the image,
// infinite and negative samples).
func TestBoundaryCNRIsItsDefinition(t *testing.T) {
	ctx := context.Background()
	p := NewPhantom(PhantomOptions{Seed: 3, Frames: 3, Cols: 128, Fluid: true, Drusen: true})
	real, _ := readRealScan(t, "spectralis-circle-2")
	real, _ = Normalize(real)
	odd := NewVolume(2, 40, 24, Spacing{AxialUm: 3.9, LateralUm: 11, FrameUm: 100})
	for i := range odd.Data {
		odd.Data[i] = float32(i%97) * 13
	}
	odd.Data[5*24+3], odd.Data[20*24+7], odd.Data[40*24+24+9] = float32(math.Inf(1)), -7, float32(math.Inf(1))
	oddRows := make([]float32, 2*24)
	for i := range oddRows {
		oddRows[i] = float32(i%39) + 0.4
	}
	oddRows[3], oddRows[17], oddRows[30], oddRows[31] = float32(math.NaN()), float32(math.Inf(-1)), 40, -1
	cases := []struct {
		name string
		v    *Volume
		rows map[string][]float32
	}{{"odd volume", odd, map[string][]float32{"odd": oddRows, "short": oddRows[:5]}}}
	for _, c := range []struct {
		name string
		v    *Volume
	}{{"phantom", p.Volume}, {"real circle", real}} {
		den, err := Denoise(ctx, c.v, DenoiseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := SegmentLayers(ctx, den)
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string][]float32{rpeBottomName: l.RPEBottom}
		for _, b := range BoundaryNames {
			rows[b] = l.Boundaries[b]
		}
		cases = append(cases, struct {
			name string
			v    *Volume
			rows map[string][]float32
		}{c.name, den, rows})
	}
	for _, c := range cases {
		for b, rows := range c.rows {
			got, want := boundaryCNR(c.v, rows), boundaryCNRReference(c.v, rows)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
					t.Errorf("%s, %s: A-scan %d: %v, the definition gives %v", c.name, b, i, got[i], want[i])
					break
				}
			}
		}
	}
}

// TestSelectNthIsTheSortedValue: selection returns what sorting puts at
// each index, on ties, runs and random values.
func TestSelectNthIsTheSortedValue(t *testing.T) {
	for _, xs := range [][]float64{{1}, {2, 1}, {3, 3, 3, 3}, {5, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, {0, -0.5, 7, 7, 7, 1e-9, -3}} {
		sorted := slices.Sorted(slices.Values(xs))
		for k := range xs {
			if got := selectNth(slices.Clone(xs), k); got != sorted[k] {
				t.Errorf("%v: index %d: %v, sorted %v", xs, k, got, sorted[k])
			}
		}
	}
}
