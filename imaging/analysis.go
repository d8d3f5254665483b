package imaging

import (
	"context"
	"errors"
	"fmt"
)

// Analysis is what the measure stage concludes about an exam: its
// pattern, the quality gate's verdict, and the measurements the pattern
// allows over the gradable A-scans only. When nothing can be measured
// (an ungradable scan, a pattern octflow does not measure, no fovea in
// reach) every measurement is absent and NotMeasurable says why: no
// number comes from a failed analysis.
type Analysis struct {
	Pattern Pattern `json:"pattern"`
	Quality Quality `json:"quality"`
	// Figures are what the pattern allows measured (a cube's, a line's
	// or a circle's); nil when nothing was. In JSON they go under their
	// scan type's key (cube, line or rnfl; see ScanType).
	Figures Figures `json:"-"`
	// NotMeasurable lists why nothing was measured; empty when something
	// was.
	NotMeasurable []string `json:"notMeasurable,omitempty"`
	// Boundaries says how reliable each boundary is over the graded
	// A-scans; Withheld lists the figures not reported because a
	// boundary they need is not reliable where they are measured, each
	// with its reason. The figures present are those the analysis
	// vouches for.
	Boundaries []BoundaryReliability `json:"boundaries,omitempty"`
	Withheld   []Withheld            `json:"withheld,omitempty"`
	// evidence is where each boundary was judged reliable, per A-scan,
	// and by what (judgeBoundaries): what the degradation suite
	// calibrates.
	evidence boundaryEvidence
	// layersHeld is, on a cube, where each boundary holds: reliable, or
	// bridged between reliable A-scans (bridgeBoundary); a layer is
	// measured and judged where both its boundaries hold.
	layersHeld map[string][]bool
	// measured is, on a cube or a circle, the A-scans its figures were
	// measured on (graded, and where the judgment allows: on a circle,
	// its RNFL/GCL reliable or in a vessel's shadow, not bridged across
	// unreliable A-scans); a line's profile says so itself (0 where
	// not). See ThicknessShare.
	measured []bool
}

// ThicknessShare is the share of the A-scans among selects (nil: all)
// that get a thickness: a line's profile, a circle's RNFL, a cube's
// retina. With among the A-scans a device segments, it is the graded
// share that octflow tracks beside its accuracy on real scans. It is
// the analysis's own: an analysis read back from measurements.json,
// which does not carry where a cube or circle was measured, gives 0
// for those.
func (a *Analysis) ThicknessShare(among []bool) float64 {
	var has func(i int) bool
	switch {
	case a.line() != nil:
		has = func(i int) bool { return i < len(a.line().ProfileUm) && a.line().ProfileUm[i] > 0 }
	case a.Figures != nil && a.measured != nil:
		has = func(i int) bool { return i < len(a.measured) && a.measured[i] }
	default:
		return 0
	}
	var n, k int
	for i := range len(a.Quality.Mask) {
		if among != nil && (i >= len(among) || !among[i]) {
			continue
		}
		n++
		if has(i) {
			k++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// LesionsWithheld is why the lesions found are not to be reported, ""
// when they may be.
func (a *Analysis) LesionsWithheld() string {
	for _, w := range a.Withheld {
		if w.Figure == FigureLesions {
			return w.Reason
		}
	}
	return ""
}

// LesionKindWithheld is why lesions of a type (IntraretinalFluid, …) are
// not to be reported: all lesions withheld (LesionsWithheld) or their
// kind (KindFigure); "" when they may be.
func (a *Analysis) LesionKindWithheld(lesionType string) string {
	kind := KindFigure(lesionType)
	for _, w := range a.Withheld {
		if w.Figure == FigureLesions || w.Figure == kind {
			return w.Reason
		}
	}
	return ""
}

// RetinaMeasured marks, per A-scan ([frame*Cols+col]), where the
// retina's thickness (ILM to Bruch's membrane) was measured and vouched
// for: a cube's graded A-scans whose ILM is reliable and whose BM holds,
// a line's A-scans with a thickness in its profile. Nil for a circle
// (its figure is the RNFL) and when nothing was measured, and for an
// analysis read back from JSON, which does not carry it for a cube.
func (a *Analysis) RetinaMeasured() []bool {
	switch {
	case a.line() != nil:
		out := make([]bool, len(a.line().ProfileUm))
		for i, t := range a.line().ProfileUm {
			out[i] = t > 0
		}
		return out
	case a.cube() != nil && a.measured != nil:
		return append([]bool(nil), a.measured...)
	}
	return nil
}

// Measurable reports whether the analysis carries measurements.
func (a *Analysis) Measurable() bool { return a.Figures != nil }

// Analyze runs the quality gate over a denoised, segmented volume and
// measures what its pattern (v.Pattern; see ResolvePattern) allows. It
// then reports only the figures whose boundaries the image shows
// reliably where they are measured (see judgeBoundaries): the others
// are listed in Withheld with the reason, and a full verdict becomes
// partial. Scans whose rows are coarser than judgedResolutionUm are not
// judged so.
func Analyze(ctx context.Context, v *Volume, l *Layers) (*Analysis, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols || !l.has(ILM, BM) {
		return nil, invalidf("layers (%d×%d) do not match the volume (%d×%d)", l.Frames, l.Cols, v.Frames, v.Cols)
	}
	pattern, err := ResolvePattern(v, "")
	if err != nil {
		return nil, err
	}
	v.Pattern = pattern
	a := &Analysis{Pattern: pattern, Quality: Assess(v, l)}
	if a.Quality.Gradable == Ungradable {
		a.NotMeasurable = append([]string{"the scan could not be graded"}, a.Quality.Reasons...)
		return a, nil
	}
	mask := a.Quality.Mask
	var shadow []bool // the vessels' shadows, bridged on a circle's RNFL
	if pattern == Circle {
		shadow = vesselShadows(v, l)
	}
	switch pattern {
	case Cube:
		a.Figures, err = asFigures(MeasureGradable(ctx, v, l, mask))
	case Line:
		a.Figures, err = asFigures(MeasureLine(v, l, mask))
	case Circle:
		a.Figures, err = asFigures(measureRNFL(v, l, mask, shadow))
	default:
		a.NotMeasurable = []string{fmt.Sprintf("octflow measures macular cubes, line scans and peripapillary circle scans, not %s scans", pattern)}
		return a, nil
	}
	if errors.Is(err, ErrNotMeasurable) {
		a.NotMeasurable = []string{err.Error()}
		if pattern == Cube || pattern == Line {
			// Lesions are found between boundaries no figure could be
			// measured on: nothing vouches for them either.
			a.withhold(FigureLesions, "nothing could be measured: "+err.Error())
		}
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	a.measured = mask
	if v.Spacing.AxialUm > judgedResolutionUm {
		return a, nil // rows too coarse to judge a boundary by
	}
	alt, err := Denoise(ctx, v, DenoiseOptions{Strength: altStrength})
	if err != nil {
		return nil, err
	}
	again, err := SegmentLayers(ctx, alt)
	if err != nil {
		return nil, err
	}
	ev := judgeBoundaries(v, l, again, shadow)
	a.evidence = ev
	measured, measuredOn := mask, l
	switch {
	case pattern == Circle && len(ev.reliable[RNFLGCL]) == len(mask) && len(ev.reliable[ILM]) == len(mask):
		// The circle's RNFL is measured again on reliable rows only: over
		// the A-scans whose ILM is reliable, its RNFL/GCL taken where it
		// is reliable outside the vessels' shadows and bridged, in a
		// straight line around the circle, everywhere else (as devices
		// bridge the vessels).
		measured = andMask(mask, ev.reliable[ILM])
		if a.Figures, err = asFigures(measureRNFL(v, l, measured, notMask(andMask(ev.reliable[RNFLGCL], notMask(shadow))))); errors.Is(err, ErrNotMeasurable) {
			reason := "on the A-scans whose ILM is reliable: " + err.Error()
			a.withhold(FigureRNFLGlobal, reason)
			a.withhold(FigureRNFLSectors, reason)
			a.NotMeasurable = append(a.NotMeasurable, "RNFL thickness not reported: "+reason)
			return a, nil
		} else if err != nil {
			return nil, err
		}
	case pattern == Cube && len(ev.reliable[ILM]) == len(mask) && len(ev.reliable[BM]) == len(mask):
		// The cube is measured again on reliable rows: over the graded
		// A-scans whose ILM is reliable, to Bruch's membrane where it is
		// reliable, bridged in a straight line along the B-scan between
		// the nearest A-scans either side where it is elsewhere (the
		// membrane runs smoothly; a bridge holds only between two).
		// The layers' boundaries are bridged so too, and each layer is
		// measured where both its boundaries hold (a.layersHeld).
		held := map[string][]bool{}
		measuredOn = l
		for _, b := range BoundaryNames {
			if b != RPE && len(ev.reliable[b]) == len(mask) {
				measuredOn, held[b] = bridgeBoundary(measuredOn, b, ev.reliable[b], v.Spacing.LateralUm)
			}
		}
		a.layersHeld = held
		measured = andMask(mask, andMask(ev.reliable[ILM], held[BM]))
		if a.Figures, err = asFigures(MeasureGradable(ctx, v, measuredOn, measured)); errors.Is(err, ErrNotMeasurable) {
			reason := "on the A-scans whose ILM and BM are reliable: " + err.Error()
			a.withhold(FigureMeasurements, reason)
			a.withhold(FigureLesions, reason)
			a.NotMeasurable = append(a.NotMeasurable, "not reported: "+reason)
			return a, nil
		} else if err != nil {
			return nil, err
		}
		a.cube().measureLayers(v, measured, held)
	}
	a.measured = measured
	if pattern == Circle && len(ev.reliable[RNFLGCL]) == len(mask) {
		// The RNFL bridged between reliable A-scans outside the vessels'
		// shadows is drawn, not measured.
		a.measured = andMask(measured, orMask(ev.reliable[RNFLGCL], shadow))
	}
	a.vouch(v, l, measuredOn, ev.reliable, measured, shadow)
	if (pattern == Cube || pattern == Line) && a.LesionsWithheld() == "" && l.has(BoundaryNames...) {
		ag, err := lesionAgreement(ctx, v, alt, l, again, a.Quality.Mask)
		if err != nil {
			return nil, err
		}
		if figure, why := lesionWithholding(ag); figure != "" {
			a.withhold(figure, why)
		}
	}
	return a, nil
}

// lesionWithholding is what the two denoisings' agreement on the lesions
// withholds, and why: a kind found unsteadily withholds that kind
// (FigureFluid, FigureDrusen), both withhold every lesion
// (FigureLesions), and so does a streak (a region in one B-scan only,
// wide: flat), which is what the noise made of the volume whichever kind
// it was taken for. "" when nothing is.
func lesionWithholding(ag agreement) (figure, why string) {
	fluid, drusen := lesionVerdict(ag, kindFluid), lesionVerdict(ag, kindDrusen)
	switch {
	case fluid != "" && drusen != "":
		return FigureLesions, fluid + "; " + drusen
	case ag.flat[kindFluid]+ag.flat[kindDrusen] > 0:
		return FigureLesions, fluid + drusen
	case fluid != "":
		return FigureFluid, fluid
	case drusen != "":
		return FigureDrusen, drusen
	}
	return "", ""
}

// lesionVerdict is why the lesions of a kind (kindFluid, kindDrusen)
// are withheld, from how far the two denoisings agree on them
// (lesionAgreement), or "" when they may be reported.
func lesionVerdict(ag agreement, kind int) string {
	name := [2]string{"fluid", "drusen"}[kind]
	switch {
	case ag.flat[kind] > 0:
		return fmt.Sprintf("%d of the %s regions found %s in one B-scan only while wider than %d B-scan spacings: a streak of noise, not a deposit or a pocket, which are about as long across B-scans as along them",
			ag.flat[kind], name, pick(ag.flat[kind], "lies", "lie"), flatLesionSpacings)
	case ag.dice[kind] < minLesionAgreement:
		return fmt.Sprintf("the %s found changes when the scan is denoised more strongly (Dice %.2f between the two, %.2f needed): "+
			"noise, not the eye, decides what is found", name, ag.dice[kind], minLesionAgreement)
	case ag.unmatched[kind] > 0:
		return fmt.Sprintf("%d of the %s regions found %s not found again when the scan is denoised more strongly: "+
			"noise, not the eye, decides what is found", ag.unmatched[kind], name, pick(ag.unmatched[kind], "is", "are"))
	}
	return ""
}

// pick is one or many by n.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
