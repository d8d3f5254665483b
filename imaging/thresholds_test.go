package imaging

import (
	"math"
	"testing"
)

// edgeVolume is one B-scan of blocks of blockCols A-scans with a step
// edge at row edgeRow, whose contrast-to-noise ratio (boundaryCNR) is
// cnrs[k] in block k: in log intensity the rows above the edge are
// brighter by a step s, and neighbouring A-scans differ by d in every
// row, so the robust σ is d·1.4826/√2 and the ratio s/σ. One glint far
// from the edge is the volume's brightest sample, so that no layer is
// saturated (saturatedSamples).
func edgeVolume(cnrs []float64) *Volume {
	const rows, d = 64, 0.1
	sigma := d * 1.4826 / math.Sqrt2
	v := NewVolume(1, rows, blockCols*len(cnrs), Spacing{AxialUm: 3.9, LateralUm: 11.7, FrameUm: 120})
	for k, cnr := range cnrs {
		for c := k * blockCols; c < (k+1)*blockCols; c++ {
			for r := range rows {
				lg := 3 + d*float64(c%2)
				if r < edgeRow {
					lg += cnr * sigma
				}
				v.Set(0, r, c, float32(math.Expm1(lg)))
			}
		}
	}
	v.Set(0, rows-1, 0, 1e9)
	return v
}

const (
	edgeRow   = 32
	blockCols = 2*cnrHalfCols + 6 // a window's A-scans all in one block at the block's middle
)

// TestEachBoundaryIsCalledReliableFromItsOwnContrast walks every boundary
// judged with A-scans whose contrast-to-noise ratio sits just under and
// just over each threshold: a boundary is supported from a ratio of 2,
// and called reliable (what every figure rests on) from its calibrated
// ratio (docs/imaging.md, Calibration) — RNFL/GCL from 7, the inner
// boundaries and Bruch's membrane from 4, the rest from 2 — and the RPE,
// a ridge, never. The thresholds are the test's own, so a loosened or
// tightened one fails here, in the unit pass, not only in the full-size
// accuracy run.
func TestEachBoundaryIsCalledReliableFromItsOwnContrast(t *testing.T) {
	const never = math.MaxFloat64
	cnrs := []float64{1.95, 2.05, 3.95, 4.05, 6.95, 7.05, 12}
	v := edgeVolume(cnrs)
	rows := make([]float32, v.Cols)
	for i := range rows {
		rows[i] = edgeRow
	}
	for _, c := range []struct {
		name, boundary string
		reliable       float64 // the least ratio at which it is called reliable
		bmFromBandRows float32 // BM: its distance from the RPE band's lower edge
	}{
		{"ILM", ILM, 2, 0},
		{"RNFL/GCL", RNFLGCL, 7, 0},
		{"IPL/INL", IPLINL, 4, 0},
		{"INL/OPL", INLOPL, 4, 0},
		{"OPL/ONL", OPLONL, 4, 0},
		{"EZ", EZ, 2, 0},
		{"RPE", RPE, never, 0},
		{"BM seen, on the band's lower edge", BM, 4, 0},
		{"BM seen, a row off the band's lower edge", BM, 4, 1},
		{"BM not seen, 2 rows off the band's lower edge", BM, never, 2},
		{"RPE bottom", rpeBottomName, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &Layers{Frames: 1, Cols: v.Cols, Boundaries: map[string][]float32{}}
			if c.boundary == rpeBottomName || c.boundary == BM {
				l.RPEBottom = make([]float32, len(rows))
				for i := range rows {
					l.RPEBottom[i] = rows[i] - c.bmFromBandRows
				}
			}
			if c.boundary != rpeBottomName {
				l.Boundaries[c.boundary] = rows
			}
			ev := judgeBoundaries(v, l, l, nil)
			if len(ev.reliable[c.boundary]) != v.Cols {
				t.Fatalf("%s was not judged", c.name)
			}
			for k, want := range cnrs {
				i := k*blockCols + blockCols/2
				got := ev.cnr[c.boundary][i]
				if math.Abs(got-want) > 0.01 {
					t.Fatalf("test volume: block %d's contrast-to-noise ratio is %.3f, want %.2f", k, got, want)
				}
				if sup := ev.supported[c.boundary][i]; sup != (want >= defaultMinCNRWant) {
					t.Errorf("%s at a contrast-to-noise ratio of %.2f: supported %v, want %v (a boundary is supported from a ratio of %v)",
						c.name, got, sup, !sup, defaultMinCNRWant)
				}
				what := "reliable from a contrast-to-noise ratio of " + formatFloat(c.reliable)
				if c.reliable == never {
					what = "never reliable"
				}
				switch rel, wantRel := ev.reliable[c.boundary][i], want >= defaultMinCNRWant && want >= c.reliable; {
				case rel && !wantRel:
					t.Errorf("%s is called reliable at a contrast-to-noise ratio of %.2f, but is %s: figures would rest on a boundary the calibration does not vouch for",
						c.name, got, what)
				case !rel && wantRel:
					t.Errorf("%s is not called reliable at a contrast-to-noise ratio of %.2f, but is %s: figures it vouches for would be withheld",
						c.name, got, what)
				}
			}
		})
	}
}

// defaultMinCNRWant is the ratio from which a boundary is supported
// (the test's own copy of the calibration).
const defaultMinCNRWant = 2.0

// TestEachFigureNeedsItsBoundariesReliableInTheirShare walks the
// per-boundary shares a figure needs (the test's own copies of the
// calibration): each boundary reliable in exactly its share of the
// A-scans holds, in one A-scan fewer it is the weak boundary named, and
// every boundary the figure needs is walked.
func TestEachFigureNeedsItsBoundariesReliableInTheirShare(t *testing.T) {
	const n = 100
	for _, f := range []struct {
		figure string
		need   func(string) float64
		shares map[string]float64
	}{
		{"fluid and drusen (lesionShare)", lesionShare, map[string]float64{EZ: 0.75, rpeBottomName: 0.75, BM: 0.4}},
		{"a cube's subfields and layers (minReliableShare)", minReliableShare, map[string]float64{
			ILM: 0.5, RNFLGCL: 0.5, IPLINL: 0.5, INLOPL: 0.5, OPLONL: 0.5, EZ: 0.5, BM: 0.3}},
	} {
		var needs []string
		for b := range f.shares {
			needs = append(needs, b)
		}
		for b, share := range f.shares {
			k := int(math.Round(share * n))
			for _, c := range []struct {
				holds    int
				wantWeak string
			}{{k, ""}, {k - 1, b}} {
				rel := map[string][]bool{}
				for _, other := range needs {
					rel[other] = firstOf(n, n)
				}
				rel[b] = firstOf(n, c.holds)
				weak, got := reliability(rel, func(int) bool { return true }, n, f.need, needs...)
				if weak != c.wantWeak {
					t.Errorf("%s with %s reliable in %d%% of the A-scans (%.0f%% needed): weak boundary %q (share %.2f), want %q",
						f.figure, b, c.holds, 100*share, weak, got, c.wantWeak)
				}
			}
		}
	}
}
