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
	Pattern Pattern           `json:"pattern"`
	Quality Quality           `json:"quality"`
	Cube    *Measurements     `json:"cube,omitempty"`
	Line    *LineMeasurements `json:"line,omitempty"`
	RNFL    *RNFLMeasurements `json:"rnfl,omitempty"`
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

// Measurable reports whether the analysis carries measurements.
func (a *Analysis) Measurable() bool { return a.Cube != nil || a.Line != nil || a.RNFL != nil }

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
		a.Cube, err = MeasureGradable(ctx, v, l, mask)
	case Line:
		a.Line, err = MeasureLine(v, l, mask)
	case Circle:
		a.RNFL, err = measureRNFL(v, l, mask, shadow)
	default:
		a.NotMeasurable = []string{fmt.Sprintf("octflow measures macular cubes, line scans and peripapillary circle scans, not %s scans", pattern)}
		return a, nil
	}
	if errors.Is(err, ErrNotMeasurable) {
		a.NotMeasurable = []string{err.Error()}
		return a, nil
	}
	if err != nil {
		return nil, err
	}
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
	if pattern == Circle && len(ev.supported[RNFLGCL]) == len(mask) {
		// The circle's RNFL is measured again with its RNFL/GCL bridged
		// across the vessels' shadows and the short stretches where the
		// image does not show it plainly: a noisy stretch does not pull
		// the sector.
		if a.RNFL, err = measureRNFL(v, l, mask, rnflBridge(ev.supported[RNFLGCL], shadow, v)); err != nil {
			return nil, err
		}
	}
	a.vouch(v, l, ev.supported, shadow)
	if (pattern == Cube || pattern == Line) && a.LesionsWithheld() == "" && l.has(BoundaryNames...) {
		fluid, drusen, unmatched, err := lesionAgreement(ctx, v, alt, l, again, a.Quality.Mask)
		if err != nil {
			return nil, err
		}
		if worst := min(fluid, drusen); unmatched > 0 && worst >= minLesionAgreement {
			a.withhold(FigureLesions, fmt.Sprintf("%d of the lesions found are not found again when the scan is denoised more strongly: "+
				"noise, not the eye, decides what is found", unmatched))
		} else if worst < minLesionAgreement {
			kind := "fluid"
			if drusen < fluid {
				kind = "drusen"
			}
			a.withhold(FigureLesions, fmt.Sprintf("the %s found changes when the scan is denoised more strongly (Dice %.2f between the two, %.2f needed): "+
				"noise, not the eye, decides what is found", kind, worst, minLesionAgreement))
		}
	}
	return a, nil
}
