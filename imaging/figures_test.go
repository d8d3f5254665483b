package imaging

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"octflow/exam"
)

// sampleFigures are one scan type's figures with a value in every
// field the JSON carries.
func sampleFigures(p Pattern) Figures {
	fovea := 250
	switch p {
	case Cube:
		return &Measurements{CentralSubfieldThicknessUm: 271.4, ETDRS: map[string]float64{"C": 271.4, "IS": 338.1}, TotalVolumeMm3: 8.61,
			MeanThicknessUm: 301, MinThicknessUm: 180, MaxThicknessUm: 390, FoveaXMm: 0.1, FoveaYMm: -0.2, FoveaFrame: 24, FoveaCol: 256,
			ThicknessMapUm: []float32{300, 0, 310}, Frames: 49, Cols: 512, GradableCoverage: 0.97, Unmeasured: []string{"OT"},
			Layers: []LayerThickness{{Name: "RNFL", Top: ILM, Bottom: RNFLGCL, MeanUm: 30, ETDRS: map[string]float64{"C": 12}, MapUm: []float32{30}}}}
	case Line:
		return &LineMeasurements{CentralThicknessUm: 262.5, FoveaCol: &fovea, PitDepthUm: 80, MeanThicknessUm: 300, MinThicknessUm: 250,
			MaxThicknessUm: 340, LengthMm: 6, ProfileUm: []float32{290, 0, 300}, GradableFraction: 0.9}
	case Circle:
		return &RNFLMeasurements{GlobalUm: 97.5, Sectors: map[string]float64{"T": 70, "N": 75}, Convention: RNFLConvention, CircumferenceMm: 10.8,
			DiameterMm: 3.45, ProfileUm: []float32{70, 0, 130}, GradableFraction: 0.95, RetinaMeanUm: 280, BridgedFraction: 0.1}
	}
	return nil
}

// legacyAnalysis is the analysis's JSON as it was written while each
// scan type's figures were a field of their own: measurements.json
// written then must read the same, and be written the same now.
type legacyAnalysis struct {
	Pattern       Pattern               `json:"pattern"`
	Quality       Quality               `json:"quality"`
	Cube          *Measurements         `json:"cube,omitempty"`
	Line          *LineMeasurements     `json:"line,omitempty"`
	RNFL          *RNFLMeasurements     `json:"rnfl,omitempty"`
	NotMeasurable []string              `json:"notMeasurable,omitempty"`
	Boundaries    []BoundaryReliability `json:"boundaries,omitempty"`
	Withheld      []Withheld            `json:"withheld,omitempty"`
}

// TestAnalysisJSONIsTheLayoutOfOneFieldPerScanType: an analysis of every
// pattern, measured or not, is written byte for byte as when each scan
// type had its own field, and reads back to the same figures.
func TestAnalysisJSONIsTheLayoutOfOneFieldPerScanType(t *testing.T) {
	q := Quality{Gradable: PartlyGradable, SignalStrength: 7.5, Grade: "good", GradableFraction: 0.9, Reasons: []string{"a blink"}}
	withheld := []Withheld{{Figure: FigureLesions, Reason: "r"}}
	bounds := []BoundaryReliability{{Boundary: BM, ReliableFraction: 0.8, SupportedFraction: 0.9}}
	for _, c := range []struct {
		name    string
		pattern Pattern
		figures bool
		not     []string
	}{
		{"cube", Cube, true, nil},
		{"line", Line, true, nil},
		{"circle", Circle, true, nil},
		{"cube, nothing measured", Cube, false, []string{"the scan could not be graded"}},
		{"radial, never measured", Radial, false, []string{"octflow does not measure radial scans"}},
	} {
		a := &Analysis{Pattern: c.pattern, Quality: q, NotMeasurable: c.not, Boundaries: bounds, Withheld: withheld}
		old := legacyAnalysis{Pattern: c.pattern, Quality: q, NotMeasurable: c.not, Boundaries: bounds, Withheld: withheld}
		if c.figures {
			a.Figures = sampleFigures(c.pattern)
			switch f := a.Figures.(type) {
			case *Measurements:
				old.Cube = f
			case *LineMeasurements:
				old.Line = f
			case *RNFLMeasurements:
				old.RNFL = f
			}
		}
		got, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: written\n%s\nwant, as before,\n%s", c.name, got, want)
		}
		var back Analysis
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatalf("%s: read: %v", c.name, err)
		}
		if !reflect.DeepEqual(back.Figures, a.Figures) || back.Pattern != a.Pattern || back.Measurable() != c.figures ||
			!reflect.DeepEqual(back.Withheld, a.Withheld) || !reflect.DeepEqual(back.NotMeasurable, a.NotMeasurable) {
			t.Errorf("%s: read back %+v (figures %+v), want %+v", c.name, back, back.Figures, a.Figures)
		}
	}
}

// alienFigures are figures of a pattern no scan type has.
type alienFigures struct{ X float64 }

func (alienFigures) Pattern() Pattern        { return Radial }
func (alienFigures) Summarize(*exam.Summary) {}

// TestFiguresJSONOutsideTheTable: a key no scan type has is not figures
// and is ignored, as encoding/json ignores unknown keys; null is none;
// two scan types' figures at once, figures of a pattern without a scan
// type and figures that do not decode are errors.
func TestFiguresJSONOutsideTheTable(t *testing.T) {
	for _, c := range []struct {
		name, json string
		want       Figures
		err        string
	}{
		{"unknown key", `{"pattern":"radial","radial":{"globalUm":1},"notMeasurable":["x"]}`, nil, ""},
		{"null", `{"pattern":"cube","cube":null}`, nil, ""},
		{"one", `{"pattern":"circle","rnfl":{"globalUm":90,"sectors":{},"convention":"c","circumferenceMm":0,"diameterMm":0,"profileUm":null,"gradableFraction":0,"retinaMeanUm":0}}`,
			&RNFLMeasurements{GlobalUm: 90, Sectors: map[string]float64{}, Convention: "c"}, ""},
		{"two", `{"pattern":"cube","cube":{"centralSubfieldThicknessUm":1},"line":{"meanThicknessUm":2}}`, nil, `both "cube" and "line"`},
		{"not figures", `{"pattern":"line","line":[1,2]}`, nil, `"line"`},
	} {
		var a Analysis
		err := json.Unmarshal([]byte(c.json), &a)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.err)
		case c.err == "" && !reflect.DeepEqual(a.Figures, c.want):
			t.Errorf("%s: figures %#v, want %#v", c.name, a.Figures, c.want)
		}
	}
	if b, err := json.Marshal(&Analysis{Pattern: Radial, Figures: alienFigures{1}}); err == nil {
		t.Errorf("figures of a pattern without a scan type written: %s", b)
	}
}

// TestEveryScanTypeIsOneEntry: each entry's figures are of its pattern,
// no key serves two scan types, and each scan type's figures set the
// headline figures of its pattern in the exam's summary and no other.
func TestEveryScanTypeIsOneEntry(t *testing.T) {
	headline := map[Pattern][]string{
		Cube:   {"CentralSubfieldThicknessUm", "MeanThicknessUm", "TotalVolumeMm3"},
		Line:   {"MeanThicknessUm", "CentralThicknessUm"},
		Circle: {"RNFLGlobalUm"},
	}
	analysisKeys, reportKeys := map[string]bool{}, map[string]bool{}
	for _, st := range ScanTypes() {
		if p := st.New().Pattern(); p != st.Pattern {
			t.Errorf("%s: its figures say %s", st.Pattern, p)
		}
		if got, ok := ScanTypeOf(st.Pattern); !ok || got.AnalysisKey != st.AnalysisKey {
			t.Errorf("%s: not found by its pattern", st.Pattern)
		}
		if analysisKeys[st.AnalysisKey] || reportKeys[st.ReportKey] || st.AnalysisKey == "" || st.ReportKey == "" {
			t.Errorf("%s: key %q or %q empty or taken", st.Pattern, st.AnalysisKey, st.ReportKey)
		}
		analysisKeys[st.AnalysisKey], reportKeys[st.ReportKey] = true, true

		var s exam.Summary
		sampleFigures(st.Pattern).Summarize(&s)
		v := reflect.ValueOf(s)
		var set []string
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
				set = append(set, v.Type().Field(i).Name)
			}
		}
		if want := headline[st.Pattern]; !reflect.DeepEqual(set, want) {
			t.Errorf("%s: summary sets %v, want %v", st.Pattern, set, want)
		}
	}
	if _, ok := ScanTypeOf(Radial); ok {
		t.Error("radial scans have a scan type; octflow does not measure them")
	}
	// What a scan type's figures no longer hold stays out of the summary.
	var s exam.Summary
	(&LineMeasurements{MeanThicknessUm: 300, CentralThicknessUm: 260}).Summarize(&s)
	if s.CentralThicknessUm != nil || s.MeanThicknessUm == nil || *s.MeanThicknessUm != 300 {
		t.Errorf("a line without its fovea: central %v, mean %v", s.CentralThicknessUm, s.MeanThicknessUm)
	}
	s = exam.Summary{}
	(&Measurements{CentralSubfieldThicknessUm: 270, MeanThicknessUm: 300}).Summarize(&s)
	if s.TotalVolumeMm3 != nil || s.CentralSubfieldThicknessUm == nil || *s.CentralSubfieldThicknessUm != 270 {
		t.Errorf("a cube without its volume: volume %v, CST %v", s.TotalVolumeMm3, s.CentralSubfieldThicknessUm)
	}
}

// TestSubmittedScanTypesAreTheTables: a submission may name a scan
// type's pattern (in any case), radial or nothing; anything else is
// refused with the patterns it may name.
func TestSubmittedScanTypesAreTheTables(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Pattern
		err  bool
	}{
		{"", "", false}, {" Cube ", Cube, false}, {"line", Line, false}, {"CIRCLE", Circle, false}, {"radial", Radial, false},
		{"rnfl", "", true}, {"fundus", "", true},
	} {
		got, err := ParsePattern(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%q: %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "want cube, line or circle") {
			t.Errorf("%q: %v; want the scan types named", c.in, err)
		}
	}
}
