package results

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/codec"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/report"
)

// SOP classes of the objects Build makes.
const (
	// EncapsulatedPDFSOPClass is Encapsulated PDF Storage.
	EncapsulatedPDFSOPClass = "1.2.840.10008.5.1.4.1.1.104.1"
	// MacularGridSOPClass is Macular Grid Thickness and Volume Report
	// Storage.
	MacularGridSOPClass = "1.2.840.10008.5.1.4.1.1.79.1"
)

// Series Number (0020,0011) of the series octflow adds to a study: high,
// so they sort after a device's own series.
const (
	pdfSeriesNumber = "9001"
	srSeriesNumber  = "9002"
)

// Software names the software that made the results, for each object's
// Contributing Equipment Sequence and equipment modules (with the
// algorithms the report names).
type Software struct {
	// Version is octflow's version: a release, or the VCS revision of
	// the build.
	Version string
	// Installation names the octflow installation that makes the
	// results (OCTFLOW_INSTALLATION): the objects' device, whose Device
	// Observer UID (the SR's observer context) and Device Serial Number
	// are derived from it, so that two installations are two devices to
	// a PACS. Empty: they are derived from the exam's campus instead,
	// which tells two installations apart only while their campuses are
	// named apart.
	Installation string
}

// Kinds of Object.
const (
	// KindPDF is the report as an Encapsulated PDF.
	KindPDF = "pdf"
	// KindMacularGridSR is the Macular Grid Thickness and Volume Report.
	KindMacularGridSR = "sr"
)

// Object is one DICOM instance to send to the PACS.
type Object struct {
	// Kind says what it is: KindPDF or KindMacularGridSR.
	Kind              string
	SOPClassUID       string
	SOPInstanceUID    string
	SeriesInstanceUID string
	StudyInstanceUID  string
	// Part10 is the object as a DICOM file (Explicit VR Little Endian):
	// a STOW-RS part of type application/dicom.
	Part10 []byte
}

// FromSealed opens the exam's sealed identity (octdicom.OpenIdentity:
// only for ref's campus and exam) and builds its objects (Build). It
// is what an export activity calls with the exam's stored identity
// (exam.IdentityKey of its scan digest), its report.json and its
// report.pdf.
func FromSealed(c *codec.Codec, ref exam.Ref, sealed []byte, rep *report.Report, pdf []byte, sw Software) ([]Object, error) {
	return FromSealedSuperseding(c, ref, sealed, rep, pdf, sw, Superseded{})
}

// FromSealedSuperseding is FromSealed for a run whose results replace
// what earlier runs of the exam sent (BuildSuperseding).
func FromSealedSuperseding(c *codec.Codec, ref exam.Ref, sealed []byte, rep *report.Report, pdf []byte, sw Software, prior Superseded) ([]Object, error) {
	id, err := octdicom.OpenIdentity(c, ref, sealed)
	if err != nil {
		return nil, err
	}
	return BuildSuperseding(id, rep, pdf, sw, prior)
}

// Build builds the objects an exam's results are filed as, in the
// source study of id: the report PDF as an Encapsulated PDF, and for a
// macular cube that was measured, of an eye the report or the scan
// names, a Macular Grid Thickness and Volume Report (TID 2100). An exam
// that could not be measured (ungradable, or nothing the analysis vouches
// for) gets the PDF only, which says why; a line or circle scan gets the
// PDF only, with its figures (RNFL thickness for a circle). Each object is in a new series of its own in the source
// study, under the source's patient; its series and instance UIDs are
// derived from the exam and the report's run, so the same report gives
// the same objects, byte for byte, on every call. It is a pure function
// of its arguments.
func Build(id octdicom.Identity, rep *report.Report, pdf []byte, sw Software) ([]Object, error) {
	return BuildSuperseding(id, rep, pdf, sw, Superseded{})
}

// BuildSuperseding is Build for a run whose results replace what
// earlier runs of the exam sent (prior; none: Build's objects): the PDF
// and the SR name the latest earlier object of their SOP class as their
// predecessor (Predecessor Documents Sequence), their Series Numbers are
// the run's own (Superseded.Runs), and a Key Object Selection Document,
// last, rejects every earlier object (an IHE IOCM rejection note,
// rejectionNote). It is a pure function of its arguments.
func BuildSuperseding(id octdicom.Identity, rep *report.Report, pdf []byte, sw Software, prior Superseded) ([]Object, error) {
	if rep == nil {
		return nil, errors.New("results: no report")
	}
	if rep.Campus != id.Exam.Campus || rep.ExamID != id.Exam.ID {
		return nil, errors.New("results: the report and the identity are of different exams")
	}
	if !octdicom.ValidUID(id.StudyInstanceUID) || !octdicom.ValidUID(id.SeriesInstanceUID) || !octdicom.ValidUID(id.SOPInstanceUID) || !octdicom.ValidUID(id.SOPClassUID) {
		return nil, fmt.Errorf("results: %w", octdicom.ErrNoIdentity)
	}
	if err := prior.check(); err != nil {
		return nil, err
	}
	b := newBuilder(id, rep, sw)
	b.prior = prior
	p, err := b.encapsulatedPDF(pdf)
	if err != nil {
		return nil, err
	}
	out := []Object{p}
	// TID 2120 requires the eye: a report that cannot say which eye
	// its figures are of files the PDF alone, which says so.
	if WantsMacularGridSR(rep) && b.laterality() != nil {
		sr, err := b.macularGridSR()
		if err != nil {
			return nil, err
		}
		out = append(out, sr)
	}
	if len(prior.Objects) > 0 {
		kos, err := b.rejectionNote()
		if err != nil {
			return nil, err
		}
		out = append(out, kos)
	}
	return out, nil
}

// WantsMacularGridSR reports whether an exam's results include a Macular
// Grid Thickness and Volume Report: a macular cube with measurements
// (its central subfield thickness among them: the analysis drops a
// cube's measurements when it withholds that), whose quality gate did
// not call it ungradable.
func WantsMacularGridSR(rep *report.Report) bool {
	_, cube := rep.Figures.(*imaging.Measurements)
	return rep.ScanPattern == imaging.Cube && rep.Measurable && cube && rep.Quality.Gradable != imaging.Ungradable
}

// builder holds what every object of one exam's results shares.
type builder struct {
	id  octdicom.Identity
	rep *report.Report
	sw  Software
	// created is when the objects were made, in the source study's
	// zone where it names one (offset: its Timezone Offset From UTC),
	// else in UTC (offset "").
	created time.Time
	offset  string
	// prior is what earlier runs of the exam sent, which these objects
	// replace (none: a first run's).
	prior Superseded
}

func newBuilder(id octdicom.Identity, rep *report.Report, sw Software) *builder {
	if sw.Version == "" {
		sw.Version = "unknown"
	}
	// The report's own time, not the clock: the same report makes the
	// same objects.
	b := &builder{id: id, rep: rep, sw: sw, created: rep.GeneratedAt.UTC().Truncate(time.Second)}
	if secs, ok := parseOffset(id.TimezoneOffset); ok {
		b.offset = id.TimezoneOffset
		b.created = b.created.In(time.FixedZone(id.TimezoneOffset, secs))
	}
	return b
}

// parseOffset reads a Timezone Offset From UTC ("+HHMM" or "-HHMM",
// PS3.3 C.12.1.1.8: -1200 to +1400) as seconds east of UTC.
func parseOffset(s string) (int, bool) {
	if len(s) != 5 || s[0] != '+' && s[0] != '-' {
		return 0, false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h, m := int(s[1]-'0')*10+int(s[2]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	secs := (h*60 + m) * 60
	if s[0] == '-' {
		secs = -secs
	}
	if m >= 60 || secs < -12*3600 || secs > 14*3600 {
		return 0, false
	}
	return secs, true
}

// dateTime is when the objects were made as a DT value: in the source's
// zone with its offset, else in UTC with +0000 (a DT names its zone, so
// it is never ambiguous).
func (b *builder) dateTime() string {
	if b.offset == "" {
		return b.created.Format("20060102150405") + "+0000"
	}
	return b.created.Format("20060102150405") + b.offset
}

// installation is what the device's identifiers are derived from: the
// installation's name, or else the exam's campus.
func (b *builder) installation() []string {
	if b.sw.Installation != "" {
		return []string{"installation", b.sw.Installation}
	}
	return []string{"campus", b.id.Exam.Campus}
}

// observerUID is the Device Observer UID (TID 1004) of the installation:
// the same for every object it makes, another for another installation.
func (b *builder) observerUID() string {
	return octdicom.DerivedUID(append([]string{"octflow", "device-observer"}, b.installation()...)...)
}

// serialNumber is the installation's Device Serial Number (LO): "OCTFLOW-"
// and 16 hex digits of a hash of what observerUID is derived from, so
// that nothing the installation is named (non-ASCII, longer than LO
// holds) reaches the objects.
func (b *builder) serialNumber() string {
	h := sha256.New()
	h.Write([]byte("octflow-serial/1"))
	for _, p := range b.installation() {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return "OCTFLOW-" + strings.ToUpper(hex.EncodeToString(h.Sum(nil)[:8]))
}

// uid is the UID of one of the exam's objects (role: "pdf-series",
// "sr-instance", …) for the report's run.
func (b *builder) uid(role string) string {
	return octdicom.DerivedUID("result", b.id.Exam.Campus, b.id.Exam.ID, b.rep.Run, role)
}

// characterSet is the Specific Character Set the objects need: none for
// ASCII, UTF-8 (ISO_IR 192) when any text they carry holds anything else:
// the identity (the DICOM library decodes a source's character set into
// UTF-8) with its orders, or the report's words (reasons, the lesion
// finding, the gate's grade, algorithm names) and the version.
func (b *builder) characterSet() string {
	texts := []string{b.id.PatientName, b.id.PatientID, b.id.IssuerOfPatientID, b.id.StudyID, b.id.AccessionNumber,
		b.id.ReferringPhysicianName, b.id.StudyDescription, b.sw.Version, b.rep.Finding(), b.rep.Quality.Grade,
		string(b.rep.Quality.Gradable)}
	for _, r := range b.id.Requests {
		texts = append(texts, r.AccessionNumber, r.RequestedProcedureID, r.RequestedProcedureDescription,
			r.RequestedProcedureCode.Value, r.RequestedProcedureCode.Meaning, r.ScheduledProcedureStepID)
	}
	texts = append(texts, b.rep.Quality.Reasons...)
	for _, w := range b.rep.Withheld {
		texts = append(texts, w.Reason)
	}
	for stage, algo := range b.rep.Algorithms {
		texts = append(texts, stage, algo)
	}
	for _, s := range texts {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return "ISO_IR 192"
			}
		}
	}
	return ""
}

// common writes what every object carries: the SOP Common module (with
// the Contributing Equipment Sequence), the Patient and General Study
// modules copied from the source, a new series and the General Equipment
// module naming octflow.
func (b *builder) common(e *octdicom.Elements, sopClass, sopInstance, modality, series, seriesNumber, seriesDescription string) {
	if cs := b.characterSet(); cs != "" {
		e.Str(tag.SpecificCharacterSet, cs)
	}
	e.Str(tag.SOPClassUID, sopClass)
	e.Str(tag.SOPInstanceUID, sopInstance)
	e.Str(tag.InstanceCreationDate, da(b.created))
	e.Str(tag.InstanceCreationTime, tm(b.created))
	// The zone every date and time of the object is in: the source's,
	// whose study date and time are copied as they are. A source that
	// names none leaves it unsaid (its study time's zone is unknown);
	// octflow's own times are then in UTC.
	if b.offset != "" {
		e.Str(tag.TimezoneOffsetFromUTC, b.offset)
	}
	e.Str(tag.InstanceNumber, "1")
	e.Seq(tag.ContributingEquipmentSequence, b.contributor())

	// Patient: Type 2, empty where the source had nothing.
	e.Multi(tag.PatientName, b.id.PatientName)
	e.Str(tag.PatientID, b.id.PatientID)
	if b.id.IssuerOfPatientID != "" {
		e.Str(tag.IssuerOfPatientID, b.id.IssuerOfPatientID)
	}
	e.Str(tag.PatientBirthDate, b.id.PatientBirthDate)
	e.Str(tag.PatientSex, b.id.PatientSex)

	// General Study: the source's, so the PACS files the object there.
	e.Str(tag.StudyInstanceUID, b.id.StudyInstanceUID)
	e.Str(tag.StudyDate, b.id.StudyDate)
	e.Str(tag.StudyTime, b.id.StudyTime)
	e.Multi(tag.ReferringPhysicianName, b.id.ReferringPhysicianName)
	e.Str(tag.StudyID, b.id.StudyID)
	e.Str(tag.AccessionNumber, b.id.AccessionNumber)
	if b.id.StudyDescription != "" {
		e.Str(tag.StudyDescription, b.id.StudyDescription)
	}

	// A new series of octflow's.
	e.Str(tag.Modality, modality)
	e.Str(tag.SeriesInstanceUID, series)
	e.Str(tag.SeriesNumber, b.seriesNumber(seriesNumber))
	e.Str(tag.SeriesDescription, seriesDescription)
	e.Str(tag.SeriesDate, da(b.created))
	e.Str(tag.SeriesTime, tm(b.created))

	// General Equipment: the software that made the object, and the
	// installation that ran it.
	e.Str(tag.Manufacturer, "octflow")
	e.Str(tag.ManufacturerModelName, "octflow")
	e.Str(tag.DeviceSerialNumber, b.serialNumber())
	e.Add(tag.SoftwareVersions, b.softwareVersions())
}

// softwareVersions names octflow's version and each stage's algorithm,
// in the pipeline's order as the report records it (AlgorithmStages:
// "measure: etdrs-v3"), each cut to LO's 64 characters.
func (b *builder) softwareVersions() []string {
	out := []string{"octflow " + b.sw.Version}
	for _, s := range b.rep.AlgorithmStages() {
		out = append(out, s+": "+b.rep.Algorithms[s])
	}
	for i, v := range out {
		out[i] = cut(strings.ReplaceAll(v, `\`, "/"), 64)
	}
	return out
}

// contributor is the Contributing Equipment Sequence's item: octflow as
// the processing equipment, its version and algorithms, and when.
func (b *builder) contributor() *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Seq(tag.PurposeOfReferenceCodeSequence, octdicom.Code("109102", "DCM", "Processing Equipment"))
	it.Str(tag.Manufacturer, "octflow")
	it.Str(tag.ManufacturerModelName, "octflow")
	it.Add(tag.SoftwareVersions, b.softwareVersions())
	it.Str(tag.ContributionDateTime, b.dateTime())
	it.Str(tag.ContributionDescription, "Automated OCT analysis (denoising, retinal layer segmentation, lesion marking, "+
		"measurement) and report, computed by octflow from the referenced scan; to be reviewed by a clinician")
	return it
}

// requests are the orders the results answer: the source's Request
// Attributes items, each with the study's Accession Number where it
// names none, or else the order the study's Accession Number names;
// none when neither says.
func (b *builder) requests() []octdicom.Request {
	if len(b.id.Requests) == 0 {
		if b.id.AccessionNumber == "" {
			return nil
		}
		return []octdicom.Request{{AccessionNumber: b.id.AccessionNumber}}
	}
	out := slices.Clone(b.id.Requests)
	for i := range out {
		if out[i].AccessionNumber == "" {
			out[i].AccessionNumber = b.id.AccessionNumber
		}
	}
	return out
}

// referencedRequest is an item of the SR's Referenced Request Sequence
// (SR Document General, PS3.3 C.17.2): the study, the order's accession
// number and requested procedure; the Type 2 attributes octflow does not
// know (the placer's and filler's order numbers, the Referenced Study
// Sequence) empty.
func (b *builder) referencedRequest(r octdicom.Request) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.StudyInstanceUID, b.id.StudyInstanceUID)
	it.Seq(tag.ReferencedStudySequence)
	it.Str(tag.AccessionNumber, r.AccessionNumber)
	it.Str(tag.PlacerOrderNumberImagingServiceRequest, "")
	it.Str(tag.FillerOrderNumberImagingServiceRequest, "")
	it.Str(tag.RequestedProcedureID, r.RequestedProcedureID)
	it.Str(tag.RequestedProcedureDescription, r.RequestedProcedureDescription)
	if c := r.RequestedProcedureCode; c != (octdicom.CodedEntry{}) {
		it.Seq(tag.RequestedProcedureCodeSequence, octdicom.Code(c.Value, c.Scheme, c.Meaning))
	} else {
		it.Seq(tag.RequestedProcedureCodeSequence)
	}
	return it
}

// requestAttributes is an item of the PDF's Request Attributes Sequence
// (Encapsulated Document Series, the Request Attributes Macro of PS3.3
// Table 10-9): what of the order the source names, the study's UID.
func (b *builder) requestAttributes(r octdicom.Request) *octdicom.Elements {
	it := &octdicom.Elements{}
	for _, v := range []struct {
		t tag.Tag
		v string
	}{
		{tag.AccessionNumber, r.AccessionNumber}, {tag.StudyInstanceUID, b.id.StudyInstanceUID},
		{tag.RequestedProcedureDescription, r.RequestedProcedureDescription},
		{tag.ScheduledProcedureStepID, r.ScheduledProcedureStepID}, {tag.RequestedProcedureID, r.RequestedProcedureID},
	} {
		if v.v != "" {
			it.Str(v.t, v.v)
		}
	}
	if c := r.RequestedProcedureCode; c != (octdicom.CodedEntry{}) {
		it.Seq(tag.RequestedProcedureCodeSequence, octdicom.Code(c.Value, c.Scheme, c.Meaning))
	}
	return it
}

// sourceRef is a Referenced SOP item naming the source scan.
func (b *builder) sourceRef() *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.ReferencedSOPClassUID, b.id.SOPClassUID)
	it.Str(tag.ReferencedSOPInstanceUID, b.id.SOPInstanceUID)
	return it
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// da and tm are a time as DICOM's DA and TM write it, in t's own zone
// (the builder's: the source study's, or UTC).
func da(t time.Time) string { return t.Format("20060102") }
func tm(t time.Time) string { return t.Format("150405") }

// errResult wraps a writer's failure with the object it was making.
func errResult(kind string, err error) error { return fmt.Errorf("results: %s: %w", kind, err) }

// BuildSoftware is Software naming this binary: its module's version
// when it is a release, else its VCS revision (12 digits, "+dirty" when
// built from a modified tree), else "devel".
func BuildSoftware() Software {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Software{Version: "devel"}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return Software{Version: v}
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return Software{Version: "devel"}
	case dirty:
		return Software{Version: rev + "+dirty"}
	}
	return Software{Version: rev}
}
