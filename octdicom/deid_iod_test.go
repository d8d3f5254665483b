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

// The de-identified copy of a real scan is still a valid Ophthalmic
// Tomography Image: dciodvfy finds no error in it that the device's own
// object does not already have (attributes the profile empties or
// replaces keep their type and VR; nothing the IOD requires is dropped).
// Warnings accepted: Study Date, Study Time and Study ID are empty (Type
// 2, emptied by the profile's action Z), which only a DICOMDIR would
// want.
func TestDeidentifiedRealScansAddNoIODError(t *testing.T) {
	if _, err := exec.LookPath("dciodvfy"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dciodvfy missing: .ci/run should have installed dicom3tools")
		}
		t.Skip("dciodvfy not installed (apt-get install dicom3tools)")
	}
	files, err := filepath.Glob(filepath.Join(realData, "*.dcm"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real scans: %v", err)
	}
	// A UID's replacement as the gateway makes it: 2.25 and a hash.
	d := Deidentification{PatientID: "pt-0123456789abcdef01234567", UID: func(uid string) string {
		sum := sha256.Sum256([]byte(uid))
		return "2.25." + strconv.FormatUint(binary.BigEndian.Uint64(sum[:8]), 10)
	}}
	for _, src := range files {
		t.Run(filepath.Base(src), func(t *testing.T) {
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
			if err := scan.WriteDeidentified(&copy, d); err != nil {
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
		})
	}
}
