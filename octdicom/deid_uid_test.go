package octdicom

import (
	"bytes"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom/pkg/tag"
)

// vendorUIDRoots are the UID roots scans arrive with: the devices' and
// their software's organisation roots, under each registration authority
// (ANSI's 1.2.840 included, whose 1.2.840.10008 alone is DICOM's own),
// and UUID-derived 2.25 UIDs.
var vendorUIDRoots = []struct{ root, who string }{
	{"1.2.840.113619.2.55.3", "GE Healthcare (ANSI 1.2.840)"},
	{"1.2.840.114350.2.232", "Epic (ANSI 1.2.840)"},
	{"1.2.840.113681.2.15", "a vendor under 1.2.840 next to DICOM's 1.2.840.10008"},
	{"1.2.840.100081", "a root that starts like 1.2.840.10008 but is not it"},
	{"1.2.276.0.75.2.5.80", "Carl Zeiss Meditec (DIN 1.2.276)"},
	{"1.2.276.0.7230010.3.1", "DCMTK, OFFIS (DIN 1.2.276)"},
	{"1.3.6.1.4.1.9590.100.1.2", "a vendor under IANA enterprise numbers 1.3.6.1.4.1"},
	{"1.3.12.2.1107.5.1.4", "Siemens (ISO identified organization 1.3.12)"},
	{"1.3.46.670589.11", "Philips (1.3.46)"},
	{"1.2.392.200036.9116.2.6", "Canon/Toshiba (JIS 1.2.392)"},
	{"1.2.392.200106.1651.4", "a Japanese OCT maker (JIS 1.2.392)"},
	{"1.2.826.0.1.3680043.8.498", "pydicom, as on the SPECTRALIS test scans (UK 1.2.826)"},
	{"2.25.271828182845904523536028747135266249", "a UUID-derived UID (2.25)"},
}

// wellKnownUIDs are DICOM's own UIDs: a class or a transfer syntax names
// no instance, so the copy keeps them as they are.
var wellKnownUIDs = []string{
	OphthalmicTomographySOPClass,       // SOP Class UID, in the dataset and the file meta
	"1.2.840.10008.1.2.1",              // Explicit VR Little Endian
	"1.2.840.10008.5.1.4.1.1.77.1.5.1", // Ophthalmic Photography 8 Bit: a referenced class
}

// TestDeidentificationRemapsInstanceUIDsOfEveryVendorRoot walks the UID
// roots a scan may carry: every instance UID (SOP instance, in the file
// meta and the dataset, study, series, frame of reference, dimension
// organisation, a referenced instance) goes through the keyed mapping,
// whatever its root, and none is left in the copy; DICOM's well-known
// UIDs alone are kept, unmapped.
func TestDeidentificationRemapsInstanceUIDsOfEveryVendorRoot(t *testing.T) {
	for _, v := range vendorUIDRoots {
		t.Run(v.root, func(t *testing.T) {
			u := func(n string) string { return v.root + "." + n }
			instance := []struct{ what, uid string }{
				{"SOP Instance UID", u("1")},
				{"Study Instance UID", u("2")},
				{"Series Instance UID", u("3")},
				{"Frame of Reference UID", u("4")},
				{"Dimension Organization UID", u("5")},
				{"Referenced SOP Instance UID", u("6")},
			}
			raw, _ := deviceScan(t, 16,
				txt(t, tag.MediaStorageSOPInstanceUID, instance[0].uid),
				txt(t, tag.SOPInstanceUID, instance[0].uid),
				txt(t, tag.StudyInstanceUID, instance[1].uid),
				txt(t, tag.SeriesInstanceUID, instance[2].uid),
				txt(t, tag.FrameOfReferenceUID, instance[3].uid),
				sq(t, tag.DimensionOrganizationSequence, itemOf(txt(t, tag.DimensionOrganizationUID, instance[4].uid))),
				sq(t, tag.OphthalmicFrameLocationSequence, itemOf(
					txt(t, tag.ReferencedSOPClassUID, wellKnownUIDs[2]),
					txt(t, tag.ReferencedSOPInstanceUID, instance[5].uid))),
			)
			for _, w := range wellKnownUIDs {
				if !bytes.Contains(raw, []byte(w)) {
					t.Fatalf("test scan: the device's scan lacks the well-known UID %s", w)
				}
			}
			scan, err := ParseScan(bytes.NewReader(raw), int64(len(raw)))
			if err != nil {
				t.Fatalf("the device's scan does not parse: %v", err)
			}
			mapped := map[string]string{}
			var out bytes.Buffer
			err = scan.WriteDeidentified(&out, Deidentification{PatientID: "pt-1", UID: func(s string) string {
				mapped[s] = DerivedUID("test-campus-key", s)
				return mapped[s]
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range instance {
				what, id := in.what, in.uid
				if mapped[id] == "" {
					t.Errorf("de-identification kept the %s %s (%s) instead of remapping it: a vendor's instance UID links the copy to the patient's record", what, id, v.who)
				}
				if bytes.Contains(out.Bytes(), []byte(id)) {
					t.Errorf("the de-identified copy still holds the device's %s %s (%s)", what, id, v.who)
				}
				if m := mapped[id]; m != "" && !bytes.Contains(out.Bytes(), []byte(m)) {
					t.Errorf("the de-identified copy lacks the remapped %s %s", what, m)
				}
			}
			for s := range mapped {
				if strings.HasPrefix(s, "1.2.840.10008.") {
					t.Errorf("de-identification remapped the well-known UID %s: a class or transfer syntax names no instance and must stay", s)
				}
			}
			for _, w := range wellKnownUIDs {
				if !bytes.Contains(out.Bytes(), []byte(w)) {
					t.Errorf("the de-identified copy lost the well-known UID %s", w)
				}
			}
			_, h, err := ReadDICOM(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatalf("the de-identified copy does not read back: %v", err)
			}
			if h.SOPInstanceUID != mapped[instance[0].uid] || h.StudyInstanceUID != mapped[instance[1].uid] ||
				h.SeriesInstanceUID != mapped[instance[2].uid] {
				t.Errorf("the copy reads back with instance UIDs %s / %s / %s, not the remapped ones", h.SOPInstanceUID, h.StudyInstanceUID, h.SeriesInstanceUID)
			}
		})
	}
}
