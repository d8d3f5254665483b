package octdicom

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/exam"
)

// Identity is what octflow keeps of a scan's original identity for the
// way back: enough to file its results under the patient's own study,
// in a new series, referring to the scan they were made from. It is
// protected health information: it exists in clear only in the memory of
// the process that reads it at intake or opens it to build the outgoing
// objects, and is stored only sealed (SealIdentity). Strings are as the
// DICOM library decodes them (UTF-8); a value of several values keeps
// them joined by a backslash, as DICOM writes them.
type Identity struct {
	// Exam and ScanDigest bind the identity to the exam and the scan it
	// was read from (the keyed exam reference and the upload's
	// NewInstanceHash digest: neither identifies anyone). OpenIdentity
	// refuses an identity sealed for another exam.
	Exam       exam.Ref `json:"exam"`
	ScanDigest string   `json:"scanDigest"`

	// The Patient module.
	PatientName       string `json:"patientName,omitempty"`
	PatientID         string `json:"patientId,omitempty"`
	IssuerOfPatientID string `json:"issuerOfPatientId,omitempty"`
	PatientBirthDate  string `json:"patientBirthDate,omitempty"`
	PatientSex        string `json:"patientSex,omitempty"`

	// The General Study module.
	StudyInstanceUID       string `json:"studyInstanceUid"`
	StudyDate              string `json:"studyDate,omitempty"`
	StudyTime              string `json:"studyTime,omitempty"`
	StudyID                string `json:"studyId,omitempty"`
	AccessionNumber        string `json:"accessionNumber,omitempty"`
	ReferringPhysicianName string `json:"referringPhysicianName,omitempty"`
	StudyDescription       string `json:"studyDescription,omitempty"`

	// The source: its series and instance, which the results refer to
	// (Source Instance Sequence, the SR's evidence and image library),
	// and the eye it shows (R or L).
	SeriesInstanceUID string `json:"seriesInstanceUid"`
	SOPClassUID       string `json:"sopClassUid"`
	SOPInstanceUID    string `json:"sopInstanceUid"`
	Laterality        string `json:"laterality,omitempty"`
	// FrameOfReferenceUID is the source's Frame of Reference UID
	// (0020,0052): a segmentation drawn over the scan is in it. Empty
	// when the source names none, and in identities sealed before it
	// was kept.
	FrameOfReferenceUID string `json:"frameOfReferenceUid,omitempty"`

	// TimezoneOffset is the source's Timezone Offset From UTC
	// (0008,0201), "+HHMM" or "-HHMM": the zone its study date and time
	// are in, in which the results write theirs. Empty when the source
	// does not say.
	TimezoneOffset string `json:"timezoneOffsetFromUtc,omitempty"`
	// Requests are the orders the scan was made for, as its Request
	// Attributes Sequence (0040,0275) names them (at most maxRequests):
	// the results reference them as the request they answer.
	Requests []Request `json:"requests,omitempty"`
}

// Request is one order a scan was made for: an item of its Request
// Attributes Sequence (0040,0275), what the results' Referenced Request
// Sequence (the SR) and Request Attributes Sequence (the PDF) copy.
type Request struct {
	AccessionNumber               string     `json:"accessionNumber,omitempty"`
	RequestedProcedureID          string     `json:"requestedProcedureId,omitempty"`
	RequestedProcedureDescription string     `json:"requestedProcedureDescription,omitempty"`
	RequestedProcedureCode        CodedEntry `json:"requestedProcedureCode,omitzero"`
	ScheduledProcedureStepID      string     `json:"scheduledProcedureStepId,omitempty"`
}

// CodedEntry is a code as a Code Sequence Macro item holds it: its
// value, coding scheme designator and meaning. The zero value is no
// code.
type CodedEntry struct {
	Value   string `json:"value,omitempty"`
	Scheme  string `json:"scheme,omitempty"`
	Meaning string `json:"meaning,omitempty"`
}

// maxRequests is how many items of a scan's Request Attributes Sequence
// the identity keeps: a scan answers one order, rarely a few.
const maxRequests = 8

// ErrNoIdentity is wrapped by ReadIdentity's refusal of an object that
// does not name its study, series and instance: nothing made of it could
// be filed back.
var ErrNoIdentity = errors.New("the object does not name its study, series and instance")

// identityField is the field of Identity that tag t fills, or nil.
func identityField(id *Identity, t tag.Tag) *string {
	switch t {
	case tag.SOPClassUID:
		return &id.SOPClassUID
	case tag.SOPInstanceUID:
		return &id.SOPInstanceUID
	case tag.StudyDate:
		return &id.StudyDate
	case tag.StudyTime:
		return &id.StudyTime
	case tag.AccessionNumber:
		return &id.AccessionNumber
	case tag.ReferringPhysicianName:
		return &id.ReferringPhysicianName
	case tag.StudyDescription:
		return &id.StudyDescription
	case tag.PatientName:
		return &id.PatientName
	case tag.PatientID:
		return &id.PatientID
	case tag.IssuerOfPatientID:
		return &id.IssuerOfPatientID
	case tag.PatientBirthDate:
		return &id.PatientBirthDate
	case tag.PatientSex:
		return &id.PatientSex
	case tag.StudyInstanceUID:
		return &id.StudyInstanceUID
	case tag.SeriesInstanceUID:
		return &id.SeriesInstanceUID
	case tag.StudyID:
		return &id.StudyID
	case tag.Laterality, tag.ImageLaterality:
		return &id.Laterality
	case tag.TimezoneOffsetFromUTC:
		return &id.TimezoneOffset
	case tag.FrameOfReferenceUID:
		return &id.FrameOfReferenceUID
	}
	return nil
}

// requestField is the field of Request that tag t fills in an item of
// the Request Attributes Sequence, or nil.
func requestField(r *Request, t tag.Tag) *string {
	switch t {
	case tag.AccessionNumber:
		return &r.AccessionNumber
	case tag.RequestedProcedureID:
		return &r.RequestedProcedureID
	case tag.RequestedProcedureDescription:
		return &r.RequestedProcedureDescription
	case tag.ScheduledProcedureStepID:
		return &r.ScheduledProcedureStepID
	}
	return nil
}

// text is a text element's value as Identity keeps it: its values
// joined by a backslash, trailing padding trimmed; false when the
// element is not text.
func text(el *dicom.Element) (string, bool) {
	vals, ok := el.Value.GetValue().([]string)
	if !ok {
		return "", false
	}
	return strings.TrimRight(strings.Join(vals, `\`), " \x00"), true
}

// readRequests reads the items of a Request Attributes Sequence.
func readRequests(el *dicom.Element) ([]Request, error) {
	items, ok := el.Value.GetValue().([]*dicom.SequenceItemValue)
	if !ok {
		return nil, fmt.Errorf("read identity: %v is not a sequence", el.Tag)
	}
	var out []Request
	for _, item := range items[:min(len(items), maxRequests)] {
		els, _ := item.GetValue().([]*dicom.Element)
		var r Request
		for _, e := range els {
			if e.Tag == tag.RequestedProcedureCodeSequence {
				r.RequestedProcedureCode = readCode(e)
				continue
			}
			if dst := requestField(&r, e.Tag); dst != nil {
				v, ok := text(e)
				if !ok {
					return nil, fmt.Errorf("read identity: %v in %v is not text", e.Tag, el.Tag)
				}
				*dst = v
			}
		}
		if r != (Request{}) {
			out = append(out, r)
		}
	}
	return out, nil
}

// readCode is the first item of a code sequence, or no code when it has
// none or an item lacks its value, scheme or meaning.
func readCode(el *dicom.Element) CodedEntry {
	items, _ := el.Value.GetValue().([]*dicom.SequenceItemValue)
	if len(items) == 0 {
		return CodedEntry{}
	}
	els, _ := items[0].GetValue().([]*dicom.Element)
	var c CodedEntry
	for _, e := range els {
		v, _ := text(e)
		switch e.Tag {
		case tag.CodeValue:
			c.Value = v
		case tag.CodingSchemeDesignator:
			c.Scheme = v
		case tag.CodeMeaning:
			c.Meaning = v
		}
	}
	if c.Value == "" || c.Scheme == "" || c.Meaning == "" {
		return CodedEntry{}
	}
	return c
}

// errUnparsable is ReadIdentity's refusal of a header the DICOM library
// cannot parse. The library's own errors, and its panics, may quote an
// element's value (a patient's name): they are not passed on.
var errUnparsable = errors.New("read identity: the header cannot be parsed")

// ReadIdentity reads the identity of a DICOM object of size bytes (Part
// 10, as a device sends it): its header only, up to the first element
// past the Request Attributes Sequence (0040,0275), never its pixel
// data. The caller has
// validated the object (the gateway's pre-scan and parse) before: this
// reads what was found sound. Errors name the structure, never a value.
// Exam and ScanDigest are left for the caller.
func ReadIdentity(r io.Reader, size int64) (id Identity, err error) {
	defer func() {
		// The parser trusts the file's lengths; a damaged file must not
		// take the process down.
		if p := recover(); p != nil {
			id, err = Identity{}, errUnparsable
		}
	}()
	p, err := dicom.NewParser(bufio.NewReaderSize(r, int(min(max(size, 16), 64<<10))), size, nil, dicom.SkipPixelData())
	if err != nil {
		return Identity{}, errUnparsable
	}
	for {
		el, err := p.Next()
		if errors.Is(err, dicom.ErrorEndOfDICOM) || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Identity{}, errUnparsable
		}
		if tag.RequestAttributesSequence.Compare(el.Tag) < 0 {
			break
		}
		if el.Tag == tag.RequestAttributesSequence {
			if id.Requests, err = readRequests(el); err != nil {
				return Identity{}, err
			}
			continue
		}
		dst := identityField(&id, el.Tag)
		if dst == nil {
			continue
		}
		v, ok := text(el)
		if !ok {
			return Identity{}, fmt.Errorf("read identity: %v is not text", el.Tag)
		}
		// Image Laterality outranks Laterality; neither is empty then.
		if *dst == "" || el.Tag == tag.ImageLaterality && v != "" {
			*dst = v
		}
	}
	if !ValidUID(id.StudyInstanceUID) || !ValidUID(id.SeriesInstanceUID) || !ValidUID(id.SOPInstanceUID) || !ValidUID(id.SOPClassUID) {
		return Identity{}, fmt.Errorf("read identity: %w", ErrNoIdentity)
	}
	return id, nil
}
