package imaging

import (
	"context"
	"math"
	"slices"
	"sync"
)

// Layers holds segmented boundaries: for each boundary name, the row
// (fractional) of every A-scan, indexed [frame*Cols+col].
type Layers struct {
	Frames     int                  `json:"frames"`
	Cols       int                  `json:"cols"`
	Boundaries map[string][]float32 `json:"boundaries"`
	// RPEBottom is the lower edge of the RPE band as found, per A-scan. It
	// equals BM except where the RPE is raised off Bruch's membrane
	// (drusen, PED); there BM is the fitted baseline below it.
	RPEBottom []float32 `json:"rpeBottom,omitempty"`
}

// has reports whether every named boundary is present and complete.
func (l *Layers) has(names ...string) bool {
	for _, n := range names {
		if len(l.Boundaries[n]) != l.Frames*l.Cols {
			return false
		}
	}
	return true
}

// Row returns boundary name at frame f, column c.
func (l *Layers) Row(name string, f, c int) float32 { return l.Boundaries[name][f*l.Cols+c] }

// SegmentLayers finds the eight boundaries of BoundaryNames in a denoised
// volume by graph search (see pathFinder), each searched inside the region
// the ones before it bound, in this order:
//
//  1. ILM, the strongest dark-to-light boundary of the whole B-scan;
//  2. the RPE band, the brightest ridge below it, and the band's lower
//     edge (light-to-dark) just beneath;
//  3. EZ, dark-to-light between the retina's midline and the RPE band;
//  4. RPE, dark-to-light between the EZ and the ridge;
//  5. OPL/ONL, light-to-dark between the ILM and the EZ;
//  6. INL/OPL, dark-to-light above it;
//  7. IPL/INL, light-to-dark in the outer three fifths between the ILM and
//     the INL/OPL (under a vessel's shadow the RNFL/GCL is the stronger
//     edge, so it must stay outside the region);
//  8. RNFL/GCL, light-to-dark between the ILM and the IPL/INL.

// Bruch's membrane is the RPE band's lower edge, except where the RPE is
// raised (drusen, PED): there it is the baseline of a robust second-order
// fit to that edge across the B-scan (after Chiu et al. 2012). Every
// boundary is then refined to sub-pixel position, kept smooth across
// neighbouring B-scans (smoothAcrossFrames) and A-scans, and kept in order.
func SegmentLayers(ctx context.Context, v *Volume) (*Layers, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	l := &Layers{Frames: v.Frames, Cols: v.Cols, Boundaries: map[string][]float32{},
		RPEBottom: make([]float32, v.Frames*v.Cols)}
	for _, n := range BoundaryNames {
		l.Boundaries[n] = make([]float32, v.Frames*v.Cols)
	}
	px := func(um float64) int { return max(1, int(math.Round(um/v.Spacing.AxialUm))) }
	finders := sync.Pool{New: func() any { return newFrameSegmenter(v.Rows, v.Cols) }}
	forEachFrame(v.Frames, func(f int) {
		if ctx.Err() != nil {
			return
		}
		s := finders.Get().(*frameSegmenter)
		defer finders.Put(s)
		s.segment(v.Frame(f), px, l, f)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// An excursion is more than 4 rows, or than the 10% of the B-scan
	// spacing that normal anatomy can curve by between coarse B-scans.
	tol := float32(max(4, 0.1*v.Spacing.FrameUm/v.Spacing.AxialUm))
	ordered := make([][]float32, 0, len(BoundaryNames)+1)
	for _, n := range BoundaryNames[:len(BoundaryNames)-1] {
		ordered = append(ordered, l.Boundaries[n])
	}
	ordered = append(ordered, l.RPEBottom, l.Boundaries[BM])
	for i, b := range ordered {
		smoothAcrossFrames(b, v.Frames, v.Cols, tol)
		smoothAlong(b, v.Frames, v.Cols, 2)
		if i > 0 {
			for j, above := range ordered[i-1] {
				b[j] = max(b[j], above)
			}
		}
	}
	return l, nil
}

// frameSegmenter is one worker's state for segmenting B-scans.
type frameSegmenter struct {
	pf                  *pathFinder
	logs                []float32
	lo, hi              []int
	ilm, ridge, bottom  []int
	ez, rpe, oplonl     []int
	inlopl, iplinl, nfl []int
}

func newFrameSegmenter(rows, cols int) *frameSegmenter {
	mk := func() []int { return make([]int, cols) }
	return &frameSegmenter{pf: newPathFinder(rows, cols), logs: make([]float32, rows*cols),
		lo: mk(), hi: mk(), ilm: mk(), ridge: mk(), bottom: mk(), ez: mk(), rpe: mk(), oplonl: mk(),
		inlopl: mk(), iplinl: mk(), nfl: mk()}
}

// segment finds the boundaries of B-scan f (img) and stores them in l.
func (s *frameSegmenter) segment(img []float32, px func(um float64) int, l *Layers, f int) {
	pf, cols, rows := s.pf, s.pf.cols, s.pf.rows
	for i, x := range img {
		s.logs[i] = float32(math.Log1p(float64(max(x, 0))))
	}
	// The gradient window spans about 8 µm on each side of a boundary; a
	// region ends k or k+1 rows short of the boundary below it, where
	// the window would still see that boundary.
	k := px(8)
	pf.setImage(s.logs, k)
	region := func(lo, hi func(c int) int) {
		for c := range cols {
			s.lo[c], s.hi[c] = lo(c), hi(c)
		}
	}
	region(func(int) int { return k }, func(int) int { return rows - k })
	pf.find(darkToLight, s.lo, s.hi, s.ilm)

	region(func(c int) int { return s.ilm[c] + px(90) }, func(int) int { return rows - 1 })
	pf.findRidge(s.logs, s.lo, s.hi, s.ridge)

	region(func(c int) int { return s.ridge[c] + 1 }, func(c int) int { return s.ridge[c] + px(40) })
	pf.find(lightToDark, s.lo, s.hi, s.bottom)

	region(func(c int) int { return (s.ilm[c] + s.ridge[c]) / 2 }, func(c int) int { return s.ridge[c] - px(20) })
	pf.find(darkToLight, s.lo, s.hi, s.ez)

	region(func(c int) int { return s.ez[c] + k + 1 }, func(c int) int { return s.ridge[c] })
	pf.find(darkToLight, s.lo, s.hi, s.rpe)

	region(func(c int) int { return s.ilm[c] + 1 }, func(c int) int { return s.ez[c] - px(15) })
	pf.find(lightToDark, s.lo, s.hi, s.oplonl)

	region(func(c int) int { return s.ilm[c] + k + 1 }, func(c int) int { return s.oplonl[c] - k })
	pf.find(darkToLight, s.lo, s.hi, s.inlopl)

	region(func(c int) int { return s.ilm[c] + 2*(s.inlopl[c]-s.ilm[c])/5 }, func(c int) int { return s.inlopl[c] - k })
	pf.find(lightToDark, s.lo, s.hi, s.iplinl)

	region(func(c int) int { return s.ilm[c] + 1 }, func(c int) int { return s.iplinl[c] - k - 1 })
	pf.find(lightToDark, s.lo, s.hi, s.nfl)

	found := []struct {
		name     string
		rows     []int
		polarity int
	}{
		{ILM, s.ilm, darkToLight}, {RNFLGCL, s.nfl, lightToDark}, {IPLINL, s.iplinl, lightToDark},
		{INLOPL, s.inlopl, darkToLight}, {OPLONL, s.oplonl, lightToDark}, {EZ, s.ez, darkToLight},
		{RPE, s.rpe, darkToLight}, {BM, s.bottom, lightToDark},
	}
	for _, b := range found {
		out := l.Boundaries[b.name][f*cols : (f+1)*cols]
		for c, r := range b.rows {
			out[c] = pf.refine(b.polarity, r, c)
		}
	}
	copy(l.RPEBottom[f*cols:(f+1)*cols], l.Boundaries[BM][f*cols:(f+1)*cols])
	bmBaseline(l.Boundaries[BM][f*cols:(f+1)*cols], float64(px(8)))
}

// bmBaseline replaces the RPE band's lower edge with a fitted baseline
// where the edge rises more than tolerance rows above it: there the RPE
// is lifted off Bruch's membrane, which itself stays on the baseline. The
// baseline is a second-order polynomial fitted to the edge, refitted
// without the points that lie above it.
func bmBaseline(edge []float32, tolerance float64) {
	n := len(edge)
	use := make([]bool, n)
	for i := range use {
		use[i] = true
	}
	var coef [3]float64
	for range 4 {
		coef = fitQuadratic(edge, use)
		for i, z := range edge {
			use[i] = float64(z) >= polyAt(coef, i, n)-tolerance
		}
	}
	for i, z := range edge {
		if base := polyAt(coef, i, n); float64(z) < base-tolerance {
			edge[i] = float32(base)
		}
	}
}

func polyAt(c [3]float64, i, n int) float64 {
	x := float64(i)/float64(n) - 0.5
	return c[0] + c[1]*x + c[2]*x*x
}

// fitQuadratic least-squares fits z = c0 + c1·x + c2·x² over the used
// points, x scaled to [−0.5, 0.5].
func fitQuadratic(z []float32, use []bool) [3]float64 {
	var m [3][4]float64
	n := len(z)
	for i, zi := range z {
		if !use[i] {
			continue
		}
		x := float64(i)/float64(n) - 0.5
		p := [3]float64{1, x, x * x}
		for a := range 3 {
			for b := range 3 {
				m[a][b] += p[a] * p[b]
			}
			m[a][3] += p[a] * float64(zi)
		}
	}
	// Gaussian elimination with partial pivoting.
	for col := range 3 {
		pivot := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[pivot][col]) {
				pivot = r
			}
		}
		m[col], m[pivot] = m[pivot], m[col]
		if math.Abs(m[col][col]) < 1e-12 {
			var mean float64
			for _, zi := range z {
				mean += float64(zi)
			}
			return [3]float64{mean / float64(n), 0, 0}
		}
		for r := range 3 {
			if r == col {
				continue
			}
			k := m[r][col] / m[col][col]
			for cc := col; cc < 4; cc++ {
				m[r][cc] -= k * m[col][cc]
			}
		}
	}
	return [3]float64{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]}
}

// smoothAcrossFrames removes single-B-scan excursions: where an A-scan's
// boundary strays more than tol rows from the mean of the same A-scan on
// both neighbouring B-scans, which agree with each other, it takes that
// mean. Real curvature between B-scans (the foveal pit) stays: a median
// would flatten its deepest B-scan.
func smoothAcrossFrames(b []float32, frames, cols int, tol float32) {
	if frames < 3 {
		return
	}
	orig := slices.Clone(b)
	for f := 1; f < frames-1; f++ {
		for c := range cols {
			x, y, z := orig[(f-1)*cols+c], orig[f*cols+c], orig[(f+1)*cols+c]
			if m := (x + z) / 2; abs32(x-z) < tol && abs32(y-m) > tol {
				b[f*cols+c] = m
			}
		}
	}
}

func abs32(x float32) float32 { return max(x, -x) }

// smoothAlong averages each boundary over ±half neighbouring A-scans of
// its B-scan.
func smoothAlong(b []float32, frames, cols, half int) {
	line := make([]float32, cols)
	for f := range frames {
		row := b[f*cols : (f+1)*cols]
		copy(line, row)
		for c := range cols {
			lo, hi := max(0, c-half), min(cols, c+half+1)
			var sum float32
			for _, x := range line[lo:hi] {
				sum += x
			}
			row[c] = sum / float32(hi-lo)
		}
	}
}
