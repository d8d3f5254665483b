package results

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
	"octflow/octdicom"
)

// The codes of the Macular Grid Thickness and Volume Report, each as
// PS3.16 (and DCMTK's code tables of PS3.16 2026b) spell it.
//
// The ETDRS figures are LOINC's "Macular grid.… by OCT" codes, which
// CID 4285 lists; the units are UCUM's.
func etdrsCode(subfield string) *octdicom.Elements {
	names := map[string][2]string{
		"C":  {"57109-1", "center subfield"},
		"IS": {"57110-9", "inner superior subfield"},
		"IN": {"57111-7", "inner nasal subfield"},
		"II": {"57112-5", "inner inferior subfield"},
		"IT": {"57113-3", "inner temporal subfield"},
		"OS": {"57114-1", "outer superior subfield"},
		"ON": {"57115-8", "outer nasal subfield"},
		"OI": {"57116-6", "outer inferior subfield"},
		"OT": {"57117-4", "outer temporal subfield"},
	}
	n := names[subfield]
	return octdicom.Code(n[0], "LN", "Macular grid."+n[1]+" thickness by OCT")
}

func centerPointCode() *octdicom.Elements {
	return octdicom.Code("57108-3", "LN", "Macular grid.center point thickness by OCT")
}
func totalVolumeCode() *octdicom.Elements {
	return octdicom.Code("57118-2", "LN", "Macular grid.total volume by OCT")
}
func averageThicknessCode() *octdicom.Elements {
	return octdicom.Code("131255", "DCM", "Average macular thickness")
}
func micrometre() *octdicom.Elements  { return octdicom.Code("um", "UCUM", "micrometer") }
func microlitre() *octdicom.Elements  { return octdicom.Code("uL", "UCUM", "microliter") }
func percent() *octdicom.Elements     { return octdicom.Code("%", "UCUM", "%") }
func noUnits() *octdicom.Elements     { return octdicom.Code("1", "UCUM", "no units") }
func commentCode() *octdicom.Elements { return octdicom.Code("121106", "DCM", "Comment") }

// Numeric Value Qualifiers (CID 42) of a figure that is not reported: the
// analysis withheld it (its boundaries are not reliable there), or it was
// not measured (too little of its subfield was graded, or octflow does
// not measure it).
func withheldQualifier() *octdicom.Elements {
	return octdicom.Code("114011", "DCM", "Value indeterminate")
}
func notMeasuredQualifier() *octdicom.Elements {
	return octdicom.Code("114007", "DCM", "Measurement not attempted")
}

// macularFigure is one concept of CID 4285 "Macular Thickness Key
// Measurements" and how the report gives it.
type macularFigure struct {
	concept *octdicom.Elements
	units   func() *octdicom.Elements
	// name is how a comment names the figure.
	name string
	// withheldAs is the Withheld.Figure naming it ("": never withheld).
	withheldAs string
	// value is the report's figure; false when the report gives none.
	value func(m *imaging.Measurements) (float64, bool)
	// unmeasured says why there is no value when the analysis did not
	// withhold it.
	unmeasured string
	// measured is false for a concept octflow does not measure at all:
	// no algorithm is behind it, and nothing is inferred from the scan.
	measured bool
}

// cid4285 is CID 4285 (non-extensible), in the standard's order: every
// concept of it is in the SR, with its value or without one.
//
// The average macular thickness (131255, DCM) is the report's mean
// thickness: the mean over every graded A-scan of the cube, which the
// PDF prints as its Mean. The definition of 131255 was not at hand when
// this was written; should it mean the 6 mm grid's mean only, the two
// differ by the cube's corners.
func cid4285() []macularFigure {
	positive := func(v float64) (float64, bool) { return v, v > 0 }
	out := []macularFigure{{
		concept: centerPointCode(), units: micrometre, name: "center point thickness",
		value:      func(*imaging.Measurements) (float64, bool) { return 0, false },
		unmeasured: "octflow measures the central subfield's mean, not the thickness at a single A-scan",
	}, {
		concept: etdrsCode("C"), units: micrometre, name: "central subfield thickness", withheldAs: imaging.FigureCST,
		value:      func(m *imaging.Measurements) (float64, bool) { return positive(m.CentralSubfieldThicknessUm) },
		unmeasured: "too little of it was graded", measured: true,
	}}
	for _, k := range imaging.ETDRSSubfields {
		if k == "C" {
			continue
		}
		out = append(out, macularFigure{
			concept: etdrsCode(k), units: micrometre, name: "subfield " + k, withheldAs: imaging.FigureETDRS + k,
			value: func(m *imaging.Measurements) (float64, bool) {
				v, ok := m.ETDRS[k]
				return v, ok && !slices.Contains(m.Unmeasured, k)
			},
			unmeasured: "too little of it was graded", measured: true,
		})
	}
	// 1 mm³ is 1 µL: the report's figure, in CID 4285's unit.
	return append(out, macularFigure{
		concept: totalVolumeCode(), units: microlitre, name: "total volume", withheldAs: imaging.FigureVolume,
		value:      func(m *imaging.Measurements) (float64, bool) { return positive(m.TotalVolumeMm3) },
		unmeasured: "a subfield was not measured", measured: true,
	}, macularFigure{
		concept: averageThicknessCode(), units: micrometre, name: "average thickness",
		value:      func(m *imaging.Measurements) (float64, bool) { return positive(m.MeanThicknessUm) },
		unmeasured: "no A-scan was graded", measured: true,
	})
}

// macularGridSR is the Macular Grid Thickness and Volume Report (PS3.3
// A.37, content TID 2100) of a measured macular cube: the SR Document
// Series, Enhanced General Equipment, SR Document General and SR
// Document Content modules besides the common ones. Its content: the
// language, octflow's installation as the device observer (TID 1004), and
// one measurement group for the eye (TID 2120: the finding site, the
// eye's laterality nested under it) with every concept of CID 4285, each
// with the algorithms behind it (TID 4019) and inferred from the scan
// (the IOD references images only so), or without a value, with a
// Numeric Value Qualifier and a comment saying why; then the quality
// concepts (111691–111694: B-scans and A-scans used, the share graded,
// the signal strength) and comments (the lesion finding, the quality
// gate's reasons). SR Document General references the order the scan
// was made for (Referenced Request Sequence).
func (b *builder) macularGridSR() (Object, error) {
	obj := Object{Kind: KindMacularGridSR, SOPClassUID: MacularGridSOPClass, SOPInstanceUID: b.uid("sr-instance"),
		SeriesInstanceUID: b.uid("sr-series"), StudyInstanceUID: b.id.StudyInstanceUID}
	e := &octdicom.Elements{}
	b.common(e, obj.SOPClassUID, obj.SOPInstanceUID, "SR", obj.SeriesInstanceUID, srSeriesNumber,
		"octflow macular grid thickness and volume")
	// SR Document Series.
	e.Seq(tag.ReferencedPerformedProcedureStepSequence)
	// Enhanced General Equipment: Type 1 throughout (common writes
	// them).
	// SR Document General.
	e.Str(tag.CompletionFlag, "COMPLETE")
	e.Str(tag.VerificationFlag, "UNVERIFIED")
	e.Str(tag.ContentDate, da(b.created))
	e.Str(tag.ContentTime, tm(b.created))
	var requests []*octdicom.Elements
	for _, r := range b.requests() {
		requests = append(requests, b.referencedRequest(r))
	}
	if len(requests) > 0 {
		e.Seq(tag.ReferencedRequestSequence, requests...)
	}
	e.Seq(tag.PerformedProcedureCodeSequence)
	evidence := &octdicom.Elements{}
	evidence.Str(tag.StudyInstanceUID, b.id.StudyInstanceUID)
	series := &octdicom.Elements{}
	series.Str(tag.SeriesInstanceUID, b.id.SeriesInstanceUID)
	series.Seq(tag.ReferencedSOPSequence, b.sourceRef())
	evidence.Seq(tag.ReferencedSeriesSequence, series)
	e.Seq(tag.CurrentRequestedProcedureEvidenceSequence, evidence)
	// The SR it replaces, if an earlier run sent one.
	b.predecessor(e, obj.SOPClassUID)
	// SR Document Content: the root container.
	e.Str(tag.ValueType, "CONTAINER")
	e.Seq(tag.ConceptNameCodeSequence, octdicom.Code("111690", "DCM", "Macular Grid Thickness and Volume Report"))
	e.Str(tag.ContinuityOfContent, "SEPARATE")
	e.Seq(tag.ContentTemplateSequence, template("2100"))
	content, err := b.macularContent()
	if err != nil {
		return Object{}, errResult("sr", err)
	}
	e.Seq(tag.ContentSequence, content...)
	if obj.Part10, err = octdicom.EncodePart10(e, obj.SOPClassUID, obj.SOPInstanceUID); err != nil {
		return Object{}, errResult("sr", err)
	}
	return obj, nil
}

// template is a Content Template Sequence item naming a DCMR template.
func template(id string) *octdicom.Elements {
	t := &octdicom.Elements{}
	t.Str(tag.MappingResource, "DCMR")
	t.Str(tag.TemplateIdentifier, id)
	return t
}

// macularContent is the root container's content.
func (b *builder) macularContent() ([]*octdicom.Elements, error) {
	m, ok := b.rep.Figures.(*imaging.Measurements)
	if !ok {
		return nil, fmt.Errorf("macular grid SR of a report without a cube's measurements (%s scan)", b.rep.ScanPattern)
	}
	group, err := b.measurementGroup(m)
	if err != nil {
		return nil, err
	}
	return append(b.languageAndObserver(), group), nil
}

// languageAndObserver are the content's language (TID 1204, English)
// and observer context (TID 1002 and 1004: the installation as the
// device observer), as the root container's first children.
func (b *builder) languageAndObserver() []*octdicom.Elements {
	return []*octdicom.Elements{
		// TID 1204.
		codeItem("HAS CONCEPT MOD", octdicom.Code("121049", "DCM", "Language of Content Item and Descendants"),
			octdicom.Code("en-US", "RFC5646", "English (United States)")),
		// TID 1002 and 1004: the installation as the device observer.
		codeItem("HAS OBS CONTEXT", octdicom.Code("121005", "DCM", "Observer Type"), octdicom.Code("121007", "DCM", "Device")),
		uidItem("HAS OBS CONTEXT", octdicom.Code("121012", "DCM", "Device Observer UID"), b.observerUID()),
		textItem("HAS OBS CONTEXT", octdicom.Code("121013", "DCM", "Device Observer Name"), "octflow"),
		textItem("HAS OBS CONTEXT", octdicom.Code("121014", "DCM", "Device Observer Manufacturer"), "octflow"),
		textItem("HAS OBS CONTEXT", octdicom.Code("121015", "DCM", "Device Observer Model Name"), cut("octflow "+b.sw.Version, 1024)),
		textItem("HAS OBS CONTEXT", octdicom.Code("121016", "DCM", "Device Observer Serial Number"), b.serialNumber()),
	}
}

// measurementGroup is the eye's measurement group (TID 2120): its finding
// site with the eye's laterality, the figures of CID 4285, the quality
// concepts and the comments.
func (b *builder) measurementGroup(m *imaging.Measurements) (*octdicom.Elements, error) {
	site := codeItem("HAS CONCEPT MOD", octdicom.Code("363698007", "SCT", "Finding Site"), octdicom.Code("81745001", "SCT", "Eye"))
	if lat := b.laterality(); lat != nil {
		// TID 2120 row 3: the laterality modifies the finding site.
		site.Seq(tag.ContentSequence, codeItem("HAS CONCEPT MOD", octdicom.Code("272741003", "SCT", "Laterality"), lat))
	}
	group := []*octdicom.Elements{site}
	withheld := map[string]string{}
	for _, w := range b.rep.Withheld {
		withheld[w.Figure] = w.Reason
	}
	var reasons []string
	for _, f := range cid4285() {
		var context []*octdicom.Elements
		if f.measured {
			context = b.figureAlgorithms()
		}
		v, ok := f.value(m)
		if why, held := withheld[f.withheldAs]; held && f.withheldAs != "" {
			reasons = append(reasons, f.name+" not reported: "+why)
			group = append(group, numAbsent("CONTAINS", f.concept, withheldQualifier(), context...))
			continue
		}
		if !ok {
			reasons = append(reasons, f.name+" not measured: "+f.unmeasured)
			group = append(group, numAbsent("CONTAINS", f.concept, notMeasuredQualifier(), context...))
			continue
		}
		n, err := numItem("CONTAINS", f.concept, v, f.units(),
			append(context, imageItem("INFERRED FROM", b.id.SOPClassUID, b.id.SOPInstanceUID))...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		group = append(group, n)
	}
	quality, err := b.qualityItems()
	if err != nil {
		return nil, err
	}
	group = append(group, quality...)
	for _, r := range reasons {
		group = append(group, textItem("CONTAINS", commentCode(), r))
	}
	if finding := b.rep.Finding(); finding != "" {
		group = append(group, textItem("CONTAINS", commentCode(), "Fluid and drusen: "+finding))
	}
	if q := b.rep.Quality; q.Gradable != imaging.Gradable || len(q.Reasons) > 0 {
		s := "Quality gate: " + string(q.Gradable)
		if len(q.Reasons) > 0 {
			s += ": " + strings.Join(q.Reasons, "; ")
		}
		group = append(group, textItem("CONTAINS", commentCode(), s+"."))
	}
	group = append(group, textItem("CONTAINS", commentCode(), "Computed automatically by octflow, to be reviewed by a clinician."))
	// No Content Template Sequence names TID 2120 here: dsrdump takes
	// any as the root's and answers that 2100 was expected. Build
	// makes no SR without the eye's laterality (TID 2120's mandatory row
	// 3; octflow does not guess it).
	return container("CONTAINS", octdicom.Code("125007", "DCM", "Measurement Group"), group...), nil
}

// figureAlgorithms identify the algorithms every figure rests on (TID
// 4019, one Algorithm Name and Version pair per stage), as the
// observation context of each figure: the IOD allows a NUM only TEXT
// children in its observation context, so the template's items are
// siblings, each name followed by its version.
//
// They are every algorithm the report names, in the pipeline's order
// (report.Report.AlgorithmStages): the stages that name one are the
// image stages, whose outputs the figures are measured from, and a stage
// added to or replaced in the pipeline is identified as the report
// records it, with no list here to keep. The lesion search is among
// them, though the thickness figures do not read its output.
func (b *builder) figureAlgorithms() []*octdicom.Elements {
	var out []*octdicom.Elements
	for _, s := range b.rep.AlgorithmStages() {
		name, version := splitAlgorithm(b.rep.Algorithms[s])
		out = append(out, algorithmIdentification(name, version)...)
	}
	return out
}

// algorithmIdentification is TID 4019: the algorithm's name and version,
// and its parameters if any.
func algorithmIdentification(name, version string, parameters ...string) []*octdicom.Elements {
	out := []*octdicom.Elements{
		textItem("HAS OBS CONTEXT", octdicom.Code("111001", "DCM", "Algorithm Name"), name),
		textItem("HAS OBS CONTEXT", octdicom.Code("111003", "DCM", "Algorithm Version"), version),
	}
	for _, p := range parameters {
		out = append(out, textItem("HAS OBS CONTEXT", octdicom.Code("111002", "DCM", "Algorithm Parameters"), p))
	}
	return out
}

// splitAlgorithm reads a stage's algorithm as the report names it: "name/
// version" (the reference stages: "chiu-graph/v1"), its version the last
// path element when that starts with a digit or a v and a digit; anything
// else (a served model's URL) is all name, of an unknown version.
func splitAlgorithm(a string) (name, version string) {
	if i := strings.LastIndexByte(a, '/'); i > 0 && i < len(a)-1 {
		v := strings.TrimPrefix(a[i+1:], "v")
		if v != "" && v[0] >= '0' && v[0] <= '9' {
			return a[:i], a[i+1:]
		}
	}
	return a, "unknown"
}

// qualityItems are the quality concepts of the Macular Grid report: the
// B-scans the figures were measured on (111691) and the A-scans of each
// (111692), the share of the A-scans the quality gate graded (111693,
// the analysis's quality) and the scan's signal strength (111694, the
// image set's quality), each rating with the gate as its algorithm.
//
// Their value types and units are octflow's reading: counts and the
// signal strength in UCUM's "1" (no units), the share in percent. The
// template row that defines them was not at hand when this was written.
func (b *builder) qualityItems() ([]*octdicom.Elements, error) {
	q, v := b.rep.Quality, b.rep.Volume
	gate := func(scale string) []*octdicom.Elements {
		return algorithmIdentification("octflow quality gate", b.sw.Version, scale)
	}
	var out []*octdicom.Elements
	for _, it := range []struct {
		concept *octdicom.Elements
		value   float64
		units   *octdicom.Elements
		context []*octdicom.Elements
	}{
		{octdicom.Code("111691", "DCM", "Number of Images Used for Macular Measurements"), float64(v.Frames), noUnits(), nil},
		{octdicom.Code("111692", "DCM", "Number of Samples Used per Image"), float64(v.Cols), noUnits(), nil},
		{octdicom.Code("111693", "DCM", "Analysis Quality Rating"), math.Round(1000*q.GradableFraction) / 10, percent(),
			gate("percent of the A-scans graded")},
		{octdicom.Code("111694", "DCM", "Image Set Quality Rating"), q.SignalStrength, noUnits(),
			gate("signal strength, 0 to 10 (" + q.Grade + ")")},
	} {
		n, err := numItem("CONTAINS", it.concept, it.value, it.units, it.context...)
		if err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

// laterality is the eye's code (SCT Right or Left), from the report or
// else the scan; nil when neither says.
func (b *builder) laterality() *octdicom.Elements {
	switch {
	case b.rep.Eye == "OD" || b.rep.Eye == "" && b.id.Laterality == "R":
		return octdicom.Code("24028007", "SCT", "Right")
	case b.rep.Eye == "OS" || b.rep.Eye == "" && b.id.Laterality == "L":
		return octdicom.Code("7771000", "SCT", "Left")
	}
	return nil
}

// item is an SR content item's head: its relationship, value type and
// concept name.
func item(rel, valueType string, concept *octdicom.Elements) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.RelationshipType, rel)
	it.Str(tag.ValueType, valueType)
	it.Seq(tag.ConceptNameCodeSequence, concept)
	return it
}

func container(rel string, concept *octdicom.Elements, children ...*octdicom.Elements) *octdicom.Elements {
	it := item(rel, "CONTAINER", concept)
	it.Str(tag.ContinuityOfContent, "SEPARATE")
	it.Seq(tag.ContentSequence, children...)
	return it
}

func codeItem(rel string, concept, value *octdicom.Elements) *octdicom.Elements {
	it := item(rel, "CODE", concept)
	it.Seq(tag.ConceptCodeSequence, value)
	return it
}

func textItem(rel string, concept *octdicom.Elements, text string) *octdicom.Elements {
	it := item(rel, "TEXT", concept)
	it.Str(tag.TextValue, text)
	return it
}

func uidItem(rel string, concept *octdicom.Elements, uid string) *octdicom.Elements {
	it := item(rel, "UIDREF", concept)
	it.Str(tag.UID, uid)
	return it
}

func imageItem(rel, sopClass, sopInstance string) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.RelationshipType, rel)
	it.Str(tag.ValueType, "IMAGE")
	ref := &octdicom.Elements{}
	ref.Str(tag.ReferencedSOPClassUID, sopClass)
	ref.Str(tag.ReferencedSOPInstanceUID, sopInstance)
	it.Seq(tag.ReferencedSOPSequence, ref)
	return it
}

// numItem is a NUM content item of v in units, with its children (its
// observation context, the source image it is inferred from).
func numItem(rel string, concept *octdicom.Elements, v float64, units *octdicom.Elements, from ...*octdicom.Elements) (*octdicom.Elements, error) {
	s, err := decimalString(v)
	if err != nil {
		return nil, err
	}
	it := item(rel, "NUM", concept)
	mv := &octdicom.Elements{}
	mv.Str(tag.NumericValue, s)
	mv.Seq(tag.MeasurementUnitsCodeSequence, units)
	it.Seq(tag.MeasuredValueSequence, mv)
	if len(from) > 0 {
		it.Seq(tag.ContentSequence, from...)
	}
	return it, nil
}

// numAbsent is a NUM content item without a value: an empty Measured
// Value Sequence and the qualifier that says why, with children if any.
func numAbsent(rel string, concept, qualifier *octdicom.Elements, children ...*octdicom.Elements) *octdicom.Elements {
	it := item(rel, "NUM", concept)
	it.Seq(tag.MeasuredValueSequence)
	it.Seq(tag.NumericValueQualifierCodeSequence, qualifier)
	if len(children) > 0 {
		it.Seq(tag.ContentSequence, children...)
	}
	return it
}

// decimalString is v as a DS value (at most 16 characters): its shortest
// exact form where that fits, the report's own figure; else as many
// decimals as fit.
func decimalString(v float64) (string, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", fmt.Errorf("figure %v is not a number", v)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	for prec := 10; len(s) > 16 && prec >= 0; prec-- {
		s = strconv.FormatFloat(v, 'f', prec, 64)
	}
	if len(s) > 16 {
		return "", fmt.Errorf("figure %v does not fit a decimal string", v)
	}
	return s, nil
}
