package imaging

import (
	"math"
	"slices"
	"strconv"
)

// aScanEvidence is what the image says about the boundaries of one
// A-scan, whatever found them.
type aScanEvidence struct {
	contrast    float64 // mean log level of the brighter half of the retina (ILM to BM) over the background's
	edgeILM     float64 // log step up at the ILM
	edgeBM      float64 // log step down at BM
	thicknessUm float64 // ILM to BM
	edgeRPE     float64 // log step down at the RPE band's lower edge as found
	jump        float64 // rows the ILM and BM move between the A-scans either side
	clipped     bool    // the retina reaches the top of the image (see clipUm)
}

// gatherEvidence reads the evidence of every A-scan of a denoised volume
// on the working scale.
func gatherEvidence(v *Volume, l *Layers) []aScanEvidence {
	ilm, bm := l.Boundaries[ILM], l.Boundaries[BM]
	ev := make([]aScanEvidence, v.Frames*v.Cols)
	bg := math.Log1p(workingBackground)
	e := max(2, int(math.Round(16/v.Spacing.AxialUm))) // rows either side of an edge
	forEachFrame(v.Frames, func(f int) {
		img := v.Frame(f)
		levels := make([]float64, 0, v.Rows)
		meanLog := func(c, r0, r1 int) float64 { // rows [r0, r1), clamped
			r0, r1 = max(r0, 0), min(r1, v.Rows)
			if r1 <= r0 {
				return bg
			}
			var s float64
			for r := r0; r < r1; r++ {
				s += math.Log1p(float64(max(img[r*v.Cols+c], 0)))
			}
			return s / float64(r1-r0)
		}
		for c := range v.Cols {
			i := f*v.Cols + c
			top, bottom := int(math.Round(float64(ilm[i]))), int(math.Round(float64(bm[i])))
			a := &ev[i]
			a.thicknessUm = float64(bm[i]-ilm[i]) * v.Spacing.AxialUm
			if bottom-top >= 2 {
				a.contrast = brighterHalfLog(img, v.Cols, c, max(top, 0), min(bottom, v.Rows), levels) - bg
			}
			a.edgeILM = meanLog(c, top, top+e) - meanLog(c, top-e, top)
			a.edgeBM = meanLog(c, bottom-e, bottom) - meanLog(c, bottom, bottom+e)
			a.edgeRPE = a.edgeBM
			if len(l.RPEBottom) == len(ev) {
				band := int(math.Round(float64(l.RPEBottom[i])))
				a.edgeRPE = meanLog(c, band-e, band) - meanLog(c, band, band+e)
			}
			if top-e < 0 || bottom+e > v.Rows {
				a.edgeILM, a.edgeBM = min(a.edgeILM, 0), min(a.edgeBM, 0) // a boundary at the image's edge is no edge
			}
			a.clipped = (len(l.Clipped) == len(ev) && l.Clipped[i]) || float64(ilm[i])*v.Spacing.AxialUm < clipUm
			if c > 0 && c < v.Cols-1 {
				a.jump = math.Abs(float64(ilm[i+1]-ilm[i-1])) + math.Abs(float64(bm[i+1]-bm[i-1]))
			}
		}
	})
	return ev
}

// Gradability is the quality gate's verdict on an exam.
type Gradability string

// Verdicts of the quality gate.
const (
	// Gradable: the retina was found with confidence across the scan.
	Gradable Gradability = "full"
	// PartlyGradable: some of the scan could not be graded; measurements
	// cover the rest and say so.
	PartlyGradable Gradability = "partial"
	// Ungradable: nothing can be measured; the report says why.
	Ungradable Gradability = "ungradable"
)

// Quality is the quality gate's judgement of a segmented scan, from
// evidence in the image, not from the segmenter's own word: how far the
// retina's surface stands out of the vitreous (the ILM's step up in log
// intensity, over 16 µm either side), whether the retina stands out of
// the background at all, whether the retina's thickness is one an eye
// can have, whether the retina was seen before the search, whether it
// reaches the top of the image (cut off or folded back), and whether an
// RPE band ends under it.
type Quality struct {
	Gradable Gradability `json:"gradable"`
	Reasons  []string    `json:"reasons,omitempty"`
	// SignalStrength (0–10) is the mean ILM step over all A-scans, 10 at
	// a step of 2 in log intensity (a factor of 7.4) or more.
	SignalStrength float64 `json:"signalStrength"`
	// Grade is good (signal strength ≥ 7), fair (≥ 4) or poor.
	Grade string `json:"grade"`
	// GradableFraction is the share of A-scans graded.
	GradableFraction float64 `json:"gradableFraction"`
	// BScans is each B-scan's segmentation confidence (0–1: the mean of
	// its A-scans' scores) and share of gradable A-scans.
	BScans []BScanQuality `json:"bscans"`
	// Mask marks the gradable A-scans, [frame*cols+col].
	Mask []bool `json:"-"`
}

// BScanQuality is one B-scan's part of the quality gate.
type BScanQuality struct {
	Frame            int     `json:"frame"`
	Confidence       float64 `json:"confidence"`
	GradableFraction float64 `json:"gradableFraction"`
}

// Thresholds of the quality gate.
const (
	// An A-scan scores 0 at an ILM step of edgeNone and 1 at edgeFull
	// (log intensity); it is gradable at a score of 0.5. Pure speckle
	// steps ≤ 0.65 at the 95th percentile; real and phantom retinas ≥ 1.2
	// at the 5th.
	edgeNone, edgeFull = 0.6, 1.2
	// minContrast is the least mean log level of the retina's brighter
	// half over the background (a factor of 2.7). The brighter half, not
	// the whole: fluid is as dark as the background, and a retina swollen
	// by cysts is the one that most needs grading.
	minContrast = 1.0
	// majority is the half-width of the A-scan window whose majority
	// decides an A-scan: isolated passes in noise do not grade.
	majority = 5
	// fullFraction of gradable A-scans, and every B-scan at least half
	// gradable, is a fully gradable exam; under minFraction is none.
	fullFraction = 0.9
	minFraction  = 0.3
)

// thicknessRange is the retinal thickness (ILM to BM, µm) a pattern's
// scan can show: a thin atrophic macula to severe oedema; around the
// disc a thinner band.
func thicknessRange(p Pattern) (lo, hi float64) {
	if p == Circle {
		return 100, 800
	}
	return 100, 1000
}

// Assess runs the quality gate over a denoised volume and its layers.
func Assess(v *Volume, l *Layers) Quality {
	ev := gatherEvidence(v, l)
	lo, hi := thicknessRange(v.Pattern)
	score := make([]float64, len(ev))
	pass := make([]bool, len(ev))
	var strength float64
	noRPE := rpeMissing(v, ev)
	var seenNone, clipped, noBand, thin, flat int
	for i, a := range ev {
		s := min(max((a.edgeILM-edgeNone)/(edgeFull-edgeNone), 0), 1)
		strength += min(max(a.edgeILM/2, 0), 1)
		switch {
		case len(l.Retina) == len(ev) && !l.Retina[i]:
			s, seenNone = 0, seenNone+1
		case a.clipped:
			s, clipped = 0, clipped+1
		case noRPE[i]:
			s, noBand = 0, noBand+1
		case a.contrast < minContrast:
			s, flat = 0, flat+1
		case a.thicknessUm < lo || a.thicknessUm > hi:
			s, thin = 0, thin+1
		}
		score[i], pass[i] = s, s >= 0.5
	}
	q := Quality{SignalStrength: round3(10 * strength / float64(max(len(ev), 1))), Mask: make([]bool, len(ev))}
	q.SignalStrength = math.Round(q.SignalStrength*10) / 10
	q.Grade = "poor"
	switch {
	case q.SignalStrength >= 7:
		q.Grade = "good"
	case q.SignalStrength >= 4:
		q.Grade = "fair"
	}
	var gradable, weakBScans, emptyBScans int
	for f := range v.Frames {
		b := BScanQuality{Frame: f}
		var n int
		for c := range v.Cols {
			var votes, total int
			for cc := max(0, c-majority); cc <= min(v.Cols-1, c+majority); cc++ {
				total++
				if pass[f*v.Cols+cc] {
					votes++
				}
			}
			i := f*v.Cols + c
			if pass[i] && 2*votes > total {
				q.Mask[i] = true
				n++
			}
			b.Confidence += score[i]
		}
		b.Confidence = round3(b.Confidence / float64(v.Cols))
		b.GradableFraction = round3(float64(n) / float64(v.Cols))
		switch {
		case n == 0:
			emptyBScans++
		case 2*n < v.Cols:
			weakBScans++
		}
		gradable += n
		q.BScans = append(q.BScans, b)
	}
	q.GradableFraction = round3(float64(gradable) / float64(max(len(ev), 1)))
	switch {
	case q.GradableFraction < minFraction:
		q.Gradable = Ungradable
	case q.GradableFraction >= fullFraction && weakBScans == 0 && emptyBScans == 0:
		q.Gradable = Gradable
	default:
		q.Gradable = PartlyGradable
	}
	if q.Gradable != Gradable {
		n := len(ev)
		pct := func(k int) int { return int(math.Round(100 * float64(k) / float64(n))) }
		q.Reasons = append(q.Reasons, pctReason(100-int(math.Round(100*q.GradableFraction)), "of the A-scans could not be graded"))
		if emptyBScans > 0 {
			q.Reasons = append(q.Reasons, countReason(emptyBScans, v.Frames, "B-scans show no gradable retina (blank, blink or out of range)"))
		}
		if seenNone > 0 {
			q.Reasons = append(q.Reasons, pctReason(pct(seenNone), "of the A-scans show no retina above the background"))
		}
		if clipped > 0 {
			q.Reasons = append(q.Reasons, pctReason(pct(clipped), "of the A-scans: the retina reaches the top of the image (cut off, or folded back by the mirror artefact; the scan was taken too close)"))
		}
		if noBand > 0 {
			q.Reasons = append(q.Reasons, pctReason(pct(noBand), "of the A-scans: no RPE band under the retina (the optic disc, or a deep shadow), so Bruch's membrane cannot be told"))
		}
		if flat > 0 {
			q.Reasons = append(q.Reasons, pctReason(pct(flat), "of the A-scans: the retina does not stand out of the background"))
		}
		if thin > 0 {
			q.Reasons = append(q.Reasons, pctReason(pct(thin), "of the A-scans: the boundaries found give a thickness no retina has"))
		}
		if q.SignalStrength < 4 {
			q.Reasons = append(q.Reasons, "signal strength "+formatFloat(q.SignalStrength)+" of 10: the retina's surface hardly stands out of the vitreous")
		}
	}
	return q
}

// minRPEEdge is the least mean step down (log intensity) at the RPE
// band's lower edge over rpeWindowUm either side of an A-scan: where
// there is no band to end (the optic disc, under a dense shadow) the
// edge found is noise, 0.15 or less on the real scans; the band's edge
// itself steps 0.5–0.8. The band is 15–25 µm thick, so only a scan
// sampled at rpeResolvedUm per row or finer resolves it; on a coarser
// one the step is blurred away and nothing is judged by it.
const (
	minRPEEdge    = 0.15
	rpeWindowUm   = 100
	rpeResolvedUm = 8
)

// rpeMissing marks the A-scans with no RPE band under the retina.
func rpeMissing(v *Volume, ev []aScanEvidence) []bool {
	half := max(1, int(math.Round(rpeWindowUm/max(v.Spacing.LateralUm, 1))))
	out := make([]bool, len(ev))
	if v.Spacing.AxialUm > rpeResolvedUm {
		return out
	}
	for f := range v.Frames {
		for c := range v.Cols {
			var sum float64
			var n int
			for cc := max(0, c-half); cc <= min(v.Cols-1, c+half); cc++ {
				sum += ev[f*v.Cols+cc].edgeRPE
				n++
			}
			out[f*v.Cols+c] = sum/float64(n) < minRPEEdge
		}
	}
	return out
}

func pctReason(pct int, what string) string { return strconv.Itoa(pct) + "% " + what }

func countReason(k, n int, what string) string {
	return strconv.Itoa(k) + " of " + strconv.Itoa(n) + " " + what
}

func formatFloat(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// brighterHalfLog is the mean log level of the brighter half of column c
// over rows [r0, r1) of a B-scan (img, cols wide); levels is scratch
// space.
func brighterHalfLog(img []float32, cols, c, r0, r1 int, levels []float64) float64 {
	levels = levels[:0]
	for r := r0; r < r1; r++ {
		levels = append(levels, math.Log1p(float64(max(img[r*cols+c], 0))))
	}
	if len(levels) == 0 {
		return 0
	}
	slices.Sort(levels)
	var s float64
	upper := levels[len(levels)/2:]
	for _, x := range upper {
		s += x
	}
	return s / float64(len(upper))
}
