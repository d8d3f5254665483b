package octdicom

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
)

// realScan is a real SPECTRALIS circle scan of the repository (its
// identity is a stand-in, as every scan in the repository's).
// realData holds the real scans in the repository (the image analysis's
// tests read them too).
const realData = "../imaging/testdata/realdata"

const realScan = realData + "/spectralis-circle-2.dcm"

func TestReadIdentityReadsTheOriginalsHeader(t *testing.T) {
	b, err := os.ReadFile(realScan)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ReadIdentity(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{
		PatientName: "ANONYMOUS^REALDATA", PatientID: "REALDATA-0001",
		StudyInstanceUID: "1.2.826.0.1.3680043.8.498.13019889701938346699576145289637688233",
		StudyDate:        "20170101", StudyTime: "000000", StudyID: "1",
		StudyDescription:  "Real Spectralis .vol converted to OPT",
		SeriesInstanceUID: "1.2.826.0.1.3680043.8.498.22208324819888842538696623986326749440",
		SOPClassUID:       OphthalmicTomographySOPClass,
		SOPInstanceUID:    "1.2.826.0.1.3680043.8.498.71553124473104354556069134516105865697",
		Laterality:        "R",
		// The segmentation's frame of reference (results.Segmentation).
		FrameOfReferenceUID: "1.2.826.0.1.3680043.8.498.62812609505933173500998095656085945223",
	}
	if !reflect.DeepEqual(id, want) {
		t.Errorf("identity\n got %+v\nwant %+v", id, want)
	}
}

func TestReadIdentityOfAWrittenScanKeepsWhatTheDeviceWrote(t *testing.T) {
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	p.Volume.Laterality = "OS"
	var buf bytes.Buffer
	h := Header{SOPInstanceUID: "1.2.3.1", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.4", PatientID: "PAT-77",
		Identity: &DeviceIdentity{PatientName: "Doe^John", PatientBirthDate: "19610203", AccessionNumber: "ACC-9",
			ReferringPhysician: "Who^Doctor", StudyDate: "20261130", TimezoneOffset: "+0100",
			RequestedProcedureID: "RP-9", ScheduledProcedureStepID: "SPS-9"}}
	if err := WriteDICOM(&buf, p.Volume, h); err != nil {
		t.Fatal(err)
	}
	id, err := ReadIdentity(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{PatientName: "Doe^John", PatientID: "PAT-77", PatientBirthDate: "19610203", AccessionNumber: "ACC-9",
		ReferringPhysicianName: "Who^Doctor", StudyDate: "20261130", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.4",
		SOPClassUID: OphthalmicTomographySOPClass, SOPInstanceUID: "1.2.3.1", Laterality: "L", TimezoneOffset: "+0100",
		Requests: []Request{{AccessionNumber: "ACC-9", RequestedProcedureID: "RP-9", ScheduledProcedureStepID: "SPS-9"}}}
	if !reflect.DeepEqual(id, want) {
		t.Errorf("identity\n got %+v\nwant %+v", id, want)
	}
}

func TestReadIdentityRefusesWhatCannotBeFiledBack(t *testing.T) {
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	var noUIDs bytes.Buffer
	if err := WriteDICOM(&noUIDs, p.Volume, Header{SOPInstanceUID: "1.2.3.1"}); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(realScan)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the Patient ID's value, which the library would quote.
	cut := orig[:bytes.Index(orig, []byte("REALDATA-0001"))+4]
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"not DICOM", []byte("not a DICOM object at all, just text"), nil},
		{"no study or series UID", noUIDs.Bytes(), ErrNoIdentity},
		{"cut inside the patient's ID", cut, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadIdentity(bytes.NewReader(c.b), int64(len(c.b)))
			if err == nil {
				t.Fatal("read an identity")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "REAL") || strings.Contains(err.Error(), "ANONYMOUS") {
				t.Errorf("the error quotes the scan: %v", err)
			}
		})
	}
}

// TestReadIdentityReadsTheOrders reads a header's Request Attributes
// Sequence: each item's accession number, requested procedure (ID,
// description, code) and scheduled step, at most maxRequests of them;
// an item naming nothing is no order, a code lacking its meaning no
// code.
func TestReadIdentityReadsTheOrders(t *testing.T) {
	item := func(accession, procedure string, c *Elements) *Elements {
		it := &Elements{}
		if accession != "" {
			it.Str(tag.AccessionNumber, accession)
		}
		if procedure != "" {
			it.Str(tag.RequestedProcedureID, procedure)
			it.Str(tag.RequestedProcedureDescription, "OCT "+procedure)
		}
		if c != nil {
			it.Seq(tag.RequestedProcedureCodeSequence, c)
		}
		return it
	}
	noMeaning := &Elements{}
	noMeaning.Str(tag.CodeValue, "X1")
	noMeaning.Str(tag.CodingSchemeDesignator, "99IHE")
	for _, c := range []struct {
		name  string
		items []*Elements
		want  []Request
	}{
		{"one order with its code", []*Elements{item("A-1", "P-1", Code("OCT-MAC", "99IHE", "OCT Makula"))},
			[]Request{{AccessionNumber: "A-1", RequestedProcedureID: "P-1", RequestedProcedureDescription: "OCT P-1",
				RequestedProcedureCode: CodedEntry{"OCT-MAC", "99IHE", "OCT Makula"}}}},
		{"an empty item and a code without its meaning", []*Elements{item("", "", nil), item("", "P-2", noMeaning)},
			[]Request{{RequestedProcedureID: "P-2", RequestedProcedureDescription: "OCT P-2"}}},
		{"more orders than are kept", func() []*Elements {
			var out []*Elements
			for i := range maxRequests + 3 {
				out = append(out, item(fmt.Sprintf("A-%d", i), "", nil))
			}
			return out
		}(), func() []Request {
			var out []Request
			for i := range maxRequests {
				out = append(out, Request{AccessionNumber: fmt.Sprintf("A-%d", i)})
			}
			return out
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Elements{}
			e.Str(tag.SOPClassUID, OphthalmicTomographySOPClass)
			e.Str(tag.SOPInstanceUID, "1.2.3.1")
			e.Str(tag.StudyInstanceUID, "1.2.3")
			e.Str(tag.SeriesInstanceUID, "1.2.3.4")
			e.Seq(tag.RequestAttributesSequence, c.items...)
			b, err := EncodePart10(e, OphthalmicTomographySOPClass, "1.2.3.1")
			if err != nil {
				t.Fatal(err)
			}
			id, err := ReadIdentity(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(id.Requests, c.want) {
				t.Errorf("requests\n got %+v\nwant %+v", id.Requests, c.want)
			}
		})
	}
}
