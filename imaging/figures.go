package imaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"octflow/exam"
)

// Figures are the measurements one scan pattern allows: a cube's
// (*Measurements), a line's (*LineMeasurements) or a circle's
// (*RNFLMeasurements). An analysis or a report holds at most one value
// of it; nil when nothing was measured. A value is never a nil pointer.
//
// Adding a scan type is its figures' type, implementing Figures, and its
// entry in scanTypes (plus how Analyze measures it and the report's PDF
// section for it): the JSON of an analysis and of a report, and the
// exam's headline summary, follow from those.
type Figures interface {
	// Pattern is the scan pattern the figures are measured on.
	Pattern() Pattern
	// Summarize sets the headline figures of s (what status and events
	// show) that the figures hold; those they do not hold stay absent.
	Summarize(s *exam.Summary)
}

// ScanType is a scan pattern octflow measures: its figures' type and the
// key they go under in an analysis's JSON (measurements.json) and in a
// report's (report.json).
type ScanType struct {
	Pattern     Pattern
	AnalysisKey string
	ReportKey   string
	// OneBScan is true when a scan of the pattern is one B-scan (a line
	// or a circle); several are then an error (ResolvePattern).
	OneBScan bool
	// New returns empty figures of the type, to decode into.
	New func() Figures
}

// scanTypes is every scan pattern octflow measures, one entry each: the
// one table the JSON of analyses and reports is read and written by.
var scanTypes = []ScanType{
	{Pattern: Cube, AnalysisKey: "cube", ReportKey: "measurements", New: func() Figures { return new(Measurements) }},
	{Pattern: Line, AnalysisKey: "line", ReportKey: "line", OneBScan: true, New: func() Figures { return new(LineMeasurements) }},
	{Pattern: Circle, AnalysisKey: "rnfl", ReportKey: "rnfl", OneBScan: true, New: func() Figures { return new(RNFLMeasurements) }},
}

// ScanTypes returns every scan type octflow measures, in the table's
// order.
func ScanTypes() []ScanType { return slices.Clone(scanTypes) }

// ScanTypeOf returns the scan type of pattern p; false when octflow does
// not measure p.
func ScanTypeOf(p Pattern) (ScanType, bool) {
	for _, t := range scanTypes {
		if t.Pattern == p {
			return t, true
		}
	}
	return ScanType{}, false
}

// AnalysisKey is the key of a scan type's figures in an analysis's JSON;
// ReportKey in a report's. Either is the key argument of InsertFigures
// and ExtractFigures.
func AnalysisKey(t ScanType) string { return t.AnalysisKey }

// ReportKey is the key of a scan type's figures in a report's JSON.
func ReportKey(t ScanType) string { return t.ReportKey }

// InsertFigures adds f to obj, a JSON object encoded without it, under
// its scan type's key (key picks AnalysisKey or ReportKey): right after
// the last member of obj named in after, or at the end when obj has none
// of them. obj is otherwise unchanged, and returned as it is when f is
// nil. Figures of a pattern without a scan type are an error.
func InsertFigures(obj []byte, f Figures, key func(ScanType) string, after ...string) ([]byte, error) {
	if f == nil {
		return obj, nil
	}
	t, ok := ScanTypeOf(f.Pattern())
	if !ok {
		return nil, fmt.Errorf("figures of a %q scan: octflow has no scan type for that pattern", f.Pattern())
	}
	val, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode the %s scan's figures: %w", t.Pattern, err)
	}
	name, err := json.Marshal(key(t))
	if err != nil {
		return nil, fmt.Errorf("encode the %s scan's key: %w", t.Pattern, err)
	}
	at, empty, err := memberEnd(obj, after)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(name)+len(val)+2)
	out = append(out, obj[:at]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, name...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, obj[at:]...), nil
}

// memberEnd is the offset in obj, a JSON object, just after the value of
// its last member named in names, or after its last member when none is
// named; empty reports an object without members (the offset is then
// just after its brace).
func memberEnd(obj []byte, names []string) (at int, empty bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, false, fmt.Errorf("insert figures: not a JSON object (%v)", err)
	}
	at, empty = int(dec.InputOffset()), true
	named := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, false, fmt.Errorf("insert figures: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, false, fmt.Errorf("insert figures: %w", err)
		}
		if name, _ := tok.(string); !named || slices.Contains(names, name) {
			at, empty = int(dec.InputOffset()), false
			named = slices.Contains(names, name)
		}
	}
	return at, empty, nil
}

// ExtractFigures reads the figures out of obj, a JSON object: those under
// the key (picked by key) of the one scan type present. None present, or
// null, is nil; several present is an error. Other members are left to
// the caller, and a key no scan type has is not figures.
func ExtractFigures(obj []byte, key func(ScanType) string) (Figures, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj, &members); err != nil {
		return nil, fmt.Errorf("read figures: %w", err)
	}
	var f Figures
	var found string
	for _, t := range scanTypes {
		raw, ok := members[key(t)]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if f != nil {
			return nil, fmt.Errorf("read figures: both %q and %q are present; a scan has one pattern", found, key(t))
		}
		f, found = t.New(), key(t)
		if err := json.Unmarshal(raw, f); err != nil {
			return nil, fmt.Errorf("read the %s scan's figures (%q): %w", t.Pattern, found, err)
		}
	}
	return f, nil
}

// Pattern is Cube.
func (m *Measurements) Pattern() Pattern { return Cube }

// Summarize sets a cube's central subfield thickness, mean thickness and,
// when every subfield was measured, its volume.
func (m *Measurements) Summarize(s *exam.Summary) {
	s.CentralSubfieldThicknessUm, s.MeanThicknessUm = ptr(m.CentralSubfieldThicknessUm), ptr(m.MeanThicknessUm)
	if m.TotalVolumeMm3 > 0 {
		s.TotalVolumeMm3 = ptr(m.TotalVolumeMm3)
	}
}

// Pattern is Line.
func (m *LineMeasurements) Pattern() Pattern { return Line }

// Summarize sets a line's mean thickness and, when it crosses the fovea
// and its central thickness is reported, that.
func (m *LineMeasurements) Summarize(s *exam.Summary) {
	s.MeanThicknessUm = ptr(m.MeanThicknessUm)
	if m.FoveaCol != nil {
		s.CentralThicknessUm = ptr(m.CentralThicknessUm)
	}
}

// Pattern is Circle.
func (m *RNFLMeasurements) Pattern() Pattern { return Circle }

// Summarize sets a circle's global RNFL thickness.
func (m *RNFLMeasurements) Summarize(s *exam.Summary) { s.RNFLGlobalUm = ptr(m.GlobalUm) }

func ptr(x float64) *float64 { return &x }

// asFigures is what a measurement returns, as figures: nil (not a nil
// pointer in an interface) when it returned none.
func asFigures[M any, T interface {
	*M
	Figures
}](m T, err error) (Figures, error) {
	if m == nil {
		return nil, err
	}
	return m, err
}

// cube, line and rnfl are a's figures as a cube's, a line's or a
// circle's; nil when a holds none of that kind.
func (a *Analysis) cube() *Measurements     { m, _ := a.Figures.(*Measurements); return m }
func (a *Analysis) line() *LineMeasurements { m, _ := a.Figures.(*LineMeasurements); return m }
func (a *Analysis) rnfl() *RNFLMeasurements { m, _ := a.Figures.(*RNFLMeasurements); return m }

// MarshalJSON writes the analysis with its figures under their scan
// type's key (cube, line or rnfl), right after its quality.
func (a Analysis) MarshalJSON() ([]byte, error) {
	type plain Analysis // without these methods
	obj, err := json.Marshal(plain(a))
	if err != nil {
		return nil, err
	}
	return InsertFigures(obj, a.Figures, AnalysisKey, "quality")
}

// UnmarshalJSON reads an analysis and the figures under its scan type's
// key.
func (a *Analysis) UnmarshalJSON(b []byte) error {
	type plain Analysis // without these methods
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	f, err := ExtractFigures(b, AnalysisKey)
	if err != nil {
		return fmt.Errorf("analysis: %w", err)
	}
	*a = Analysis(p)
	a.Figures = f
	return nil
}
