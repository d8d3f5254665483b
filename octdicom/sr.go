package octdicom

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
)

// The codes of the Macular Grid Thickness and Volume Report.
//
// The ETDRS figures are LOINC's "Macular grid.… by OCT" codes, which
// TID 2100 and CID 4285 use; the units are UCUM's.
func etdrsCode(subfield string) *elems {
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
	return code(n[0], "LN", "Macular grid."+n[1]+" thickness by OCT")
}

func totalVolumeCode() *elems { return code("57118-2", "LN", "Macular grid.total volume by OCT") }
func micrometre() *elems      { return code("um", "UCUM", "micrometer") }
func cubicMillimetre() *elems { return code("mm3", "UCUM", "cubic millimeter") }
func commentCode() *elems     { return code("121106", "DCM", "Comment") }

// Numeric Value Qualifiers (CID 42) of a figure that is not reported: the
// analysis withheld it (its boundaries are not reliable there), or too
// little of its subfield was graded to measure it.
func withheldQualifier() *elems    { return code("114011", "DCM", "Value indeterminate") }
func notMeasuredQualifier() *elems { return code("114007", "DCM", "Measurement not attempted") }

// macularGridSR is the Macular Grid Thickness and Volume Report (PS3.3
// A.37, content TID 2100) of a measured macular cube: the SR Document
// Series, Enhanced General Equipment, SR Document General and SR
// Document Content modules besides the common ones. Its content: the
// language, octflow as the device observer, and one measurement group
// for the eye (finding site and laterality): the central subfield
// thickness, the eight other ETDRS subfields and the total volume, in
// µm and mm³ as the report has them, each inferred from the scan (the
// IOD references images only so); a figure the report does not give
// is present without a value, with a Numeric Value Qualifier, and a
// comment says why; a last comment gives the quality gate's verdict.
func (b *builder) macularGridSR() (Object, error) {
	obj := Object{Kind: KindMacularGridSR, SOPClassUID: MacularGridSOPClass, SOPInstanceUID: b.uid("sr-instance"),
		SeriesInstanceUID: b.uid("sr-series"), StudyInstanceUID: b.id.StudyInstanceUID}
	e := &elems{}
	b.common(e, obj.SOPClassUID, obj.SOPInstanceUID, "SR", obj.SeriesInstanceUID, srSeriesNumber,
		"octflow macular grid thickness and volume")
	// SR Document Series.
	e.seq(tag.ReferencedPerformedProcedureStepSequence)
	// Enhanced General Equipment: Type 1 throughout.
	e.str(tag.DeviceSerialNumber, "octflow")
	// SR Document General.
	e.str(tag.CompletionFlag, "COMPLETE")
	e.str(tag.VerificationFlag, "UNVERIFIED")
	e.str(tag.ContentDate, da(b.created))
	e.str(tag.ContentTime, tm(b.created))
	e.seq(tag.PerformedProcedureCodeSequence)
	evidence := &elems{}
	evidence.str(tag.StudyInstanceUID, b.id.StudyInstanceUID)
	series := &elems{}
	series.str(tag.SeriesInstanceUID, b.id.SeriesInstanceUID)
	series.seq(tag.ReferencedSOPSequence, b.sourceRef())
	evidence.seq(tag.ReferencedSeriesSequence, series)
	e.seq(tag.CurrentRequestedProcedureEvidenceSequence, evidence)
	// SR Document Content: the root container.
	e.str(tag.ValueType, "CONTAINER")
	e.seq(tag.ConceptNameCodeSequence, code("111690", "DCM", "Macular Grid Thickness and Volume Report"))
	e.str(tag.ContinuityOfContent, "SEPARATE")
	tmpl := &elems{}
	tmpl.str(tag.MappingResource, "DCMR")
	tmpl.str(tag.TemplateIdentifier, "2100")
	e.seq(tag.ContentTemplateSequence, tmpl)
	content, err := b.macularContent()
	if err != nil {
		return Object{}, errResult("sr", err)
	}
	e.seq(tag.ContentSequence, content...)
	if obj.Part10, err = encode(e, obj.SOPClassUID, obj.SOPInstanceUID); err != nil {
		return Object{}, errResult("sr", err)
	}
	return obj, nil
}

// macularContent is the root container's content.
func (b *builder) macularContent() ([]*elems, error) {
	m, ok := b.rep.Figures.(*imaging.Measurements)
	if !ok {
		return nil, fmt.Errorf("macular grid SR of a report without a cube's measurements (%s scan)", b.rep.ScanPattern)
	}
	out := []*elems{
		codeItem("HAS CONCEPT MOD", code("121049", "DCM", "Language of Content Item and Descendants"),
			code("en-US", "RFC5646", "English (United States)")),
		codeItem("HAS OBS CONTEXT", code("121005", "DCM", "Observer Type"), code("121007", "DCM", "Device")),
		uidItem("HAS OBS CONTEXT", code("121012", "DCM", "Device Observer UID"), DerivedUID("octflow", "device-observer")),
		textItem("HAS OBS CONTEXT", code("121013", "DCM", "Device Observer Name"), "octflow"),
		textItem("HAS OBS CONTEXT", code("121014", "DCM", "Device Observer Manufacturer"), "octflow"),
		textItem("HAS OBS CONTEXT", code("121015", "DCM", "Device Observer Model Name"), cut("octflow "+b.sw.Version, 1024)),
	}
	group := []*elems{codeItem("HAS CONCEPT MOD", code("363698007", "SCT", "Finding Site"), code("81745001", "SCT", "Eye"))}
	if lat := b.laterality(); lat != nil {
		group = append(group, codeItem("HAS CONCEPT MOD", code("272741003", "SCT", "Laterality"), lat))
	}
	withheld := map[string]string{}
	for _, w := range b.rep.Withheld {
		withheld[w.Figure] = w.Reason
	}
	var reasons []string
	// A figure the report does not give: present, without a value, with
	// why.
	absent := func(concept *elems, figure, name string) *elems {
		if why, ok := withheld[figure]; ok {
			reasons = append(reasons, name+" not reported: "+why)
			return numAbsent("CONTAINS", concept, withheldQualifier())
		}
		reasons = append(reasons, name+" not measured: too little of it was graded")
		return numAbsent("CONTAINS", concept, notMeasuredQualifier())
	}
	source := imageItem("INFERRED FROM", b.id.SOPClassUID, b.id.SOPInstanceUID)
	cst, err := numItem("CONTAINS", etdrsCode("C"), m.CentralSubfieldThicknessUm, micrometre(), source)
	if err != nil {
		return nil, err
	}
	group = append(group, cst)
	for _, k := range imaging.ETDRSSubfields {
		if k == "C" {
			continue
		}
		v, ok := m.ETDRS[k]
		if !ok || slices.Contains(m.Unmeasured, k) {
			group = append(group, absent(etdrsCode(k), imaging.FigureETDRS+k, "subfield "+k))
			continue
		}
		n, err := numItem("CONTAINS", etdrsCode(k), v, micrometre(), source)
		if err != nil {
			return nil, err
		}
		group = append(group, n)
	}
	if m.TotalVolumeMm3 > 0 {
		n, err := numItem("CONTAINS", totalVolumeCode(), m.TotalVolumeMm3, cubicMillimetre(), source)
		if err != nil {
			return nil, err
		}
		group = append(group, n)
	} else {
		group = append(group, absent(totalVolumeCode(), imaging.FigureVolume, "total volume"))
	}
	for _, r := range reasons {
		group = append(group, textItem("CONTAINS", commentCode(), r))
	}
	if finding := b.rep.Finding(); finding != "" {
		group = append(group, textItem("CONTAINS", commentCode(), "Fluid and drusen: "+finding))
	}
	group = append(group, textItem("CONTAINS", commentCode(), b.qualityVerdict()))
	out = append(out, container("CONTAINS", code("125007", "DCM", "Measurement Group"), group...))
	return out, nil
}

// laterality is the eye's code (SCT Right or Left), from the report or
// else the scan; nil when neither says.
func (b *builder) laterality() *elems {
	switch {
	case b.rep.Eye == "OD" || b.rep.Eye == "" && b.id.Laterality == "R":
		return code("24028007", "SCT", "Right")
	case b.rep.Eye == "OS" || b.rep.Eye == "" && b.id.Laterality == "L":
		return code("7771000", "SCT", "Left")
	}
	return nil
}

// qualityVerdict is the quality gate's verdict in words.
func (b *builder) qualityVerdict() string {
	q := b.rep.Quality
	s := fmt.Sprintf("Quality gate: %s; signal strength %.1f of 10 (%s); %.0f%% of A-scans graded",
		q.Gradable, q.SignalStrength, q.Grade, 100*q.GradableFraction)
	if len(q.Reasons) > 0 {
		s += ": " + strings.Join(q.Reasons, "; ")
	}
	return s + ". Computed automatically, to be reviewed by a clinician."
}

// item is an SR content item's head: its relationship, value type and
// concept name.
func item(rel, valueType string, concept *elems) *elems {
	it := &elems{}
	it.str(tag.RelationshipType, rel)
	it.str(tag.ValueType, valueType)
	it.seq(tag.ConceptNameCodeSequence, concept)
	return it
}

func container(rel string, concept *elems, children ...*elems) *elems {
	it := item(rel, "CONTAINER", concept)
	it.str(tag.ContinuityOfContent, "SEPARATE")
	it.seq(tag.ContentSequence, children...)
	return it
}

func codeItem(rel string, concept, value *elems) *elems {
	it := item(rel, "CODE", concept)
	it.seq(tag.ConceptCodeSequence, value)
	return it
}

func textItem(rel string, concept *elems, text string) *elems {
	it := item(rel, "TEXT", concept)
	it.str(tag.TextValue, text)
	return it
}

func uidItem(rel string, concept *elems, uid string) *elems {
	it := item(rel, "UIDREF", concept)
	it.str(tag.UID, uid)
	return it
}

func imageItem(rel, sopClass, sopInstance string) *elems {
	it := &elems{}
	it.str(tag.RelationshipType, rel)
	it.str(tag.ValueType, "IMAGE")
	ref := &elems{}
	ref.str(tag.ReferencedSOPClassUID, sopClass)
	ref.str(tag.ReferencedSOPInstanceUID, sopInstance)
	it.seq(tag.ReferencedSOPSequence, ref)
	return it
}

// numItem is a NUM content item of v in units, inferred from the given
// content items (the source image).
func numItem(rel string, concept *elems, v float64, units *elems, from ...*elems) (*elems, error) {
	s, err := decimalString(v)
	if err != nil {
		return nil, err
	}
	it := item(rel, "NUM", concept)
	mv := &elems{}
	mv.str(tag.NumericValue, s)
	mv.seq(tag.MeasurementUnitsCodeSequence, units)
	it.seq(tag.MeasuredValueSequence, mv)
	if len(from) > 0 {
		it.seq(tag.ContentSequence, from...)
	}
	return it, nil
}

// numAbsent is a NUM content item without a value: an empty Measured
// Value Sequence and the qualifier that says why.
func numAbsent(rel string, concept, qualifier *elems) *elems {
	it := item(rel, "NUM", concept)
	it.seq(tag.MeasuredValueSequence)
	it.seq(tag.NumericValueQualifierCodeSequence, qualifier)
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
