package report_test

import (
	"os"
	"strings"
	"testing"

	"octflow/imaging"
	"octflow/octdicom"
	. "octflow/report"
)

// TestRealPathologyIsReportedAsTheImageShows runs four real SPECTRALIS
// B-scans of the Kermany set (../imaging/testdata/realdata/kermany) as
// the stages do (normalise, denoise, layers, analysis, lesion search) into
// a report, and checks what it says against what the image shows: the
// DME scan's large intraretinal cyst is reported and outlined where it
// lies, the drusen scan's largest druse likewise with no fluid, the CNV
// scan's subretinal material is not called normal (found or withheld,
// never "none"), and the normal scan is graded with no lesion. Whatever
// the finding, the PDF says it word for word.
func TestRealPathologyIsReportedAsTheImageShows(t *testing.T) {
	type spot struct{ col, row int } // a point inside the lesion, read off the image
	for _, c := range []struct {
		name    string
		want    string // the lesion type a box must outline around each spot of at
		at      []spot
		none    bool // the scan shows no lesion: none may be reported
		noteNil bool // the finding must not say there is none
	}{
		{name: "DME-9583225-1", want: imaging.IntraretinalFluid, at: []spot{{402, 245}}},
		// The largest druse, and the dome under the fovea's temporal
		// edge, whose deposit is as bright as the RPE band: the band
		// thickens upwards, its lower edge stays on the membrane.
		{name: "DRUSEN-53018-1", want: imaging.Drusen, at: []spot{{300, 200}, {410, 195}}},
		{name: "CNV-1016042-1", noteNil: true},
		{name: "NORMAL-1384-2", none: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, figs := realReport(t, "../imaging/testdata/realdata/kermany/"+c.name+".dcm")
			if r.Quality.Gradable == imaging.Ungradable || !r.Measurable {
				t.Fatalf("gate %s (%q), measurable %v: a clean device scan should be graded", r.Quality.Gradable, r.Quality.Reasons, r.Measurable)
			}
			t.Logf("graded %.0f%%; %d lesions, %d on ungraded A-scans; finding %q", 100*r.Quality.GradableFraction, len(r.Lesions), r.LesionsUngraded, r.LesionFinding)
			switch {
			case c.want != "":
				for _, at := range c.at {
					var outlined bool
					for _, l := range r.Lesions {
						for _, b := range l.Boxes {
							inside := b.Col0 <= at.col && at.col <= b.Col1 && b.Row0 <= at.row && at.row <= b.Row1
							// An outline is a lesion's, not the retina's: no
							// wider than 2 mm nor taller than 400 µm.
							tight := float64(b.Col1-b.Col0+1)*figs.Spacing.LateralUm <= 2000 && float64(b.Row1-b.Row0+1)*figs.Spacing.AxialUm <= 400
							outlined = outlined || l.Type == c.want && inside && tight
						}
					}
					if !outlined {
						t.Errorf("no %s outlined around A-scan %d, row %d, where the image shows it: lesions %+v, withheld %q", c.want, at.col, at.row, r.Lesions, r.LesionsWithheld)
					}
				}
				if c.want == imaging.Drusen {
					for _, l := range r.Lesions {
						if l.Type == imaging.IntraretinalFluid || l.Type == imaging.SubretinalFluid {
							t.Errorf("%s reported at A-scan %d on a drusen scan with no fluid", l.Type, l.Col)
						}
					}
				}
			case c.noteNil:
				if len(r.Lesions) == 0 && !strings.Contains(strings.ToLower(r.LesionFinding), "not reported") {
					t.Errorf("finding %q: the scan's subretinal material is called normal", r.LesionFinding)
				}
			case c.none:
				if len(r.Lesions) > 0 || r.LesionsWithheld != "" {
					t.Errorf("lesions %+v, withheld %q, on a normal retina", r.Lesions, r.LesionsWithheld)
				}
			}
			if none := strings.Contains(r.LesionFinding, NoLesionFound) || strings.HasPrefix(r.LesionFinding, "None found"); none != c.none {
				t.Errorf("finding %q: says none was found %v, want %v", r.LesionFinding, none, c.none)
			}
			pdf, err := PDF(r, figs)
			if err != nil {
				t.Fatal(err)
			}
			if text := PDFText(t, pdf); !strings.Contains(text, r.LesionFinding) {
				t.Errorf("the PDF does not say the finding %q", r.LesionFinding)
			}
		})
	}
}

// realReport runs a one-B-scan DICOM through the stages as the workers
// do, into a report and the figures its PDF shows.
func realReport(t *testing.T, path string) (*Report, *Figures) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := octdicom.ReadDICOM(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	v.Pattern = imaging.Line // sent as line scans (the set's README)
	ctx := t.Context()
	w, _ := imaging.Normalize(v)
	den, err := imaging.Denoise(ctx, w, imaging.DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := imaging.SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	a, err := imaging.Analyze(ctx, den, l)
	if err != nil {
		t.Fatal(err)
	}
	lesions, err := imaging.MarkLesions(ctx, den, l)
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{SchemaVersion: SchemaVersion, ExamID: "E-REAL", Eye: "OD", Algorithms: map[string]string{"lesions": "reference"}}
	r.FromAnalysis(a, lesions, den.Cols)
	figs := &Figures{BScan: den.Frame(0), Rows: den.Rows, Cols: den.Cols, Boundaries: map[string][]float32{},
		Frames: 1, Spacing: den.Spacing}
	for name, rows := range l.Boundaries {
		figs.Boundaries[name] = rows[:den.Cols]
	}
	return r, figs
}
