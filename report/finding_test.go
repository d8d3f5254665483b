package report

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"octflow/imaging"
	"octflow/report/reporttest"
)

// TestTheLesionFindingIsSaidAlikeEverywhere: whatever the lesion search
// found, the report's JSON and its PDF say the same thing in the same
// words, and "No fluid or drusen detected." is written only when the
// whole scan was graded, searched and nothing was found. A lesion on an
// A-scan the gate could not grade is not reported, and keeps the report
// from saying there is none (the DME scan whose cyst was outlined beside
// that sentence); a scan graded in part says on what share it found
// nothing.
func TestTheLesionFindingIsSaidAlikeEverywhere(t *testing.T) {
	figs, m := phantomFigures(t)
	cols := figs.Cols
	mask := func(graded func(col int) bool) []bool {
		out := make([]bool, figs.Frames*cols)
		for i := range out {
			out[i] = graded(i % cols)
		}
		return out
	}
	all := mask(func(int) bool { return true })
	leftHalf := mask(func(c int) bool { return c < cols/2 })
	cyst := imaging.Lesion{Type: imaging.IntraretinalFluid, Frame: figs.FoveaFrame, Col: cols - 10,
		Boxes: []imaging.Box{{Frame: figs.FoveaFrame, Row0: 100, Row1: 120, Col0: cols - 20, Col1: cols - 1}}}
	drusen := imaging.Lesion{Type: imaging.Drusen, Frame: figs.FoveaFrame, Col: 10,
		Boxes: []imaging.Box{{Frame: figs.FoveaFrame, Row0: 180, Row1: 190, Col0: 0, Col1: 20}}}
	elsewhere := imaging.Lesion{Type: imaging.Drusen, Frame: figs.FoveaFrame + 1, Col: 40,
		Boxes: []imaging.Box{{Frame: figs.FoveaFrame + 1, Row0: 180, Row1: 190, Col0: 30, Col1: 50}}}
	for _, c := range []struct {
		name     string
		fraction float64
		mask     []bool
		lesions  []imaging.Lesion
		withheld string
		reported int
		says     string // a phrase the finding must carry
		noneSaid bool   // whether it may say "No fluid or drusen detected."
	}{
		{"graded in full, nothing found", 1, all, nil, "", 0, "No fluid or drusen detected.", true},
		{"graded in part, nothing found", 0.5, leftHalf, nil, "", 0, "None found on the graded 50% of the A-scans", false},
		{"a cyst where the scan is not graded", 0.5, leftHalf, []imaging.Lesion{cyst}, "", 0, "1 more region found where the scan could not be graded is not reported", false},
		{"drusen graded, a cyst not", 0.5, leftHalf, []imaging.Lesion{drusen, cyst}, "", 1, "Found: 1 drusen", false},
		{"both graded", 1, all, []imaging.Lesion{drusen, cyst}, "", 2, "Found: 1 drusen, 1 intraretinal fluid", false},
		{"drusen on another B-scan only", 1, all, []imaging.Lesion{elsewhere}, "", 1, "Found: 1 drusen", false},
		{"withheld", 1, all, []imaging.Lesion{drusen}, "the BM boundary is reliable in only 21% of the graded A-scans", 0, "Not reported: the BM boundary", false},
		{"drusen withheld, the cyst reported", 1, all, []imaging.Lesion{drusen, cyst}, "", 1, "Found: 1 intraretinal fluid", false},
		{"drusen withheld, nothing else found", 1, all, []imaging.Lesion{drusen}, "", 0, "No fluid found. Drusen not reported: the drusen found changes", false},
		{"drusen withheld, fluid withheld too", 1, all, []imaging.Lesion{drusen, cyst}, "", 0, "Not reported: the fluid found changes", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &imaging.Analysis{Pattern: imaging.Cube, Figures: m,
				Quality: imaging.Quality{Gradable: imaging.PartlyGradable, Grade: "good", SignalStrength: 8, GradableFraction: c.fraction, Mask: c.mask}}
			if c.withheld != "" {
				a.Withheld = []imaging.Withheld{{Figure: imaging.FigureLesions, Reason: c.withheld}}
			}
			if strings.HasPrefix(c.name, "drusen withheld") {
				a.Withheld = []imaging.Withheld{{Figure: imaging.FigureDrusen, Reason: "the drusen found changes when the scan is denoised more strongly"}}
			}
			if strings.HasSuffix(c.name, "fluid withheld too") {
				a.Withheld = append([]imaging.Withheld{{Figure: imaging.FigureFluid, Reason: "the fluid found changes when the scan is denoised more strongly"}}, a.Withheld...)
			}
			var r Report
			r.FromAnalysis(a, c.lesions, cols)
			r.SchemaVersion, r.ExamID, r.Eye, r.Algorithms = SchemaVersion, "E-F", "OD", map[string]string{"lesions": "v0"}
			if len(r.Lesions) != c.reported {
				t.Errorf("%d lesions reported, want %d", len(r.Lesions), c.reported)
			}
			// The B-scan panel outlines the lesions reported, no other.
			var boxes int
			for _, l := range r.Lesions {
				for _, b := range l.Boxes {
					if b.Frame == figs.FoveaFrame {
						boxes++
					}
				}
			}
			if got := len(r.Outlines(figs.FoveaFrame)); got != boxes {
				t.Errorf("the B-scan panel outlines %d boxes, the lesions reported have %d on it", got, boxes)
			}
			if !strings.Contains(r.LesionFinding, c.says) {
				t.Errorf("finding %q, want it to say %q", r.LesionFinding, c.says)
			}
			if said := strings.Contains(r.LesionFinding, "No fluid or drusen detected"); said != c.noneSaid {
				t.Errorf("finding %q: says no lesion was detected %v, want %v", r.LesionFinding, said, c.noneSaid)
			}
			b, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Lesions         []imaging.Lesion `json:"lesions"`
				LesionsWithheld string           `json:"lesionsWithheld"`
				LesionFinding   string           `json:"lesionFinding"`
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.LesionFinding != r.LesionFinding || len(back.Lesions) != c.reported || (back.LesionsWithheld != "") != (c.withheld != "") {
				t.Errorf("JSON: finding %q, %d lesions, withheld %q", back.LesionFinding, len(back.Lesions), back.LesionsWithheld)
			}
			pdf, err := PDF(&r, figs)
			if err != nil {
				t.Fatal(err)
			}
			// What the PDF's B-scan panel draws: cyan where, and only
			// where, a reported lesion crosses the B-scan shown.
			var cyan int
			for _, img := range reporttest.PDFImages(t, pdf) {
				if b := img.Bounds(); b.Dx() != figs.Cols || b.Dy() != figs.Rows {
					continue
				}
				for y := range figs.Rows {
					for x := range figs.Cols {
						if r, g, b, _ := img.At(x, y).RGBA(); r == 0 && g == 0xffff && b == 0xffff {
							cyan++
						}
					}
				}
			}
			var crossing bool
			for _, l := range r.Lesions {
				for _, b := range l.Boxes {
					crossing = crossing || b.Frame == figs.FoveaFrame
				}
			}
			if (cyan > 0) != crossing {
				t.Errorf("the PDF's B-scan panel has %d cyan pixels; a reported lesion crosses it: %v", cyan, crossing)
			}
			text := pdfText(t, pdf)
			if !strings.Contains(text, r.LesionFinding) {
				t.Errorf("the PDF does not say the finding %q:\n%s", r.LesionFinding, text)
			}
			if strings.Contains(text, "No fluid or drusen detected") != c.noneSaid {
				t.Errorf("the PDF's saying no lesion was detected is %v, want %v", !c.noneSaid, c.noneSaid)
			}
			// The lesion table has a row per lesion reported, no other:
			// type, B-scan, x and y.
			for _, typ := range []string{imaging.IntraretinalFluid, imaging.Drusen} {
				want := 0
				for _, l := range r.Lesions {
					if l.Type == typ {
						want++
					}
				}
				if got := len(regexp.MustCompile(`\b`+typ+` \d+ -?\d+\.\d\d -?\d+\.\d\d`).FindAllString(text, -1)); got != want {
					t.Errorf("the PDF's lesion table has %d rows of %s, the report %d", got, typ, want)
				}
			}
		})
	}
}

// pdfText is a PDF's text with its lines joined: a sentence wrapped over
// two lines reads as one.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	return strings.Join(strings.Fields(reporttest.PDFText(t, pdf)), " ")
}
