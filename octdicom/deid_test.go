package octdicom

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"octflow/imaging"
)

// smallPhantom is a reduced cube (the device's 6 × 6 mm field, fewer
// samples), so that the tests stay quick.
func smallPhantom(seed uint64, fluid bool) *imaging.Phantom {
	return imaging.NewPhantom(imaging.PhantomOptions{Seed: seed, Frames: 13, Rows: 248, Cols: 256, Fluid: fluid})
}

// identified is a scan as a device writes it, with the patient and the
// visit named.
func identified(t *testing.T) ([]byte, *imaging.Phantom, Header) {
	t.Helper()
	p := smallPhantom(5, false)
	h := Header{SOPInstanceUID: "1.3.6.1.4.1.9590.100.1.2.1111", StudyInstanceUID: "1.3.6.1.4.1.9590.100.1.2.2222",
		SeriesInstanceUID: "1.3.6.1.4.1.9590.100.1.2.3333", PatientID: "MRN-4471982",
		Identity: &DeviceIdentity{PatientName: "DOE^JANE^Q", PatientBirthDate: "19580214", OtherPatientIDs: "NHS-943 476 5919",
			AccessionNumber: "ACC-20261130-0042", InstitutionName: "St Elsewhere Eye Hospital", ReferringPhysician: "HOUSE^GREGORY",
			OperatorsName: "NURSE^RATCHED", StudyDescription: "Jane Doe follow-up, left eye", StudyDate: "20261130",
			DeviceSerialNumber: "SN-77-1234"}}
	var buf bytes.Buffer
	if err := WriteDICOM(&buf, p.Volume, h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), p, h
}

// identifyingValues are the values of h no de-identified copy may hold.
func identifyingValues(h Header) []string {
	id := h.Identity
	return []string{h.PatientID, h.SOPInstanceUID, h.StudyInstanceUID, h.SeriesInstanceUID, id.PatientName, "DOE", "JANE",
		id.PatientBirthDate, id.OtherPatientIDs, id.AccessionNumber, id.InstitutionName, id.ReferringPhysician, "HOUSE",
		id.OperatorsName, id.StudyDescription, id.StudyDate, id.DeviceSerialNumber}
}

func TestDeidentifiedCopyKeepsTheImageAndNoneOfTheIdentity(t *testing.T) {
	raw, p, h := identified(t)
	scan, err := ParseScan(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	remapped := map[string]string{}
	err = scan.WriteDeidentified(&out, Deidentification{PatientID: "pt-5f3c9a", UID: func(u string) string {
		r := "2.25." + strings.Repeat("7", len(remapped)+1)
		remapped[u] = r
		return r
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range identifyingValues(h) {
		if bytes.Contains(out.Bytes(), []byte(v)) {
			t.Errorf("the de-identified copy still holds %q", v)
		}
	}
	for _, want := range []string{"pt-5f3c9a", "YES", "113100", "Basic Application Confidentiality Profile"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the de-identified copy lacks %q", want)
		}
	}
	// Every instance UID went through the mapping, the SOP instance's in
	// the file meta and the dataset alike.
	for _, u := range []string{h.SOPInstanceUID, h.StudyInstanceUID, h.SeriesInstanceUID} {
		if remapped[u] == "" {
			t.Errorf("UID %s was not remapped", u)
		}
	}
	back, bh, err := ReadDICOM(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatalf("the de-identified copy does not read back: %v", err)
	}
	if bh.PatientID != "pt-5f3c9a" || bh.SOPInstanceUID != remapped[h.SOPInstanceUID] || bh.Identity != nil {
		t.Errorf("read back header %+v", bh)
	}
	if back.Frames != p.Volume.Frames || back.Rows != p.Volume.Rows || back.Cols != p.Volume.Cols ||
		back.Spacing != scan.Volume.Spacing || back.Laterality != scan.Volume.Laterality {
		t.Fatalf("geometry changed: %d×%d×%d %+v %s", back.Frames, back.Rows, back.Cols, back.Spacing, back.Laterality)
	}
	for i, x := range scan.Volume.Data {
		if back.Data[i] != x {
			t.Fatalf("sample %d changed: %v → %v", i, x, back.Data[i])
		}
	}
}

func TestDeidentifiedRealScansReadBackTheSame(t *testing.T) {
	for _, name := range []string{"spectralis-circle-2.dcm", "spectralis-circle-4.dcm"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(realData, name))
			if err != nil {
				t.Fatal(err)
			}
			scan, err := ParseScan(bytes.NewReader(raw), int64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := scan.WriteDeidentified(&out, Deidentification{PatientID: "pt-1", UID: func(u string) string { return "2.25.42" }}); err != nil {
				t.Fatal(err)
			}
			// The device's dates (reduced to the year), series description
			// and software version too.
			for _, v := range []string{"REALDATA-0001", "ANONYMOUS", "HEYEX", "uint8 = round", "20170101", "Real Spectralis", "HSF-OCT-103"} {
				if bytes.Contains(out.Bytes(), []byte(v)) {
					t.Errorf("the de-identified copy still holds %q", v)
				}
			}
			back, _, err := ReadDICOM(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatalf("does not read back: %v", err)
			}
			if back.Spacing != scan.Volume.Spacing || back.Rows != 496 || back.Cols != 768 || back.Laterality != "OD" {
				t.Errorf("read back %d×%d %+v %s, want the original's %+v", back.Rows, back.Cols, back.Spacing, back.Laterality, scan.Volume.Spacing)
			}
			if !slices.Equal(back.Data, scan.Volume.Data) {
				t.Error("samples changed")
			}
		})
	}
}

// TestDeidentifyingAnAttributeOfTheWrongVR: a device labels an attribute
// with a value representation the standard does not allow for it. The
// copy writes it with the standard's when its value reads as one, leaves
// it out when it cannot, and reads back as the same volume either way.
func TestDeidentifyingAnAttributeOfTheWrongVR(t *testing.T) {
	raw, _, _ := identified(t)
	for _, c := range []struct {
		name     string
		element  []byte // group and element, little endian
		vr, into string
		want     string // the VR the copy holds; "" for none
	}{
		{"an unsigned short labelled signed", []byte{0x28, 0, 0x02, 0x01}, "US", "SS", "US"},
		{"a code string labelled with no VR there is", []byte{0x08, 0, 0x60, 0}, "CS", "ZZ", "CS"},
		{"an unsigned short labelled with bytes that are no VR", []byte{0x28, 0, 0x02, 0x01}, "US", "U\xff", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := bytes.Index(raw, append(slices.Clone(c.element), c.vr...))
			if at < 0 {
				t.Fatalf("the scan has no %x %s", c.element, c.vr)
			}
			bad := slices.Clone(raw)
			copy(bad[at+4:], c.into)
			scan, err := ParseScan(bytes.NewReader(bad), int64(len(bad)))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := scan.WriteDeidentified(&out, Deidentification{PatientID: "pt-1", UID: func(string) string { return "2.25.42" }}); err != nil {
				t.Fatalf("de-identify: %v", err)
			}
			held := bytes.Contains(out.Bytes(), append(slices.Clone(c.element), c.want...))
			if c.want != "" && !held {
				t.Errorf("the copy does not hold %x as %s", c.element, c.want)
			}
			if c.want == "" && bytes.Contains(out.Bytes(), c.element) {
				t.Errorf("the copy still holds %x", c.element)
			}
			back, _, err := ReadDICOM(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatalf("does not read back: %v", err)
			}
			if !slices.Equal(back.Data, scan.Volume.Data) {
				t.Error("samples changed")
			}
		})
	}
}

// TestAFailingDestinationIsNotAnInvalidScan: the copy's writer failing
// is an I/O error to retry, not the scan's fault.
func TestAFailingDestinationIsNotAnInvalidScan(t *testing.T) {
	raw, _, _ := identified(t)
	scan, err := ParseScan(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	err = scan.WriteDeidentified(failingWriter{}, Deidentification{PatientID: "pt-1", UID: func(string) string { return "2.25.42" }})
	if !errors.Is(err, errDiskFull) || errors.Is(err, imaging.ErrInvalidVolume) {
		t.Fatalf("got %v, want the destination's error and not an invalid volume", err)
	}
}

var errDiskFull = errors.New("no space left on device")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }
