package report

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"octflow/imaging"
)

func phantomFigures(t *testing.T) (*Figures, *imaging.Measurements) {
	t.Helper()
	ctx := context.Background()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 5, Frames: 9, Rows: 248, Cols: 256})
	den, err := imaging.Denoise(ctx, p.Volume, imaging.DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := imaging.SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	m, err := imaging.Measure(ctx, den, layers)
	if err != nil {
		t.Fatal(err)
	}
	f := m.FoveaFrame
	figs := &Figures{BScan: den.Frame(f), Rows: den.Rows, Cols: den.Cols, Boundaries: map[string][]float32{},
		Thickness: m.ThicknessMapUm, Frames: den.Frames, Spacing: den.Spacing, FoveaFrame: f, FoveaCol: m.FoveaCol}
	for name, rows := range layers.Boundaries {
		figs.Boundaries[name] = rows[f*den.Cols : (f+1)*den.Cols]
	}
	return figs, m
}

func TestPDFRendersWithFigures(t *testing.T) {
	figs, m := phantomFigures(t)
	h := Headline(m)
	ok := imaging.Quality{Gradable: imaging.Gradable, SignalStrength: 9, Grade: "good", GradableFraction: 1}
	line := &imaging.LineMeasurements{NoFovea: "no foveal pit", MeanThicknessUm: 300, ProfileUm: []float32{290, 0, 300, 310}, LengthMm: 6}
	rnfl := &imaging.RNFLMeasurements{GlobalUm: 100, Sectors: map[string]float64{"T": 70, "N": 60}, Convention: imaging.RNFLConvention,
		ProfileUm: []float32{70, 120, 0, 60, 130, 70}}
	for _, c := range []struct {
		name string
		r    Report
	}{
		{"cube", Report{ScanPattern: imaging.Cube, Quality: ok, Measurable: true, Figures: &h}},
		{"partial cube", Report{ScanPattern: imaging.Cube, Measurable: true, Figures: &h,
			Quality: imaging.Quality{Gradable: imaging.PartlyGradable, Reasons: []string{"half blank"}, GradableFraction: 0.5}}},
		{"line", Report{ScanPattern: imaging.Line, Quality: ok, Measurable: true, Figures: line}},
		{"circle", Report{ScanPattern: imaging.Circle, Quality: ok, Measurable: true, Figures: rnfl}},
		{"ungradable", Report{ScanPattern: imaging.Cube, Quality: imaging.Quality{Gradable: imaging.Ungradable},
			NotMeasurable: []string{"the scan could not be graded"}}},
	} {
		r := c.r
		r.SchemaVersion, r.ExamID, r.Eye, r.Priority, r.Algorithms = SchemaVersion, "E-PDF", "OS", "urgent", map[string]string{"denoise": "v0"}
		r.SubmittedAt, r.GeneratedAt = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 9, 1, 0, 0, time.UTC)
		pdf, err := PDF(&r, figs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.HasPrefix(pdf, []byte("%PDF-")) || bytes.Count(pdf, []byte("/Type /Page\n")) != 2 {
			t.Errorf("%s: want a two-page PDF, got %d bytes", c.name, len(pdf))
		}
	}
	// A superseding run's report says what it replaces, under its title,
	// still on two pages with a reason of the longest length taken; the
	// JSON names the replaced run.
	r := Report{SchemaVersion: SchemaVersion, ExamID: "E-PDF", ScanPattern: imaging.Cube, Quality: ok, Measurable: true, Figures: &h,
		GeneratedAt: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Run: "run-2",
		Supersedes: &Supersedes{Run: "run-1", GeneratedAt: time.Date(2026, 11, 29, 9, 1, 0, 0, time.UTC),
			Reason: "wrong eye " + strings.Repeat("é", 95)}}
	pdf, err := PDF(&r, figs)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(pdf, []byte("/Type /Page\n")); n != 2 {
		t.Errorf("a superseding report has %d pages, want 2", n)
	}
	if text := pdfText(t, pdf); !strings.Contains(text, "Replaces the report of 2026-11-29T09:01:00Z: wrong eye éé") {
		t.Errorf("the PDF does not say what it replaces:\n%s", text)
	}
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"supersedes":{"run":"run-1","generatedAt":"2026-11-29T09:01:00Z","reason":"wrong eye`)) {
		t.Errorf("the JSON does not name the replaced report: %s", b)
	}
	if h.ThicknessMapUm != nil || len(h.Layers) != len(imaging.RetinalLayers) {
		t.Fatalf("headline: thickness map kept %v, %d layers", h.ThicknessMapUm != nil, len(h.Layers))
	}
	for i, l := range h.Layers {
		if l.MapUm != nil || m.Layers[i].MapUm == nil {
			t.Errorf("layer %s: the report carries its map, or the measurements lost it", l.Name)
		}
	}
}

// TestWithheldFiguresAreSaidInJSONAndPDF: an analysis that withholds
// figures and its lesions gives a report that lists them with their
// reasons, in the JSON and in the PDF, carries no lesion, and says
// the lesions were not reported rather than that there are none; the
// figures it vouches for stay.
func TestWithheldFiguresAreSaidInJSONAndPDF(t *testing.T) {
	figs, m := phantomFigures(t)
	delete(m.ETDRS, "OT")
	const why = "the BM boundary is reliable in only 40% of the graded A-scans of subfield OT (75% needed)"
	const lesionsWhy = "the EZ boundary is reliable in only 50% of the graded A-scans of the scan (75% needed)"
	a := &imaging.Analysis{Pattern: imaging.Cube, Figures: m,
		Quality:    imaging.Quality{Gradable: imaging.PartlyGradable, Grade: "good", SignalStrength: 8, GradableFraction: 0.95},
		Withheld:   []imaging.Withheld{{Figure: imaging.FigureETDRS + "OT", Reason: why}, {Figure: imaging.FigureLesions, Reason: lesionsWhy}},
		Boundaries: []imaging.BoundaryReliability{{Boundary: imaging.BM, ReliableFraction: 0.9}}}
	lesions := []imaging.Lesion{{Type: imaging.Drusen, Frame: 1, Col: 10}}
	var r Report
	r.FromAnalysis(a, lesions, figs.Cols)
	if len(r.Lesions) != 0 || r.LesionsWithheld != lesionsWhy {
		t.Errorf("lesions %v, withheld %q: want none, and the reason", r.Lesions, r.LesionsWithheld)
	}
	if cube, _ := r.Figures.(*imaging.Measurements); len(r.Withheld) != 2 || len(r.Boundaries) != 1 || cube == nil || cube.CentralSubfieldThicknessUm == 0 {
		t.Errorf("withheld %+v, boundaries %+v, measurements %v: want the withheld figures listed and the others kept", r.Withheld, r.Boundaries, r.Figures)
	}
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"withheld":[{"figure":"etdrs:OT"`, `"lesionsWithheld":"the EZ boundary`, `"centralSubfieldThicknessUm"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	r.SchemaVersion, r.ExamID, r.Eye, r.Algorithms = SchemaVersion, "E-W", "OD", map[string]string{"denoise": "v0"}
	pdf, err := PDF(&r, figs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Not reported: boundaries not reliable", "ETDRS subfield OT", "Not reported: the EZ boundary"} {
		if !bytes.Contains(pdf, []byte(want)) {
			t.Errorf("PDF lacks %q", want)
		}
	}
	if bytes.Contains(pdf, []byte("No fluid or drusen detected")) {
		t.Error("the PDF says no lesion was detected although lesions were withheld")
	}
}

// TestReportJSONKeepsEachScanTypesKey: a report's figures are written
// under measurements, line or rnfl, where those fields stood (just
// before the lesions), byte for byte as before they were one value, and
// read back to the same figures; a report with two scan types' figures
// does not read.
func TestReportJSONKeepsEachScanTypesKey(t *testing.T) {
	fovea := 250
	for _, c := range []struct {
		key     string
		pattern imaging.Pattern
		figures imaging.Figures
	}{
		{"measurements", imaging.Cube, &imaging.Measurements{CentralSubfieldThicknessUm: 271.4, ETDRS: map[string]float64{"C": 271.4}, TotalVolumeMm3: 8.6,
			MeanThicknessUm: 300, FoveaFrame: 24, FoveaCol: 256, Frames: 49, Cols: 512, GradableCoverage: 0.97}},
		{"line", imaging.Line, &imaging.LineMeasurements{CentralThicknessUm: 262, FoveaCol: &fovea, MeanThicknessUm: 300, LengthMm: 6,
			ProfileUm: []float32{290, 0, 300}, GradableFraction: 0.9}},
		{"rnfl", imaging.Circle, &imaging.RNFLMeasurements{GlobalUm: 97.5, Sectors: map[string]float64{"T": 70}, Convention: imaging.RNFLConvention,
			ProfileUm: []float32{70, 130}, GradableFraction: 0.95}},
	} {
		for _, not := range [][]string{nil, {"RNFL thickness not reported: r"}} {
			r := Report{SchemaVersion: SchemaVersion, ExamID: "E-1", ScanPattern: c.pattern, Measurable: true, NotMeasurable: not,
				Quality: imaging.Quality{Gradable: imaging.Gradable}, Lesions: []imaging.Lesion{}, Algorithms: map[string]string{"measure": "v1"},
				Withheld: []imaging.Withheld{{Figure: imaging.FigureLesions, Reason: "r"}}}
			without, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			figures, err := json.Marshal(c.figures)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(string(without), `,"lesions":`, `,"`+c.key+`":`+string(figures)+`,"lesions":`, 1)
			r.Figures = c.figures
			got, err := json.Marshal(&r)
			if err != nil {
				t.Fatalf("%s: %v", c.key, err)
			}
			if string(got) != want {
				t.Errorf("%s: written\n%s\nwant\n%s", c.key, got, want)
			}
			var back Report
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("%s: read: %v", c.key, err)
			}
			if !reflect.DeepEqual(back.Figures, c.figures) || back.ExamID != r.ExamID || !reflect.DeepEqual(back.Withheld, r.Withheld) {
				t.Errorf("%s: read back figures %+v, exam %q", c.key, back.Figures, back.ExamID)
			}
		}
	}
	var r Report
	if err := json.Unmarshal([]byte(`{"examId":"E-2","measurements":{"centralSubfieldThicknessUm":1},"rnfl":{"globalUm":2}}`), &r); err == nil {
		t.Errorf("a report with a cube's and a circle's figures read as %+v", r.Figures)
	}
	if err := json.Unmarshal([]byte(`{"examId":"E-3","cube":{"centralSubfieldThicknessUm":1}}`), &r); err != nil || r.Figures != nil {
		t.Errorf("an analysis's key in a report: %v, figures %+v; want it ignored, as any unknown key", err, r.Figures)
	}
}

// Title is the title the PDF prints for each scan pattern, one that is
// not a pattern's the generic one.
func TestTitleIsThePDFsTitle(t *testing.T) {
	for _, c := range []struct {
		pattern imaging.Pattern
		want    string
	}{
		{imaging.Cube, "Macular OCT report"},
		{imaging.Line, "OCT line scan report"},
		{imaging.Circle, "Peripapillary RNFL report"},
		{imaging.Radial, "OCT report"},
		{imaging.Pattern("spiral"), "OCT report"},
	} {
		if got := Title(&Report{ScanPattern: c.pattern}); got != c.want {
			t.Errorf("Title of a %s scan's report = %q, want %q", c.pattern, got, c.want)
		}
	}
}

// The stages a report names algorithms of are read in the pipeline's
// order it recorded, each once; a stage it did not order (every one, in
// a report of before the order was recorded) follows by name, and an
// ordered stage of no algorithm is not read.
func TestAlgorithmStagesFollowThePipelinesOrder(t *testing.T) {
	algorithms := map[string]string{"denoise": "a/v1", "layers": "b/v1", "lesions": "c/v1", "measure": "d/v1"}
	for _, c := range []struct {
		name  string
		order []string
		want  []string
	}{
		{"the pipeline's order", []string{"measure", "layers", "denoise", "lesions"}, []string{"measure", "layers", "denoise", "lesions"}},
		{"no order recorded", nil, []string{"denoise", "layers", "lesions", "measure"}},
		{"a stage not ordered", []string{"measure", "denoise"}, []string{"measure", "denoise", "layers", "lesions"}},
		{"a stage of no algorithm, and one twice", []string{"report", "measure", "measure", "lesions", "layers", "denoise"},
			[]string{"measure", "lesions", "layers", "denoise"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{Algorithms: algorithms, AlgorithmOrder: c.order}
			if got := r.AlgorithmStages(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("AlgorithmStages() = %q, want %q", got, c.want)
			}
		})
	}
}
