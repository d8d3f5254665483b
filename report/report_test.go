package report

import (
	"bytes"
	"context"
	"encoding/json"
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
		{"cube", Report{ScanPattern: imaging.Cube, Quality: ok, Measurable: true, Measurements: &h}},
		{"partial cube", Report{ScanPattern: imaging.Cube, Measurable: true, Measurements: &h,
			Quality: imaging.Quality{Gradable: imaging.PartlyGradable, Reasons: []string{"half blank"}, GradableFraction: 0.5}}},
		{"line", Report{ScanPattern: imaging.Line, Quality: ok, Measurable: true, Line: line}},
		{"circle", Report{ScanPattern: imaging.Circle, Quality: ok, Measurable: true, RNFL: rnfl}},
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
	a := &imaging.Analysis{Pattern: imaging.Cube, Cube: m,
		Quality:    imaging.Quality{Gradable: imaging.PartlyGradable, Grade: "good", SignalStrength: 8, GradableFraction: 0.95},
		Withheld:   []imaging.Withheld{{Figure: imaging.FigureETDRS + "OT", Reason: why}, {Figure: imaging.FigureLesions, Reason: lesionsWhy}},
		Boundaries: []imaging.BoundaryReliability{{Boundary: imaging.BM, ReliableFraction: 0.9}}}
	lesions := []imaging.Lesion{{Type: imaging.Drusen, Frame: 1, Col: 10}}
	var r Report
	r.FromAnalysis(a, lesions, figs.Cols)
	if len(r.Lesions) != 0 || r.LesionsWithheld != lesionsWhy {
		t.Errorf("lesions %v, withheld %q: want none, and the reason", r.Lesions, r.LesionsWithheld)
	}
	if len(r.Withheld) != 2 || len(r.Boundaries) != 1 || r.Measurements == nil || r.Measurements.CentralSubfieldThicknessUm == 0 {
		t.Errorf("withheld %+v, boundaries %+v, measurements %v: want the withheld figures listed and the others kept", r.Withheld, r.Boundaries, r.Measurements)
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
