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
