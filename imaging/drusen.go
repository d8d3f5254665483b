package imaging

import (
	"math"
	"slices"
)

// A druse whose material is as bright as the RPE band does not lift the
// band's lower edge off Bruch's membrane: the edge is found at the
// dome's floor, and the dome shows only as the band thickened upwards,
// its top (the RPE boundary) raised over where the band's thickness
// around it would put it. These thresholds tell such a dome from the
// band's normal undulation.
const (
	// minDomeUm is the least a thickened band's top must rise over its
	// local baseline somewhere (and never less than three times the
	// least elevation, minDrusenUm's rows): the top is the RPE, a ridge
	// never judged reliable (within 2 px in 70–92% of a phantom's
	// A-scans under noise), and it moves between the bands of the RPE
	// complex. On the real scans the band's top rose so (over its own
	// baseline, the band thicker by as much) by at most 22 µm on the
	// drusen scan away from its dome, 28 µm on the CNV scan (31 µm over
	// 3 A-scans), under 15 µm on the normal retina, the real circles and
	// the real line's graded part (the band's thickness alone, its top
	// not asked to rise: 26–28 µm over 0.5–0.9 mm there); a phantom's
	// outer segments, were the boundary to take them, are 25 µm. The
	// drusen scan's subfoveal dome rises 49 µm.
	minDomeUm = 30.0
	// domeBaselineUm is the half-width of the window over which the
	// band's usual thickness (its lower quartile) is taken: twice and
	// more a druse's width, so a dome covers under a quarter of it.
	domeBaselineUm = 1000.0
	// maxDomeDip is the deepest valley, in log intensity, allowed between
	// a dome's raised top and the band under it (the median over its
	// crest): a dome is filled, while the band above the RPE raised over
	// a normal RPE (the EZ or the interdigitation zone taken for the
	// band's top) leaves the normal gap between them. The drusen scan's
	// dome shows a median valley of 0.15 (0–0.43 per A-scan); the real
	// line's thickened band (its thickness alone) about 0.5 (0.2–0.94).
	maxDomeDip = 0.25
	// minDomeFill is how bright a dome's filling must be (the lower
	// quartile of the rows it adds to the band, in log intensity), from
	// the level of what lies over the band's top (0) to the band's own
	// median (1), as the B-scan shows them (the median over its crest): a
	// band thickened by what normally lies over it, the outer segments,
	// is not filled. The drusen scan's dome fills 0.64 (0.44–1.05 per
	// A-scan).
	minDomeFill = 0.3
	// minDomeRidge is how much brighter, in log intensity, a dome's top
	// (the rows it adds to the band) must be than the band under it (the
	// median over its crest): the RPE rides on the deposit, the band's
	// brightest ridge raised with it, while the band above the RPE taken
	// for the band's top leaves the RPE, the brightest, under it. The
	// drusen scan's dome: 0.99 (0.47–1.58 per A-scan); the real line
	// under noise of σ 5%, denoised the second, stronger way, showed
	// filled domes of 33–34 µm (valleys 0.09–0.12) in its graded part,
	// ridges −0.05–0.11; the CNV scan's thickened band −0.16.
	minDomeRidge = 0.3
	// minCrestUm is the least width, along a B-scan, of a dome's crest
	// (where it rises minDomeUm or more): the size under which drusen
	// are called small (63 µm, AREDS), and never under 3 A-scans. A
	// crest narrower is the band's top pulled up over an A-scan or two,
	// not a dome; the CNV scan's thickened band rose 31 µm over 3
	// A-scans (35 µm), and, counted, was not found again after the
	// second denoising, which withheld the scan's drusen.
	minCrestUm = 63.0
)

// domeScan is what thickenedRPE measures of one A-scan: how many rows the
// band's top stands over its local baseline (excess), the deepest
// valley between the raised top and the band under it (dip), how
// bright the rows it adds are (fill, from what lies over the band's top,
// 0, to the band's median, 1), and how much brighter the brightest of
// them is than the brightest of the band under them (ridge), all in
// log intensity.
type domeScan struct {
	excess, dip, fill, ridge float64
}

// thickenedRPE measures, on B-scan f, how far the RPE band (from its top,
// the RPE boundary, to its lower edge) is thickened upwards at each
// A-scan: the lesser of how much thicker it is than usual around (the
// lower quartile of its thickness within domeBaselineUm) and how far its
// top rises over its own baseline there. An A-scan thickened so by
// least rows or more is marked in thick, and its measures (domeScan)
// written to domes.
func thickenedRPE(v *Volume, l *Layers, f int, least float64, thick []bool, domes []domeScan) {
	cols := v.Cols
	img := v.Frame(f)
	at := func(r, c int) float64 {
		r = max(0, min(v.Rows-1, r))
		return math.Log1p(float64(max(img[r*cols+c], 0)))
	}
	top := func(c int) int { return int(math.Round(float64(l.Row(RPE, f, c)))) }
	bottom := func(c int) int { return int(math.Round(float64(l.RPEBottom[f*cols+c]))) }
	width := make([]float64, cols)
	for c := range cols {
		width[c] = float64(l.RPEBottom[f*cols+c] - l.Row(RPE, f, c))
	}
	tops := l.Boundaries[RPE][f*cols : (f+1)*cols]
	use := make([]bool, cols)
	// The B-scan's levels: the band's median and what lies over its top
	// (as deep as the least dome: minDomeUm).
	over := max(1, int(math.Round(minDomeUm/v.Spacing.AxialUm)))
	bands, overs := make([]float64, 0, cols), make([]float64, 0, cols)
	var col []float64
	for c := range cols {
		col = col[:0]
		for r := top(c); r < bottom(c); r++ {
			col = append(col, at(r, c))
		}
		if len(col) > 0 {
			bands = append(bands, medianOf(col))
		}
		col = col[:0]
		for r := top(c) - over; r < top(c); r++ {
			col = append(col, at(r, c))
		}
		overs = append(overs, medianOf(col))
	}
	bandLevel, overLevel := medianOf(bands), medianOf(overs)
	if bandLevel-overLevel < 0.1 { // no band to tell a filling by
		return
	}
	half := max(2, int(math.Round(domeBaselineUm/v.Spacing.LateralUm)))
	window := make([]float64, 0, 2*half+1)
	reach := int(math.Ceil(least)) // the band's own ridge under its baseline top
	for c := range cols {
		window = append(window[:0], width[max(0, c-half):min(cols, c+half+1)]...)
		slices.Sort(window)
		excess := width[c] - window[len(window)/4]
		if excess < least {
			continue
		}
		// The top must rise too, over its own baseline (fitted as Bruch's
		// membrane's is, over the same window, erring deep): a band
		// thickened by its lower edge sinking is no dome.
		lo, hi := max(0, c-half), min(cols, c+half+1)
		rise := polyAt(fitBaseline(tops[lo:hi], use[lo:hi], least), c-lo, hi-lo) - float64(tops[c])
		if excess = min(excess, rise); excess < least {
			continue
		}
		i := f*cols + c
		thick[i] = true
		t, e := top(c), int(math.Round(excess))
		// The deepest valley over [t, t+e+reach]: a row darker than the
		// brightest rows both above and below it.
		end := t + e + reach
		var dip float64
		for r := t + 1; r < end; r++ {
			var above, below float64
			for k := t; k <= r; k++ {
				above = max(above, at(k, c))
			}
			for k := r; k <= end; k++ {
				below = max(below, at(k, c))
			}
			dip = max(dip, min(above, below)-at(r, c))
		}
		col = col[:0]
		for r := t + 1; r <= t+e; r++ {
			col = append(col, at(r, c))
		}
		slices.Sort(col)
		fill := (col[len(col)/4] - overLevel) / (bandLevel - overLevel)
		var risen, under float64
		for r := t; r < t+e; r++ {
			risen = max(risen, at(r, c))
		}
		for r := t + e; r <= bottom(c); r++ {
			under = max(under, at(r, c))
		}
		domes[i] = domeScan{excess: excess, dip: dip, fill: fill, ridge: risen - under}
	}
}

// markDomes marks the drusen seen as the band thickened upwards: the
// regions of thickened A-scans (thickenedRPE), connected en face, that
// rise peak rows over their baseline over minCrestUm of a B-scan (the
// crest), whose crest the image shows filled and topped by the band's
// brightest ridge (medians over the crest: valley at most maxDomeDip,
// filling at least minDomeFill, ridge at least minDomeRidge), and that
// lie whole within the B-scans (a region reaching a B-scan's end shows
// no baseline on that side: a dome cannot be told from a band thicker
// there). A dome's deposit is its rise: from the band's top down by its
// excess.
func markDomes(v *Volume, l *Layers, thick []bool, domes []domeScan, peak float64, drusen []bool) {
	var dips, fills, ridges []float64
	crest := make([]int, v.Frames) // a region's crest A-scans per B-scan
	minCrest := max(3, int(math.Ceil(minCrestUm/v.Spacing.LateralUm)))
	enFaceRegions(v, thick, func(region []int) {
		dips, fills, ridges = dips[:0], fills[:0], ridges[:0]
		clear(crest)
		for _, i := range region {
			if c := i % v.Cols; c == 0 || c == v.Cols-1 {
				return
			}
			if d := domes[i]; d.excess >= peak {
				dips, fills, ridges = append(dips, d.dip), append(fills, d.fill), append(ridges, d.ridge)
				crest[i/v.Cols]++
			}
		}
		if slices.Max(crest) < minCrest || medianOf(dips) > maxDomeDip || medianOf(fills) < minDomeFill ||
			medianOf(ridges) < minDomeRidge {
			return
		}
		for _, i := range region {
			f, c := i/v.Cols, i%v.Cols
			r0 := max(int(math.Round(float64(l.Row(RPE, f, c)))), 0)
			r1 := min(r0+int(math.Round(domes[i].excess)), v.Rows)
			for r := r0; r < r1; r++ {
				drusen[(f*v.Rows+r)*v.Cols+c] = true
			}
		}
	})
}

// enFaceRegions calls visit with each region of marked A-scans
// (indexed frame·cols+col) connected en face, across A-scans and
// B-scans. The region's slice is reused between calls.
func enFaceRegions(v *Volume, marked []bool, visit func(region []int)) {
	seen := make([]bool, len(marked))
	var region, stack []int
	for start := range marked {
		if !marked[start] || seen[start] {
			continue
		}
		seen[start] = true
		region, stack = region[:0], append(stack[:0], start)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			region = append(region, i)
			f, c := i/v.Cols, i%v.Cols
			for _, n := range [][2]int{{f - 1, c}, {f + 1, c}, {f, c - 1}, {f, c + 1}} {
				if j := n[0]*v.Cols + n[1]; n[0] >= 0 && n[0] < v.Frames && n[1] >= 0 && n[1] < v.Cols && marked[j] && !seen[j] {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
		visit(region)
	}
}
