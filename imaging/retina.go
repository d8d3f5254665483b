package imaging

import (
	"math"
	"slices"
)

// retinaFinder locates the retina in a B-scan before any boundary is
// searched for, so that the graph search runs where the retina is and a
// bright choroid, a floater in the vitreous or the edge of an export's
// invalid rows cannot capture a boundary.
//
// On the B-scan's log intensities, box-smoothed over about 12 µm of depth
// and 60 µm across, tissue is what stands tissueStep of the way from the
// working scale's background to the B-scan's brightest tissue (its 99.5th
// percentile). Of the connected regions of tissue, those spanning a
// quarter of the B-scan's width or more are the retina and what lies
// under it; floaters and speckle are smaller. The top of those regions
// in each A-scan is the approximate ILM, or, where a faint haze in the
// vitreous joins it, the top of the retina under the haze (belowHaze):
// median-filtered across A-scans, and interpolated across A-scans where
// no tissue stands out (a blink, a blanked or shadowed part), which are
// marked as missing.
type retinaFinder struct {
	rows, cols int
	hy, hx     int // half-height and half-width of the smoothing box
	clipRows   int // clipUm in rows
	axialUm    float64
	smooth     []float32
	tmp, line  []float32
	label      []int32
	stack      []int32
	sample     []float32
	levels     []float32
}

func newRetinaFinder(rows, cols int, sp Spacing) *retinaFinder {
	hy := max(1, int(math.Round(12/sp.AxialUm)))
	hx := max(1, int(math.Round(60/max(sp.LateralUm, 1))))
	return &retinaFinder{rows: rows, cols: cols, hy: hy, hx: hx, axialUm: sp.AxialUm, clipRows: int(math.Round(clipUm / sp.AxialUm)),
		smooth: make([]float32, rows*cols), tmp: make([]float32, rows*cols), line: make([]float32, cols), label: make([]int32, rows*cols)}
}

// tissueStep is how far from the background towards the brightest
// tissue a level must stand to be tissue: every retinal layer does, the
// vitreous (with its cortex) and fluid do not.
const tissueStep = 0.35

// clipUm is how close to the top of the image the retina's tissue may
// begin before the A-scan counts as clipped: an OCT image ends at the
// zero-delay line, and a retina that reaches it is cut off there or, on
// a Fourier-domain device, folded back into the image upside down (the
// mirror artefact). Either way its boundaries cannot be told. A
// well-placed scan shows the vitreous above the retina.
const clipUm = 32

// minTissueContrast is the least log-intensity step between background
// and the brightest tissue (a factor of 4) for a B-scan to show a retina.
const minTissueContrast = 1.4

// find sets top[c] to the approximate ILM row of every A-scan, found[c]
// to whether tissue was seen in that A-scan and clipped[c] to whether
// that tissue reaches the top of the image (see clipUm). It reports
// false when the B-scan shows no retina at all.
func (rf *retinaFinder) find(logs []float32, top []int, found, clipped []bool) bool {
	rows, cols := rf.rows, rf.cols
	boxSmooth(logs, rf.smooth, rf.tmp, rf.line, rows, cols, rf.hy, rf.hx)
	// The volume is normalised, so the background is the working scale's
	// (a B-scan's own percentiles are dragged down by an export's floor
	// samples); the brightest tissue is the B-scan's own, so a dim or
	// blanked B-scan is judged by what it shows.
	rf.sample = rf.sample[:0]
	step := max(1, rows*cols/50_000)
	for i := 0; i < len(rf.smooth); i += step {
		rf.sample = append(rf.sample, rf.smooth[i])
	}
	slices.Sort(rf.sample)
	bg := float32(math.Log1p(workingBackground))
	bright := rf.sample[min(len(rf.sample)-1, len(rf.sample)*995/1000)]
	for c := range cols {
		found[c], clipped[c], top[c] = false, false, 0
	}
	if !(bright-bg >= minTissueContrast) {
		return false
	}
	theta := bg + tissueStep*(bright-bg)

	// Label the connected tissue regions; keep the wide ones.
	for i := range rf.label {
		rf.label[i] = 0
	}
	wide := map[int32]bool{}
	var next int32
	for start, x := range rf.smooth {
		if x < theta || rf.label[start] != 0 {
			continue
		}
		next++
		minC, maxC := cols, -1
		rf.stack = append(rf.stack[:0], int32(start))
		rf.label[start] = next
		for len(rf.stack) > 0 {
			i := int(rf.stack[len(rf.stack)-1])
			rf.stack = rf.stack[:len(rf.stack)-1]
			c := i % cols
			minC, maxC = min(minC, c), max(maxC, c)
			for _, j := range [4]int{i - cols, i + cols, i - 1, i + 1} {
				switch {
				case j < 0 || j >= len(rf.smooth):
					continue
				case (j == i-1 && c == 0) || (j == i+1 && c == cols-1):
					continue
				}
				if rf.label[j] == 0 && rf.smooth[j] >= theta {
					rf.label[j] = next
					rf.stack = append(rf.stack, int32(j))
				}
			}
		}
		if maxC-minC+1 >= cols/4 {
			wide[next] = true
		}
	}
	n := 0
	for c := range cols {
		for r := range rows {
			if l := rf.label[r*cols+c]; l != 0 && wide[l] {
				top[c], found[c], clipped[c] = r, true, r <= rf.clipRows
				top[c] = rf.belowHaze(c, r, bright-bg)
				n++
				break
			}
		}
	}
	if n == 0 {
		return false
	}
	medianAcross(top, found, 2*rf.hx+1)
	fillMissing(top, found)
	// The smoothing box reaches hy rows above the edge.
	for c := range top {
		top[c] = min(top[c]+rf.hy/2, rows-1)
	}
	return true
}

// Haze over the retina. The vitreous over the optic disc's rim, and at
// the edge of a wide scan, can show a faint haze that the tissue
// threshold joins to the retina under it: the tissue's top is then the
// haze's, up to 60 rows (230 µm) above the retina's surface on the real
// line, and the ILM, searched near it, is never found. In each A-scan
// the strongest dark-to-light step within hazeMaxUm under the tissue's
// top is the candidate surface of the retina, and what lies above it is
// a haze, not retina, only where all of these hold:
//
//   - it is much dimmer than the retina under it: the step into the
//     retina is at least hazeStepRatio times the step from the vitreous
//     (the hazeVitreousUm above the tissue's top) into the haze, and at
//     least hazeMinStep of the way from the background to the brightest
//     tissue;
//   - it is featureless: from where it reaches its level down to the
//     foot of the step into the retina, it stays within hazeFlat of that
//     step of its median. The retina's own layers do not: over a dim
//     foveal floor (the real Kermany scans) the surface's reflex and the
//     outer nuclear layer's dark band stray 16–22% of the step into the
//     ellipsoid zone, the haze 3–5%;
//   - it is thicker than the smoothing's own ramp (hazeMinUm).
//
// There the retina's top is the step into the retina, found at the same
// share of that step (tissueStep) as the tissue's top is of the way from
// the background. Whether the retina reaches the top of the image is
// still judged from the tissue's top, haze and all.
const (
	hazeMinUm     = 20
	hazeMaxUm     = 250
	hazeStepRatio = 2
	hazeFlat      = 0.1
	hazeMinStep   = 0.25
	// hazeVitreousUm is how far above the tissue's top the vitreous's
	// level is taken, and how far under the step the retina's.
	hazeVitreousUm = 60
)

// belowHaze returns the retina's top in A-scan c of the smoothed B-scan
// whose tissue begins at row r0: r0 itself, or the top of the retina
// under a haze (see hazeMaxUm). span is the way from the background to
// the brightest tissue, in log intensity.
func (rf *retinaFinder) belowHaze(c, r0 int, span float32) int {
	rows, cols, hy := rf.rows, rf.cols, rf.hy
	p := func(r int) float32 { return rf.smooth[min(max(r, 0), rows-1)*cols+c] }
	vitTop := r0 - rf.rowsOf(hazeVitreousUm)
	if vitTop < 0 || vitTop >= r0-hy || r0+rf.rowsOf(hazeMaxUm)+2*hy >= rows {
		return r0 // no vitreous seen above it, or no room under it
	}
	// The strongest dark-to-light step below the tissue's top, past the
	// smoothing's ramp and within hazeMaxUm.
	best, r1 := float32(0), -1
	for r := r0 + max(rf.rowsOf(hazeMinUm), 2*hy+1); r <= r0+rf.rowsOf(hazeMaxUm); r++ {
		if d := p(r+hy) - p(r-hy); d > best {
			best, r1 = d, r
		}
	}
	if r1 < 0 {
		return r0
	}
	level := func(a, b int) float32 { // median over rows [a, b)
		rf.levels = rf.levels[:0]
		for r := a; r < b; r++ {
			rf.levels = append(rf.levels, p(r))
		}
		slices.Sort(rf.levels)
		return rf.levels[len(rf.levels)/2]
	}
	vit := level(vitTop, r0-hy)
	haze := level(r0+hy, r1-hy)
	var retina float32
	for r := r1; r <= r1+rf.rowsOf(hazeVitreousUm); r++ {
		retina = max(retina, p(r))
	}
	if retina-haze < hazeMinStep*span || retina-haze < hazeStepRatio*(haze-vit) || haze <= vit {
		return r0
	}
	// Up to the foot of the step into the retina (a faint layer lying on
	// the retina belongs to the step), from where the haze reaches its
	// level (its own top may rise slowly).
	tol := hazeFlat * (retina - haze)
	foot := r1
	for foot > r0 && p(foot) > haze+tol {
		foot--
	}
	if foot-r0 < rf.rowsOf(hazeMinUm) {
		return r0
	}
	reached := false
	for r := r0; r < foot; r++ {
		x := p(r)
		reached = reached || x >= haze
		if reached && abs32(x-haze) > tol {
			return r0 // a layer in it: retina, not haze
		}
	}
	edge := haze + tissueStep*(retina-haze)
	for r := r1 - hy; r <= r1+hy; r++ {
		if p(r) >= edge {
			return r
		}
	}
	return r0
}

// rowsOf is um in rows of the B-scan.
func (rf *retinaFinder) rowsOf(um float64) int { return max(1, int(math.Round(um/rf.axialUm))) }

// boxSmooth averages src over a (2hy+1) × (2hx+1) box into dst, near
// the edges over what lies inside: the denoiser's box sum (boxSum, which
// works in tmp), divided by the samples the box covers.
func boxSmooth(src, dst, tmp, line []float32, rows, cols, hy, hx int) {
	copy(tmp, src)
	boxSum(tmp, dst, line, 0, rows, 0, rows, cols, hy, hx)
	for r := range rows {
		h := float32(min(r+hy, rows-1) - max(r-hy, 0) + 1)
		for c := range cols {
			dst[r*cols+c] /= h * float32(min(c+hx, cols-1)-max(c-hx, 0)+1)
		}
	}
}

// medianAcross replaces each found value by the median of the found
// values within ±w/2 A-scans.
func medianAcross(v []int, found []bool, w int) {
	orig := slices.Clone(v)
	win := make([]int, 0, w)
	for c := range v {
		if !found[c] {
			continue
		}
		win = win[:0]
		for cc := max(0, c-w/2); cc <= min(len(v)-1, c+w/2); cc++ {
			if found[cc] {
				win = append(win, orig[cc])
			}
		}
		slices.Sort(win)
		v[c] = win[len(win)/2]
	}
}

// fillMissing interpolates v linearly across the A-scans not found,
// holding the nearest found value past either end.
func fillMissing(v []int, found []bool) {
	last := -1
	for c := range v {
		if !found[c] {
			continue
		}
		switch {
		case last < 0:
			for cc := range c {
				v[cc] = v[c]
			}
		case c-last > 1:
			for cc := last + 1; cc < c; cc++ {
				t := float64(cc-last) / float64(c-last)
				v[cc] = int(math.Round(float64(v[last])*(1-t) + float64(v[c])*t))
			}
		}
		last = c
	}
	for cc := last + 1; cc < len(v) && last >= 0; cc++ {
		v[cc] = v[last]
	}
}
