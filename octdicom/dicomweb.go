package octdicom

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The attributes of a STOW-RS answer, the Store Instances Response
// Module (PS3.18 Annex I), as the DICOM JSON Model names them.
const (
	TagReferencedSOPClassUID    = "00081150"
	TagReferencedSOPInstanceUID = "00081155"
	TagRetrieveURL              = "00081190"
	TagWarningReason            = "00081196"
	TagFailureReason            = "00081197"
	TagFailedSOPSequence        = "00081198"
	TagReferencedSOPSequence    = "00081199"
)

// Failure Reason (0008,1197) values of a STOW-RS answer (PS3.18 Table
// 10.5.3-1, from the C-STORE statuses of PS3.4), each with what octflow's
// gateway answers it for.
const (
	// FailureOutOfResources (A700H): refused for now (Temporal, the
	// object store or the validation slots busy or away); send it again
	// later.
	FailureOutOfResources = 0xA700
	// FailureCannotUnderstand (C000H): not a DICOM object octflow can
	// read, or an OCT object that is broken or hostile.
	FailureCannotUnderstand = 0xC000
	// FailureSOPClassNotSupported (0122H): a readable object of another
	// kind (CT, fundus photograph, …): octflow analyses OCT only.
	FailureSOPClassNotSupported = 0x0122
	// FailureDuplicateInstance (0111H): this SOP Instance UID was stored
	// before with other content; the first is kept.
	FailureDuplicateInstance = 0x0111
	// FailureTransferSyntax (C122H): an OCT object in a transfer syntax
	// octflow does not read (compressed, big endian).
	FailureTransferSyntax = 0xC122
	// FailureOtherStudy (C409H): sent to a study's resource
	// (/dicom-web/studies/{study}), the instance is of another study.
	// The value is the one dcm4chee answers (PS3.18 leaves it to the
	// origin server, in the C000–CFFF "cannot understand" range that
	// senders take as final).
	FailureOtherStudy = 0xC409
)

// WarningCoercion (B000H) is the Warning Reason (0008,1196) Coercion of
// Data Elements (PS3.18 Table I.2-1): octflow's gateway answers it for
// every instance it stores, since it keeps a de-identified copy, never
// the instance as sent (docs/conformance.md).
const WarningCoercion = 0xB000

// octflow's private attributes in a STOW-RS answer's items: the block of
// creator PrivateCreator, and in it the absolute URL of a stored
// instance's exam status in octflow's API.
const (
	PrivateCreator    = "OCTFLOW"
	TagPrivateCreator = "00090010"
	TagExamStatusURL  = "00091001"
)

// JSONAttribute is an attribute in the DICOM JSON Model (PS3.18 Annex
// F). A sequence's items are JSONDatasets.
type JSONAttribute struct {
	VR    string `json:"vr"`
	Value []any  `json:"Value,omitempty"`
}

// JSONDataset is a dataset in the DICOM JSON Model, by tag (eight hex
// digits).
type JSONDataset map[string]JSONAttribute

// NativeXML is d in the Native DICOM Model (PS3.19 Annex A), as
// application/dicom+xml gives it: attributes in tag order, sequences as
// numbered items, values numbered from 1; a private attribute of a
// (gggg,10xx) block names PrivateCreator as its creator.
func (d JSONDataset) NativeXML() ([]byte, error) {
	var b strings.Builder
	b.WriteString(xml.Header)
	b.WriteString(`<NativeDicomModel xmlns="http://dicom.nema.org/PS3.19/models/NativeDICOM">`)
	if err := d.writeNative(&b); err != nil {
		return nil, err
	}
	b.WriteString("</NativeDicomModel>\n")
	return []byte(b.String()), nil
}

func (d JSONDataset) writeNative(b *strings.Builder) error {
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range d {
			if !yield(t) {
				return
			}
		}
	}) {
		a := d[t]
		fmt.Fprintf(b, `<DicomAttribute tag="%s" vr="%s"`, t, a.VR)
		if group, err := strconv.ParseUint(t[:4], 16, 16); err == nil && group%2 == 1 && t[4:6] == "10" {
			fmt.Fprintf(b, ` privateCreator="%s"`, PrivateCreator)
		}
		b.WriteString(">")
		for i, v := range a.Value {
			switch v := v.(type) {
			case JSONDataset:
				fmt.Fprintf(b, `<Item number="%d">`, i+1)
				if err := v.writeNative(b); err != nil {
					return err
				}
				b.WriteString("</Item>")
			default:
				fmt.Fprintf(b, `<Value number="%d">`, i+1)
				if err := xml.EscapeText(b, []byte(fmt.Sprint(v))); err != nil {
					return err
				}
				b.WriteString("</Value>")
			}
		}
		b.WriteString("</DicomAttribute>")
	}
	return nil
}

// StoreFailures lists what a STOW-RS answer in DICOM JSON says in its
// Failed SOP Sequence: each refused instance's UID and failure reason
// ("an instance", "no reason given" where the answer leaves them out).
// An answer that is not DICOM JSON lists none.
func StoreFailures(answer []byte) []string {
	var ds map[string]struct {
		Value []map[string]struct {
			Value []any `json:"Value"`
		} `json:"Value"`
	}
	if json.Unmarshal(answer, &ds) != nil {
		return nil
	}
	var out []string
	for _, item := range ds[TagFailedSOPSequence].Value {
		uid, reason := "an instance", "no reason given"
		if v := item[TagReferencedSOPInstanceUID].Value; len(v) > 0 {
			uid = fmt.Sprint(v[0])
		}
		if v := item[TagFailureReason].Value; len(v) > 0 {
			reason = fmt.Sprintf("reason %v", v[0])
		}
		out = append(out, uid+": "+reason)
	}
	return out
}
