package imaging

import (
	"fmt"
	"testing"
)

// gateScan builds a one-B-scan volume of cols A-scans whose first good
// A-scans show a clear retina (a bright band 200 µm thick, well below the
// top of the image) and whose others show none, with layers that say so.
// The good ones form one block, so the gate's majority vote keeps every
// one of them: exactly good of cols A-scans are gradable.
func gateScan(cols, good int) (*Volume, *Layers) {
	const rows, ilm, bm = 64, 20, 40
	// 10 µm rows: thicker than the RPE band, so no A-scan is judged by it.
	v := NewVolume(1, rows, cols, Spacing{AxialUm: 10, LateralUm: 10, FrameUm: 10})
	l := &Layers{Frames: 1, Cols: cols, Boundaries: map[string][]float32{ILM: make([]float32, cols), BM: make([]float32, cols)},
		Retina: make([]bool, cols)}
	for c := range cols {
		l.Boundaries[ILM][c], l.Boundaries[BM][c] = ilm, bm
		l.Retina[c] = c < good
		for r := range rows {
			x := float32(workingBackground)
			if c < good && r >= ilm && r < bm {
				x = 20 * workingBackground
			}
			v.Set(0, r, c, x)
		}
	}
	return v, l
}

// The quality gate's fractions at their edges: under 0.3 of the A-scans
// gradable is ungradable, 0.3 up to under 0.9 partly gradable, 0.9 and
// more (every B-scan at least half gradable) fully gradable.
func TestTheQualityGateVerdictAtTheEdgesOfItsFractions(t *testing.T) {
	const cols = 1000 // fractions in steps of 0.001
	cases := []struct {
		good int
		want Gradability
	}{
		{0, Ungradable},
		{299, Ungradable},
		{300, PartlyGradable},
		{301, PartlyGradable},
		{500, PartlyGradable},
		{899, PartlyGradable},
		{900, Gradable},
		{901, Gradable},
		{1000, Gradable},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d of %d", c.good, cols), func(t *testing.T) {
			q := Assess(gateScan(cols, c.good))
			if want := float64(c.good) / cols; q.GradableFraction != want {
				t.Fatalf("gradable fraction %v, want %v: the scan is not what the test means", q.GradableFraction, want)
			}
			if q.Gradable != c.want {
				t.Errorf("verdict %q at a gradable fraction of %v, want %q (reasons %v)", q.Gradable, q.GradableFraction, c.want, q.Reasons)
			}
		})
	}
}

// A fully gradable exam also needs every B-scan at least half gradable:
// over 0.9 of the A-scans, with one B-scan of six under half, is partial;
// exactly half is enough.
func TestTheQualityGateWantsEveryBScanAtLeastHalfGradableForFull(t *testing.T) {
	const cols, frames = 1000, 6
	for _, c := range []struct {
		weak int // gradable A-scans of the last B-scan
		want Gradability
	}{
		{499, PartlyGradable},
		{500, Gradable},
	} {
		t.Run(fmt.Sprint(c.weak), func(t *testing.T) {
			// Five full B-scans and a weak one, stacked.
			v := NewVolume(frames, 64, cols, Spacing{AxialUm: 10, LateralUm: 10, FrameUm: 10})
			l := &Layers{Frames: frames, Cols: cols, Boundaries: map[string][]float32{ILM: nil, BM: nil}}
			for f := range frames {
				good := cols
				if f == frames-1 {
					good = c.weak
				}
				fv, fl := gateScan(cols, good)
				copy(v.Frame(f), fv.Frame(0))
				l.Boundaries[ILM] = append(l.Boundaries[ILM], fl.Boundaries[ILM]...)
				l.Boundaries[BM] = append(l.Boundaries[BM], fl.Boundaries[BM]...)
				l.Retina = append(l.Retina, fl.Retina...)
			}
			q := Assess(v, l)
			if q.GradableFraction < 0.9 {
				t.Fatalf("gradable fraction %v: the scan is not what the test means", q.GradableFraction)
			}
			if q.Gradable != c.want {
				t.Errorf("verdict %q with %d of %d A-scans of one B-scan gradable, want %q", q.Gradable, c.weak, cols, c.want)
			}
		})
	}
}
