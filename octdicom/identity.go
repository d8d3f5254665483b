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
}

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
	}
	return nil
}

// errUnparsable is ReadIdentity's refusal of a header the DICOM library
// cannot parse. The library's own errors, and its panics, may quote an
// element's value (a patient's name): they are not passed on.
var errUnparsable = errors.New("read identity: the header cannot be parsed")

// ReadIdentity reads the identity of a DICOM object of size bytes (Part
// 10, as a device sends it): its header only, up to the first element
// past Image Laterality (0020,0062), never its pixel data. The caller has
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
		if tag.ImageLaterality.Compare(el.Tag) < 0 {
			break
		}
		dst := identityField(&id, el.Tag)
		if dst == nil {
			continue
		}
		vals, ok := el.Value.GetValue().([]string)
		if !ok {
			return Identity{}, fmt.Errorf("read identity: %v is not text", el.Tag)
		}
		v := strings.TrimRight(strings.Join(vals, `\`), " \x00")
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
