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
	// Retina marks the A-scans in which the retina was seen before any
	// boundary was searched (nil when the segmenter does not say): in
	// the others (a blink, a blanked B-scan) the boundaries are guesses.
	Retina []bool `json:"retina,omitempty"`
	// Clipped marks the A-scans whose retina reaches the top of the image
	// (nil when the segmenter does not say): cut off or folded back
	// there, so its boundaries cannot be told.
	Clipped []bool `json:"clipped,omitempty"`
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
//     edge: on a line scan where the RPE complex falls into the
//     choroid (fallIntoChoroid); elsewhere the light-to-dark edge
//     just beneath the ridge, or beneath the lowest band of the RPE
//     complex where the ridge is a band above it (lowestBand);
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
// fit to that edge (bmBaseline, after Chiu et al. 2012). Every
// boundary is then refined to sub-pixel position, kept smooth across
// neighbouring B-scans (smoothAcrossFrames) and A-scans, and kept in order.
// The sub-pixel position of each edge but Bruch's membrane is its half
// level (halfLevelEdge): where the reflectivity is half-way between the
// levels either side, as the device draws it, not the steepest change of
// log intensity.
func SegmentLayers(ctx context.Context, v *Volume) (*Layers, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	l := &Layers{Frames: v.Frames, Cols: v.Cols, Boundaries: map[string][]float32{},
		RPEBottom: make([]float32, v.Frames*v.Cols), Retina: make([]bool, v.Frames*v.Cols),
		Clipped: make([]bool, v.Frames*v.Cols)}
	for _, n := range BoundaryNames {
		l.Boundaries[n] = make([]float32, v.Frames*v.Cols)
	}
	px := func(um float64) int { return max(1, int(math.Round(um/v.Spacing.AxialUm))) }
	finders := sync.Pool{New: func() any {
		s := newFrameSegmenter(v.Rows, v.Cols, v.Spacing)
		s.pattern = v.Pattern
		return s
	}}
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
		smoothAcrossFrames(b, l.Retina, v.Frames, v.Cols, tol)
		smoothAlong(b, v.Frames, v.Cols, 2)
		if i > 0 {
			for j, above := range ordered[i-1] {
				b[j] = max(b[j], above)
			}
		}
	}
	return l, nil
}

// maxRetinaUm bounds the search for the RPE below the ILM: the thickest
// retina (ILM to RPE) octflow expects, macular oedema included.
const maxRetinaUm = 1000

// rpeBandUm bounds the search for the RPE band's lower edge below its
// brightest ridge: the band is 15–25 µm thick, and a second, deeper
// light-to-dark edge (choriocapillaris to the choroid's vessels) must
// not be taken for Bruch's membrane.
const rpeBandUm = 24

// frameSegmenter is one worker's state for segmenting B-scans.
type frameSegmenter struct {
	pattern             Pattern
	pf                  *pathFinder
	rf                  *retinaFinder
	top                 []int
	found, clipped      []bool
	logs                []float32
	lo, hi              []int
	ilm, ridge, bottom  []int
	ez, rpe, oplonl     []int
	inlopl, iplinl, nfl []int
	spare               [][]int
	// baselineHalf is the half-width, in A-scans, of the window over
	// which Bruch's membrane's baseline is fitted (bmBaselineHalfUm).
	baselineHalf int
}

// bmBaselineHalfUm is the half-width of the window over which Bruch's
// membrane's baseline is fitted under a raised RPE: wider than the
// largest drusen and PEDs (1–2 mm), narrower than a line's course.
const bmBaselineHalfUm = 2000

func newFrameSegmenter(rows, cols int, sp Spacing) *frameSegmenter {
	mk := func() []int { return make([]int, cols) }
	return &frameSegmenter{pf: newPathFinder(rows, cols), rf: newRetinaFinder(rows, cols, sp), top: mk(), found: make([]bool, cols), clipped: make([]bool, cols),
		logs: make([]float32, rows*cols),
		lo:   mk(), hi: mk(), ilm: mk(), ridge: mk(), bottom: mk(), ez: mk(), rpe: mk(), oplonl: mk(),
		inlopl: mk(), iplinl: mk(), nfl: mk(), baselineHalf: max(1, int(math.Round(bmBaselineHalfUm/max(sp.LateralUm, 1))))}
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
	// The ILM is searched near the retina's top as found, from 60 µm
	// above it to 60 µm below; without a retina (a blank or noise
	// B-scan) over the whole B-scan, and the quality gate judges what
	// comes out. On a line, from 30 µm above: on a speckled 8-bit export
	// the path followed the vitreous's speckle up to the 60 µm bound over
	// 60 A-scans, and the dark strip left under it was taken for fluid
	// (on a cube, not yet validated: the suite's phantom cube then
	// withheld a subfield of its clean scan).
	above := px(60)
	if s.pattern == Line {
		above = px(30)
	}
	if s.rf.find(s.logs, s.top, s.found, s.clipped) {
		copy(l.Retina[f*cols:(f+1)*cols], s.found)
		copy(l.Clipped[f*cols:(f+1)*cols], s.clipped)
		region(func(c int) int { return max(s.top[c]-above, k) }, func(c int) int { return min(s.top[c]+px(60), rows-k) })
	} else {
		region(func(int) int { return k }, func(int) int { return rows - k })
	}
	pf.find(darkToLight, s.lo, s.hi, s.ilm)

	// The RPE lies under the ILM within the thickest retina (macular
	// oedema included), not in the choroid or sclera below.
	region(func(c int) int { return s.ilm[c] + px(90) }, func(c int) int { return s.ilm[c] + px(maxRetinaUm) })
	pf.findRidge(s.logs, s.lo, s.hi, s.ridge)

	region(func(c int) int { return s.ridge[c] + 1 }, func(c int) int { return s.ridge[c] + px(rpeBandUm) })
	// On a line the band's lower edge is where the complex falls into
	// the choroid; elsewhere under the ridge or the lowest band under it
	// (see fallIntoChoroid for why not yet on a cube).
	if s.pattern == Line {
		s.fallIntoChoroid(px, k)
	} else {
		pf.find(lightToDark, s.lo, s.hi, s.bottom)
		s.lowestBand(px)
	}

	region(func(c int) int { return (s.ilm[c] + s.ridge[c]) / 2 }, func(c int) int { return s.ridge[c] - px(20) })
	pf.find(darkToLight, s.lo, s.hi, s.ez)

	region(func(c int) int { return s.ez[c] + k + 1 }, func(c int) int { return s.ridge[c] })
	pf.find(darkToLight, s.lo, s.hi, s.rpe)

	if s.pattern == Circle {
		s.innerAroundDisc(px, k)
	} else {
		region(func(c int) int { return s.ilm[c] + 1 }, func(c int) int { return s.ez[c] - px(15) })
		pf.find(lightToDark, s.lo, s.hi, s.oplonl)

		region(func(c int) int { return s.ilm[c] + k + 1 }, func(c int) int { return s.oplonl[c] - k })
		pf.find(darkToLight, s.lo, s.hi, s.inlopl)

		region(func(c int) int { return s.ilm[c] + 2*(s.inlopl[c]-s.ilm[c])/5 }, func(c int) int { return s.inlopl[c] - k })
		pf.find(lightToDark, s.lo, s.hi, s.iplinl)
	}

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
		if b.name == RNFLGCL && s.pattern != Circle {
			continue // below, on its own gradient
		}
		out := l.Boundaries[b.name][f*cols : (f+1)*cols]
		for c, r := range b.rows {
			out[c] = pf.refine(b.polarity, r, c)
			if b.name != BM { // see halfLevelEdge: Bruch's membrane stays at the steepest change
				out[c] = halfLevelEdge(s.logs, rows, cols, r, c, px(halfLevelUm), b.polarity, out[c])
			}
		}
	}
	if s.pattern != Circle {
		// On a macular scan the RNFL thins to nothing at the fovea and
		// is searched for last, under the ILM, on a gradient twice as
		// tall: the ILM is a thin bright reflex whose lower edge, a row
		// or two under the ILM, is sharper than the thin RNFL's own; the
		// taller window sees the vitreous above the reflex.
		pf.setImage(s.logs, 2*k)
		region(func(c int) int { return s.ilm[c] + 1 }, func(c int) int { return s.iplinl[c] - k - 1 })
		pf.find(lightToDark, s.lo, s.hi, s.nfl)
		out := l.Boundaries[RNFLGCL][f*cols : (f+1)*cols]
		for c, r := range s.nfl {
			out[c] = halfLevelEdge(s.logs, rows, cols, r, c, px(halfLevelUm), lightToDark, pf.refine(lightToDark, r, c))
		}
	}
	copy(l.RPEBottom[f*cols:(f+1)*cols], l.Boundaries[BM][f*cols:(f+1)*cols])
	// Under a circle scan the RPE's course is no low-order curve, and
	// peripapillary drusen are rare: there BM is the band's lower edge.
	if s.pattern != Circle {
		half := 0 // on a cube one fit over the B-scan, as before fallIntoChoroid
		if s.pattern == Line {
			half = s.baselineHalf
		}
		bmBaseline(l.Boundaries[BM][f*cols:(f+1)*cols], float64(px(8)), half)
	}
}

// innerAroundDisc finds the inner boundaries of a circle scan around
// the optic disc, where the RNFL is thick: OPL/ONL in the outer half
// between the ILM and the EZ (the RNFL's lower edge above it can be the
// strongest light-to-dark edge of the retina), INL/OPL above it, and
// then RNFL/GCL and IPL/INL as the two light-to-dark edges between the
// ILM's reflex and the INL/OPL. Where the RNFL is thick its lower edge
// is the stronger of the two, where it is thin the IPL/INL is; so the
// strongest edge is found first, then the best edge above and below
// it, and the stronger of those two is its partner, chosen along the
// B-scan (pairAlong).
func (s *frameSegmenter) innerAroundDisc(px func(um float64) int, k int) {
	pf, cols := s.pf, s.pf.cols
	region := func(lo, hi func(c int) int) {
		for c := range cols {
			s.lo[c], s.hi[c] = lo(c), hi(c)
		}
	}
	region(func(c int) int { return s.ilm[c] + (s.ez[c]-s.ilm[c])/2 }, func(c int) int { return s.ez[c] - px(15) })
	pf.find(lightToDark, s.lo, s.hi, s.oplonl)
	region(func(c int) int { return s.ilm[c] + (s.ez[c]-s.ilm[c])/3 }, func(c int) int { return s.oplonl[c] - k })
	pf.find(darkToLight, s.lo, s.hi, s.inlopl)

	top := func(c int) int { return s.ilm[c] + px(16) } // under the ILM's reflex
	strongest, above, below := s.scratch(0), s.scratch(1), s.scratch(2)
	region(top, func(c int) int { return s.inlopl[c] - k })
	pf.find(lightToDark, s.lo, s.hi, strongest)
	region(top, func(c int) int { return strongest[c] - k - 1 })
	pf.find(lightToDark, s.lo, s.hi, above)
	region(func(c int) int { return strongest[c] + k + 1 }, func(c int) int { return s.inlopl[c] - k })
	pf.find(lightToDark, s.lo, s.hi, below)
	s.pairAlong(strongest, above, below)
}

// pairSwitchPerRow is what pairAlong charges, per row beyond the one a
// boundary may move between neighbouring A-scans, for a jump of RNFL/GCL
// or IPL/INL, in units of the strongest edge's typical strength: a jump
// of 20 rows in all (switching which of the two the strongest edge is,
// where the strongest edge itself stays) costs as much as 20 A-scans
// each taking a partner weaker than the other by a quarter of that
// strength.
const pairSwitchPerRow = 0.25

// pairAlong pairs the strongest light-to-dark edge of a circle's inner
// retina with the edge above it (the strongest is then IPL/INL) or the
// edge below it (it is RNFL/GCL), A-scan by A-scan, by the cheapest
// sequence of choices along the B-scan: each A-scan pays for the
// weakness of the partner it takes (its light-to-dark strength against
// the strongest edge's median) and each step for how far the two
// boundaries jump. The nerve fibre layer's thickness varies slowly
// around the disc, so the choice flips only where the partner's
// evidence holds over many A-scans, or where the strongest edge itself
// moves from one boundary to the other; chosen A-scan by A-scan, it
// flipped wherever both partners were faint (the thick RNFL's speckle
// above, the GCL's below), and RNFL/GCL hopped 4–15 px (docs/imaging.md,
// Real scans).
func (s *frameSegmenter) pairAlong(strongest, above, below []int) {
	pf, cols := s.pf, s.pf.cols
	strength := func(rows []int, c int) float32 { return -pf.grad[rows[c]*cols+c] }
	tops := make([]float32, 0, cols)
	for c := range cols {
		tops = append(tops, strength(strongest, c))
	}
	slices.Sort(tops)
	scale := tops[len(tops)/2]
	if scale <= 0 {
		scale = 1
	}
	// State 0: RNFL/GCL is the strongest edge, IPL/INL the one below;
	// state 1: RNFL/GCL is the one above, IPL/INL the strongest.
	nfl := func(st, c int) int {
		if st == 0 {
			return strongest[c]
		}
		return above[c]
	}
	ipl := func(st, c int) int {
		if st == 0 {
			return below[c]
		}
		return strongest[c]
	}
	emit := func(st, c int) float32 {
		partner := below
		if st == 1 {
			partner = above
		}
		return -min(max(strength(partner, c)/scale, 0), 1)
	}
	jump := func(a, b int) float32 { return float32(max(0, a-b-1, b-a-1)) }
	from := s.scratch(5)
	var cost [2]float32
	cost[0], cost[1] = emit(0, 0), emit(1, 0)
	for c := 1; c < cols; c++ {
		var next [2]float32
		for st := range 2 {
			best, arg := float32(math.Inf(1)), 0
			for prev := range 2 {
				d := cost[prev] + pairSwitchPerRow*(jump(nfl(prev, c-1), nfl(st, c))+jump(ipl(prev, c-1), ipl(st, c)))
				if d < best {
					best, arg = d, prev
				}
			}
			next[st] = best + emit(st, c)
			from[c] = from[c]&^(1<<st) | arg<<st
		}
		cost = next
	}
	st := 0
	if cost[1] < cost[0] {
		st = 1
	}
	for c := cols - 1; c >= 0; c-- {
		s.nfl[c], s.iplinl[c] = nfl(st, c), ipl(st, c)
		if c > 0 {
			st = from[c] >> st & 1
		}
	}
}

// rpeComplexUm bounds the search for the RPE complex's lower edge below
// its brightest ridge on a macular scan: from the ellipsoid zone, the
// top band of the complex, to Bruch's membrane is 50–60 µm on the
// real line (longer outer segments under the fovea).
const rpeComplexUm = 70

// fallIntoChoroid finds the RPE band's lower edge on a line scan,
// where the outer retina shows the complex as up to three bands (EZ,
// interdigitation zone, RPE) any of which may be the brightest ridge:
// the edge is where the level falls from the complex into the choroid
// and stays down. Between two bands of the complex the level dips for a
// row or two and comes back, so on a gradient twice as tall as the
// other boundaries' (which sees about 16 µm either side) a dip scores
// little and the fall under the lowest band most. The edge is then put
// at the steepest change of the usual gradient at or just above it (the
// tall window leans towards the choroid's side of a gradual fall). The
// search runs from the ridge to rpeComplexUm under it: deeper, a fall
// inside the choroid could be taken. (On a circle scan the ridge is the
// RPE band itself and the region would reach into the choroid, which
// the tall gradient then followed 2–10 px under the device's Bruch's
// membrane: lowestBand stays there. On a cube it is not used yet: on
// the phantom cube of the degradation suite, under clipping at 60% and
// a motion of 30 rows, fluid found in a vessel's shadow under a clipped
// RPE and a PED under the baseline bent by the step, found before too
// but withheld by a hair, were reported with the better Bruch's
// membrane; the cube's lesion finding must answer for those first.)
func (s *frameSegmenter) fallIntoChoroid(px func(um float64) int, k int) {
	pf, cols := s.pf, s.pf.cols
	for c := range cols {
		s.lo[c], s.hi[c] = s.ridge[c]+1, s.ridge[c]+px(rpeComplexUm)
	}
	pf.setImage(s.logs, 2*k)
	pf.find(lightToDark, s.lo, s.hi, s.bottom)
	pf.setImage(s.logs, k)
	for c := range cols {
		s.lo[c], s.hi[c] = s.bottom[c]-k-1, s.bottom[c]
	}
	pf.find(lightToDark, s.lo, s.hi, s.bottom)
}

// Thresholds of lowestBand, in log intensity.
const (
	// subBandLevel: a band under the ridge is part of the RPE complex if
	// it is at most this much dimmer than the ridge;
	subBandLevel = 0.5
	// subBandDip: the dip that parts it from the ridge;
	subBandDip = 0.15
	// subBandFall: how far the level falls under it (into the choroid).
	subBandFall = 0.5
)

// lowestBand moves Bruch's membrane under the lowest band of the RPE
// complex, but on a line scan (whose lower edge is fallIntoChoroid's). The outer retina may show the
// interdigitation zone as a band of its own, as bright as the RPE just
// under it or brighter: the ridge found is then that band, and its lower
// edge lies a band short of Bruch's membrane. Where, under the lower
// edge found, a band nearly as bright as the ridge follows after a dip
// and the level then falls into the choroid, in most A-scans about, the
// lower edge is searched again under that band.
func (s *frameSegmenter) lowestBand(px func(um float64) int) {
	// The outer retina shows at most three bands (EZ, interdigitation
	// zone, RPE): the ridge and at most two under it.
	for range 2 {
		if !s.nextBand(px) {
			return
		}
	}
}

// nextBand moves the RPE band's lower edge under the next band down, in
// the A-scans where one follows (see lowestBand), and reports whether it
// moved.
func (s *frameSegmenter) nextBand(px func(um float64) int) bool {
	pf, cols, rows := s.pf, s.pf.cols, s.pf.rows
	level := func(r, c int) float32 { // over ±2 A-scans
		var sum float32
		n := 0
		for cc := max(0, c-2); cc <= min(cols-1, c+2); cc++ {
			sum += s.logs[min(max(r, 0), rows-1)*cols+cc]
			n++
		}
		return sum / float32(n)
	}
	reach := px(rpeBandUm)
	second, peak := s.scratch(3), s.scratch(4)
	for c := range cols {
		second[c] = 0
		b, top := s.bottom[c], level(s.ridge[c], c)
		low, dip := b, level(b, c) // the first dip under the edge
		for r := b + 1; r <= min(b+reach, rows-1); r++ {
			x := level(r, c)
			if x > dip {
				break
			}
			low, dip = r, x
		}
		r2, best := -1, float32(math.Inf(-1)) // the brightest under that
		for r := low + 1; r <= min(low+reach, rows-1); r++ {
			if x := level(r, c); x > best {
				r2, best = r, x
			}
		}
		if r2 < 0 || best < top-subBandLevel {
			continue
		}
		fall := best // within two bands' reach: another may lie between
		for r := r2 + 1; r <= min(r2+2*reach, rows-1); r++ {
			fall = min(fall, level(r, c))
		}
		if best-dip >= subBandDip && best-fall >= subBandFall {
			second[c], peak[c] = 1, r2
		}
	}
	// Decided by the majority of the A-scans about, so the edge does not
	// hop between bands.
	const half = 10
	moved := false
	for c := range cols {
		var votes, total int
		for cc := max(0, c-half); cc <= min(cols-1, c+half); cc++ {
			votes += second[cc]
			total++
		}
		if 2*votes > total {
			p := peak[c]
			if second[c] == 0 { // follow the neighbours' band
				p = s.bottom[c] + px(8)
			}
			s.lo[c], s.hi[c], moved = p+1, p+reach, true
		} else {
			s.lo[c], s.hi[c] = s.bottom[c], s.bottom[c]
		}
	}
	if moved {
		pf.find(lightToDark, s.lo, s.hi, s.bottom)
	}
	return moved
}

// scratch returns the i-th spare row buffer.
func (s *frameSegmenter) scratch(i int) []int {
	for len(s.spare) <= i {
		s.spare = append(s.spare, make([]int, s.pf.cols))
	}
	return s.spare[i]
}

// bmBaseline replaces the RPE band's lower edge with a fitted baseline
// where the edge rises more than tolerance rows above it: there the RPE
// is lifted off Bruch's membrane, which itself stays on the baseline. A
// baseline is a second-order polynomial fitted to the edge, refitted
// without the points that lie above it, so it errs deep, never shallow.
// With half ≤ 0 one is fitted over the whole B-scan and every raise over
// it is replaced. Otherwise a second is fitted over the A-scans within
// half of each A-scan, the shallower of the two is taken, and only a
// raise with the edge deeper on both sides of it (deeperBothSides) is
// replaced: over a 9 mm line that ends in the disc the membrane's
// course is no single low-order curve, and the whole-scan fit ran 2–3 px
// under it over a third of the line; where the retina steps (an eye's
// movement between A-scans) either fit, bent by the step, runs under
// the higher side of it.
func bmBaseline(edge []float32, tolerance float64, half int) {
	n := len(edge)
	use := make([]bool, n)
	base := make([]float64, n)
	whole := fitBaseline(edge, use, tolerance)
	for i := range n {
		base[i] = polyAt(whole, i, n)
	}
	if half > 0 && 2*half+1 < n {
		for i := range n {
			lo, hi := max(0, i-half), min(n, i+half+1)
			base[i] = min(base[i], polyAt(fitBaseline(edge[lo:hi], use[lo:hi], tolerance), i-lo, hi-lo))
		}
	}
	raised := make([]bool, n)
	for i, z := range edge {
		raised[i] = float64(z) < base[i]-tolerance && (half <= 0 || deeperBothSides(edge, i, half, float32(tolerance)))
	}
	for i, r := range raised {
		if r {
			edge[i] = float32(base[i])
		}
	}
}

// deeperBothSides reports whether the edge lies more than tolerance rows
// deeper than at A-scan i somewhere within half A-scans on either side:
// a raised RPE (a druse, a PED) is a dome with the membrane beside it on
// both sides; a retina that steps (an eye's movement between A-scans)
// is raised on one side of the step only.
func deeperBothSides(edge []float32, i, half int, tolerance float32) bool {
	var left, right bool
	for j := max(0, i-half); j < i && !left; j++ {
		left = edge[j] > edge[i]+tolerance
	}
	for j := i + 1; j <= min(len(edge)-1, i+half) && !right; j++ {
		right = edge[j] > edge[i]+tolerance
	}
	return left && right
}

// fitBaseline fits a second-order polynomial to edge, four times, each
// time without the points more than tolerance rows above the last fit;
// use is scratch space as long as edge.
func fitBaseline(edge []float32, use []bool, tolerance float64) [3]float64 {
	for i := range use {
		use[i] = true
	}
	var coef [3]float64
	for range 4 {
		coef = fitQuadratic(edge, use)
		for i, z := range edge {
			use[i] = float64(z) >= polyAt(coef, i, len(edge))-tolerance
		}
	}
	return coef
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
// mean. (Runs of two were tried: they flatten drusen and the pit as much
// as they repair.) Real curvature between B-scans (the foveal pit) stays: a median
// would flatten its deepest B-scan.
//
// Only A-scans where the retina was seen (seen, when not nil) take part.
func smoothAcrossFrames(b []float32, seen []bool, frames, cols int, tol float32) {
	if frames < 3 {
		return
	}
	orig := slices.Clone(b)
	for f := 1; f < frames-1; f++ {
		for c := range cols {
			if seen != nil && !(seen[(f-1)*cols+c] && seen[f*cols+c] && seen[(f+1)*cols+c]) {
				continue
			}
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
