package activities

import (
	"slices"
	"testing"

	"octflow/imaging"
)

// TestSummaryNamesWhatIsWithheld: the status summary names the figures
// the analysis withholds and says when lesions are not reported, so that
// a count of 0 is not read as no lesion; what is reported stays. The
// lesions themselves are the report's to add.
func TestSummaryNamesWhatIsWithheld(t *testing.T) {
	ok := imaging.Quality{Gradable: imaging.PartlyGradable}
	line := &imaging.LineMeasurements{MeanThicknessUm: 280}
	for _, c := range []struct {
		name         string
		an           *imaging.Analysis
		wantWithheld []string
		wantLesions  bool
		wantCentral  bool
	}{
		{"nothing withheld", &imaging.Analysis{Pattern: imaging.Line, Quality: ok, Figures: line}, nil, false, false},
		{"central and lesions withheld", &imaging.Analysis{Pattern: imaging.Line, Quality: ok, Figures: line,
			Withheld: []imaging.Withheld{{Figure: imaging.FigureCentral, Reason: "the pit is not shown plainly"}, {Figure: imaging.FigureLesions, Reason: "r"}}},
			[]string{imaging.FigureCentral, imaging.FigureLesions}, true, false},
		{"RNFL withheld, nothing measured", &imaging.Analysis{Pattern: imaging.Circle, Quality: ok, NotMeasurable: []string{"r"},
			Withheld: []imaging.Withheld{{Figure: imaging.FigureRNFLGlobal, Reason: "r"}}}, []string{imaging.FigureRNFLGlobal}, false, false},
	} {
		s := summarize(c.an)
		if s.LesionFinding != "" || s.Lesions != 0 {
			t.Errorf("%s: %d lesions, finding %q before the report", c.name, s.Lesions, s.LesionFinding)
		}
		if !slices.Equal(s.Withheld, c.wantWithheld) || s.LesionsWithheld != c.wantLesions {
			t.Errorf("%s: withheld %v, lesions withheld %v; want %v, %v", c.name, s.Withheld, s.LesionsWithheld, c.wantWithheld, c.wantLesions)
		}
		// Each withheld figure with its reason, for the status.
		for _, w := range c.an.Withheld {
			if s.WithheldReasons[w.Figure] != w.Reason {
				t.Errorf("%s: %s withheld because %q, want %q", c.name, w.Figure, s.WithheldReasons[w.Figure], w.Reason)
			}
		}
		if len(s.WithheldReasons) != len(c.wantWithheld) {
			t.Errorf("%s: reasons %v for %v", c.name, s.WithheldReasons, c.wantWithheld)
		}
		if _, rnfl := c.an.Figures.(*imaging.RNFLMeasurements); (s.CentralThicknessUm != nil) != c.wantCentral || (s.RNFLGlobalUm != nil && !rnfl) {
			t.Errorf("%s: central %v, RNFL %v: a withheld figure in the summary", c.name, s.CentralThicknessUm, s.RNFLGlobalUm)
		}
	}
}
