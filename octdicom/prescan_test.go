package octdicom

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
	"octflow/octdicom/hostile"
)

// TestPreScanPeakBoundsWhatReadingTakes reads and de-identifies scans as
// the gateway does and wants Declared.Peak at least what that allocated
// in all (TotalAlloc, garbage included, so at least the peak heap), and
// no more than three times it, so that a budget charged with Peak is not
// wasted.
func TestPreScanPeakBoundsWhatReadingTakes(t *testing.T) {
	type scan struct {
		name string
		data []byte
	}
	var scans []scan
	for _, bits := range []int{8, 16} {
		p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 16, Rows: 256, Cols: 128})
		var b bytes.Buffer
		if err := WriteDICOM(&b, p.Volume, Header{SOPInstanceUID: "1.2", PatientID: "P", Bits: bits,
			Identity: &DeviceIdentity{PatientName: `DOE^JANE\DOE^J`, StudyDescription: "follow-up"}}); err != nil {
			t.Fatal(err)
		}
		scans = append(scans, scan{"phantom-" + map[int]string{8: "8bit", 16: "16bit"}[bits], b.Bytes()})
	}
	real, _ := filepath.Glob(filepath.Join(realData, "*.dcm"))
	for _, path := range real {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scans = append(scans, scan{filepath.Base(path), data})
	}
	if raceEnabled {
		t.Skip("the race detector allocates with the code it watches; make test runs this without it")
	}
	for _, s := range scans {
		t.Run(s.name, func(t *testing.T) {
			d, err := PreScan(bytes.NewReader(s.data), int64(len(s.data)))
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			sc, err := ParseScan(bytes.NewReader(s.data), int64(len(s.data)))
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.WriteDeidentified(io.Discard, Deidentification{PatientID: "pt-1", UID: func(string) string { return "2.25.1" }}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			took := int64(after.TotalAlloc - before.TotalAlloc)
			samples := int64(d.Frames * d.Rows * d.Cols)
			t.Logf("%d×%d×%d %d-bit: took %d KB (%.1f B/sample), Peak %d KB (%.1f B/sample)",
				d.Frames, d.Rows, d.Cols, d.Bits, took>>10, float64(took)/float64(samples), d.Peak>>10, float64(d.Peak)/float64(samples))
			if d.Peak < took {
				t.Errorf("Peak %d KB is under the %d KB reading took", d.Peak>>10, took>>10)
			}
			if d.Peak > 3*took {
				t.Errorf("Peak %d KB is over three times the %d KB reading took", d.Peak>>10, took>>10)
			}
		})
	}
}

// TestPreScanReadsNumberOfFramesAsTheParser: every Number of Frames the
// parser reads is read the same, and the pre-scan refuses the rest.
func TestPreScanReadsNumberOfFramesAsTheParser(t *testing.T) {
	for _, c := range []struct {
		value string
		want  int // 0: refused
	}{
		{"3", 3}, {"+3", 3}, {"003", 3}, {" 3 ", 3}, {"3\x00", 3}, {`3\7`, 3}, {"+0000000003", 3},
		{"3" + string(make([]byte, 30)), 3}, // padded past any short read
		{"0", 0}, {"-3", 0}, {"+-3", 0}, {"3.0", 0}, {"x", 0}, {"", 0}, {" ", 0}, {`\3`, 0},
		{"4294967299", 0}, {"+1099511627779", 0}, {"99999999999999999999", 0},
	} {
		data := hostile.Frames(c.value, 8, 8, 8, 3*64)
		d, err := PreScan(bytes.NewReader(data), int64(len(data)))
		if c.want == 0 {
			if !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Errorf("Number of Frames %q: %v (%d frames), want refused", c.value, err, d.Frames)
			}
			continue
		}
		if err != nil || d.Frames != c.want {
			t.Errorf("Number of Frames %q: %d frames, %v; want %d", c.value, d.Frames, err, c.want)
			continue
		}
		ds, err := dicom.Parse(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatalf("Number of Frames %q: the parser: %v", c.value, err)
		}
		pix, _ := ds.FindElementByTag(tag.PixelData)
		if n := len(pix.Value.GetValue().(dicom.PixelDataInfo).Frames); n != d.Frames {
			t.Errorf("Number of Frames %q: the pre-scan says %d frames, the parser read %d", c.value, d.Frames, n)
		}
	}
}

// TestPreScanReadsPixelDataAgainstItsOwnDataset: an icon image in an
// item is read against the item's header, not the top level's, as the
// parser does; it is accepted when that header describes it and refused
// when not; and each image attribute must be one US, once.
func TestPreScanReadsPixelDataAgainstItsOwnDataset(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"icon image of one frame", hostile.NestedPixelData("1"), true},
		{"icon image of more frames than it holds", hostile.NestedPixelData("2"), false},
		{"one frame", hostile.Frames("1", 8, 8, 16, 128), true},
		{"one frame, said twice", hostile.FramesTwice("1", "1", 8, 8, 16, 128), false},
		{"rows as UL", hostile.RowsAsUL(8, 8, 64), false},
		{"a VR the parser gives a 2-byte length", hostile.VRDesync(), false},
		{"pixel data labelled SQ", hostile.PixelDataAsSequence(), false},
	} {
		_, err := PreScan(bytes.NewReader(c.data), int64(len(c.data)))
		if c.ok && err != nil || !c.ok && !errors.Is(err, imaging.ErrInvalidVolume) {
			t.Errorf("%s: %v, want accepted %v", c.name, err, c.ok)
		}
	}
}
