package octdicom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// dciodvfyErrors runs dicom3tools' dciodvfy, which checks an object
// against its IOD, and returns its error lines, sorted and deduplicated.
func dciodvfyErrors(t *testing.T, path string) []string {
	t.Helper()
	// dciodvfy exits non-zero when it finds an error; what it prints is
	// what counts.
	out, _ := exec.Command("dciodvfy", path).CombinedOutput()
	var errs []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "Error") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	if len(errs) == 0 && !bytes.Contains(out, []byte("Warning")) && !bytes.Contains(out, []byte("Ophthalmic")) {
		t.Fatalf("dciodvfy %s said nothing of its IOD: %s", path, out)
	}
	slices.Sort(errs)
	return slices.Compact(errs)
}

// needDciodvfy skips a test without dicom3tools' dciodvfy, and fails it
// in CI, where .ci/run installs it.
func needDciodvfy(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dciodvfy"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dciodvfy missing: .ci/run should have installed dicom3tools")
		}
		t.Skip("dciodvfy not installed (apt-get install dicom3tools)")
	}
}

// iodTestDeidentification replaces UIDs as the gateway does: 2.25 and a
// hash.
func iodTestDeidentification() Deidentification {
	return Deidentification{PatientID: "pt-0123456789abcdef01234567", UID: func(uid string) string {
		sum := sha256.Sum256([]byte(uid))
		return "2.25." + strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
	}}
}

// deidentifyAndCompare writes src's de-identified copy and fails t for
// every dciodvfy error the copy has that src has not; it returns the
// copy.
func deidentifyAndCompare(t *testing.T, src string) []byte {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	scan, err := ParseScan(f, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	var copy bytes.Buffer
	if err := scan.WriteDeidentified(&copy, iodTestDeidentification()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "deidentified.dcm")
	if err := os.WriteFile(out, copy.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	had := dciodvfyErrors(t, src)
	for _, e := range dciodvfyErrors(t, out) {
		if !slices.Contains(had, e) {
			t.Errorf("the de-identified copy has an error its source has not: %s", e)
		}
	}
	return copy.Bytes()
}

// The de-identified copy of a real scan is still a valid Ophthalmic
// Tomography Image: dciodvfy finds no error in it that the device's own
// object does not already have (attributes the profile empties or
// replaces keep their type and VR; nothing the IOD requires is dropped).
// Warnings accepted: Study Date, Study Time and Study ID are empty (Type
// 2, emptied by the profile's action Z), which only a DICOMDIR would
// want.
func TestDeidentifiedRealScansAddNoIODError(t *testing.T) {
	needDciodvfy(t)
	files, err := filepath.Glob(filepath.Join(realData, "*.dcm"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real scans: %v", err)
	}
	for _, src := range files {
		t.Run(filepath.Base(src), func(t *testing.T) { deidentifyAndCompare(t, src) })
	}
}

// vendorShapes are the modules device exports carry beyond the
// converted real scans, each as DCMTK's dcmodify inserts them: a dilated
// pupil with the agent that dilated it (which the IOD then requires), a
// concatenation with its synchronization, and the scan pattern with the
// anatomic reference point and volumetric flag it brings. (Vertex
// Distance, kept too, is newer than DCMTK 3.6.7 and dicom3tools here:
// dcmodify writes it as UN text, which the copy rightly drops as
// unreadable.) No attribute here identifies a person; every one must
// survive de-identification, UIDs remapped.
func vendorShapes() []struct {
	name   string
	insert []string
	kept   []tag.Tag
	uids   []tag.Tag // remapped
} {
	return []struct {
		name   string
		insert []string
		kept   []tag.Tag
		uids   []tag.Tag
	}{
		{"dilated pupil and its mydriatic agent", []string{
			"(0022,000d)=YES", "(0022,000e)=7",
			"(0022,0058)[0].(0022,001c)[0].(0008,0100)=373331007", "(0022,0058)[0].(0022,001c)[0].(0008,0102)=SCT",
			"(0022,0058)[0].(0022,001c)[0].(0008,0104)=Tropicamide", "(0022,0058)[0].(0022,004e)=1",
			"(0022,0058)[0].(0022,0042)[0].(0008,0100)=%", "(0022,0058)[0].(0022,0042)[0].(0008,0102)=UCUM",
			"(0022,0058)[0].(0022,0042)[0].(0008,0104)=%",
		}, []tag.Tag{tag.PupilDilated, tag.DegreeOfDilation, tag.MydriaticAgentSequence}, nil},
		{"a concatenation, synchronized", []string{
			"(0020,9161)=1.2.3.4.5.6", "(0020,9162)=1", "(0020,9163)=2", "(0020,9228)=0", "(0020,0242)=1.2.3.4.5.7",
			"(0020,0200)=1.2.3.4.5.8", "(0018,106a)=NO TRIGGER", "(0018,1800)=Y",
		}, []tag.Tag{tag.ConcatenationUID, tag.InConcatenationNumber, tag.InConcatenationTotalNumber, tag.ConcatenationFrameOffsetNumber,
			tag.SOPInstanceUIDOfConcatenationSource, tag.SynchronizationFrameOfReferenceUID, tag.SynchronizationTrigger, tag.AcquisitionTimeSynchronized},
			[]tag.Tag{tag.ConcatenationUID, tag.SOPInstanceUIDOfConcatenationSource, tag.SynchronizationFrameOfReferenceUID}},
		{"scan pattern and reference point", []string{
			"(0022,1618)[0].(0008,0100)=128280", "(0022,1618)[0].(0008,0102)=DCM", "(0022,1618)[0].(0008,0104)=Horizontal Line Scan",
			"(0022,1622)=YES", "(0022,1624)=0", "(0022,1626)=0",
		}, []tag.Tag{tag.ScanPatternTypeCodeSequence, tag.OphthalmicVolumetricPropertiesFlag,
			tag.OphthalmicAnatomicReferencePointXCoordinate, tag.OphthalmicAnatomicReferencePointYCoordinate}, nil},
	}
}

// The de-identified copy of a scan shaped like a device's export, with
// the modules the converted real scans lack (vendorShapes), keeps them:
// dciodvfy finds no error in it the source has not (a dilated pupil
// whose agent were dropped would have one), and each attribute is there,
// its UIDs remapped.
func TestDeidentifiedVendorShapedScansKeepTheirModules(t *testing.T) {
	needDciodvfy(t)
	dcmodify, err := exec.LookPath("dcmodify")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dcmodify missing: .ci/run should have installed dcmtk")
		}
		t.Skip("dcmodify not installed (apt-get install dcmtk)")
	}
	base, err := os.ReadFile(filepath.Join(realData, "spectralis-line-0.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range vendorShapes() {
		t.Run(shape.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "vendor.dcm")
			if err := os.WriteFile(src, base, 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"-nb"}
			for _, in := range shape.insert {
				args = append(args, "-i", in)
			}
			if out, err := exec.Command(dcmodify, append(args, src)...).CombinedOutput(); err != nil {
				t.Fatalf("dcmodify: %v: %s", err, out)
			}
			before, err := dicom.ParseFile(src, nil)
			if err != nil {
				t.Fatal(err)
			}
			copy := deidentifyAndCompare(t, src)
			after, err := dicom.Parse(bytes.NewReader(copy), int64(len(copy)), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range shape.kept {
				if _, err := after.FindElementByTag(at); err != nil {
					t.Errorf("%v dropped from the de-identified copy", at)
				}
			}
			for _, at := range shape.uids {
				was, err1 := before.FindElementByTag(at)
				now, err2 := after.FindElementByTag(at)
				if err1 != nil || err2 != nil || was.Value.String() == now.Value.String() {
					t.Errorf("%v: %v → %v, want it remapped", at, was, now)
				}
			}
		})
	}
}
