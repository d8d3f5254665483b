package octdicom

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/big"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"

	"octflow/imaging"
)

func TestDICOMRoundTripKeepsGeometryAndSamples(t *testing.T) {
	p := smallPhantom(1, false)
	var buf bytes.Buffer
	h := Header{SOPInstanceUID: "1.2.3.4", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.5", PatientID: "PAT-42"}
	if err := WriteDICOM(&buf, p.Volume, h); err != nil {
		t.Fatal(err)
	}
	got, gotH, err := ReadDICOM(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if gotH != h {
		t.Errorf("header = %+v, want %+v", gotH, h)
	}
	if got.Frames != 13 || got.Rows != 248 || got.Cols != 256 || got.Laterality != "OD" {
		t.Fatalf("geometry = %d×%d×%d %s", got.Frames, got.Rows, got.Cols, got.Laterality)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"axial", got.Spacing.AxialUm, p.Volume.Spacing.AxialUm},
		{"lateral", got.Spacing.LateralUm, p.Volume.Spacing.LateralUm},
		{"frame", got.Spacing.FrameUm, p.Volume.Spacing.FrameUm},
	} {
		if math.Abs(c.got-c.want) > 1e-3 {
			t.Errorf("%s spacing = %v µm, want %v", c.name, c.got, c.want)
		}
	}
	for i := 0; i < len(got.Data); i += 997 {
		if want := float32(math.Round(float64(min(p.Volume.Data[i], 65535)))); got.Data[i] != want {
			t.Fatalf("sample %d = %v, want %v", i, got.Data[i], want)
		}
	}
}

func TestReadDICOMRejectsBadVolumes(t *testing.T) {
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 2, Frames: 3, Rows: 64, Cols: 32}).Volume
	h := Header{SOPInstanceUID: "1.2"}
	var good bytes.Buffer
	if err := WriteDICOM(&good, v, h); err != nil {
		t.Fatal(err)
	}
	// edited writes v's object with one element replaced (or dropped, for
	// a nil value).
	edited := func(t tag.Tag, data any) []byte {
		var elems []dicomElement
		for _, e := range otElements(v, h) {
			if e.t == t {
				if data == nil {
					continue
				}
				e.data = data
			}
			elems = append(elems, e)
		}
		var buf bytes.Buffer
		if err := writeElements(&buf, elems); err != nil {
			return nil // an unwritable object is as bad for the reader
		}
		return buf.Bytes()
	}
	cases := []struct {
		name, reason string
		data         []byte
	}{
		{"empty", "", nil},
		{"not dicom", "not a DICOM file", bytes.Repeat([]byte("hello"), 100)},
		{"truncated pixel data", "", good.Bytes()[:good.Len()-500]},
		{"truncated header", "", good.Bytes()[:200]},
		{"wrong SOP class", "SOP class", edited(tag.SOPClassUID, []string{"1.2.840.10008.5.1.4.1.1.7"})},
		{"wrong modality", "modality", edited(tag.Modality, []string{"CT"})},
		{"no frames", "", edited(tag.PixelData, nil)},
		{"more frames in the header", "", edited(tag.NumberOfFrames, []string{"4"})},
		{"inconsistent dimensions", "", edited(tag.Rows, []int{65})},
		{"compressed transfer syntax", "transfer syntax", edited(tag.TransferSyntaxUID, []string{"1.2.840.10008.1.2.4.50"})}, // JPEG Baseline
		{"big endian transfer syntax", "transfer syntax", edited(tag.TransferSyntaxUID, []string{uid.ExplicitVRBigEndian})},
		{"colour samples", "", edited(tag.SamplesPerPixel, []int{3})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadDICOM(bytes.NewReader(c.data), int64(len(c.data)))
			if !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Fatalf("err = %v, want ErrInvalidVolume", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("err = %v, want the reason %q", err, c.reason)
			}
		})
	}
}

// FuzzReadDICOM feeds the reader damaged objects: it must never panic or
// hang, and must either reject the input as an invalid volume or return a
// volume that is consistent.
func FuzzReadDICOM(f *testing.F) {
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 9, Frames: 2, Rows: 16, Cols: 8}).Volume
	var buf bytes.Buffer
	if err := WriteDICOM(&buf, v, Header{SOPInstanceUID: "1.2", PatientID: "P"}); err != nil {
		f.Fatal(err)
	}
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:300])
	f.Add([]byte("DICM"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The pre-scan refuses pixel data over the limit before the parser
		// allocates it; a header that declares such a volume with no
		// pixel data passes it (nothing is allocated), and the reader
		// must then refuse the object: no volume over the limit is read.
		overLimit := false
		if d, err := PreScan(bytes.NewReader(data), int64(len(data))); err == nil {
			overLimit = exactProduct(uint64(d.Frames), uint64(d.Rows), uint64(d.Cols)).Cmp(big.NewInt(maxSamples)) > 0
		}
		got, _, err := ReadDICOM(bytes.NewReader(data), int64(len(data)))
		if overLimit && err == nil {
			t.Fatalf("read a volume whose header declares over %d samples", maxSamples)
		}
		if err != nil {
			if !errors.Is(err, imaging.ErrInvalidVolume) {
				t.Fatalf("err = %v, want ErrInvalidVolume for any bad input", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid volume: %v", err)
		}
	})
}

// failingReader serves some bytes, then fails as a dropped connection
// would; it can seek within the bytes it has.
type failingReader struct {
	data []byte
	pos  int
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.pos >= len(f.data) {
		return 0, f.err
	}
	n := copy(p, f.data[f.pos:])
	f.pos += n
	return n, nil
}

func (f *failingReader) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekStart {
		return 0, errors.New("failingReader seeks from the start only")
	}
	f.pos = int(offset)
	return offset, nil
}

func TestReadDICOMReportsASourceFailureAsSuchNotAsABadVolume(t *testing.T) {
	p := smallPhantom(3, false)
	var buf bytes.Buffer
	if err := WriteDICOM(&buf, p.Volume, Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := ReadDICOM(&failingReader{data: buf.Bytes()[:buf.Len()/2], err: context.Canceled}, int64(buf.Len()))
	if !errors.Is(err, context.Canceled) || errors.Is(err, imaging.ErrInvalidVolume) {
		t.Fatalf("err = %v, want the source's error and not ErrInvalidVolume", err)
	}
}

// A parse must leave nothing behind: the DICOM library's nested tag search
// parks a goroutine holding the whole dataset, pixel data included, when
// it stops early, so every scan read kept its volume for good.
func TestReadingScansLeavesNoGoroutineHoldingThem(t *testing.T) {
	v := imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 3, Rows: 64, Cols: 32}).Volume
	var buf bytes.Buffer
	if err := WriteDICOM(&buf, v, Header{SOPInstanceUID: "1.2.3.4", PatientID: "PAT-7"}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const reads = 50
	for range reads {
		s, err := ParseScan(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteDeidentified(io.Discard, Deidentification{PatientID: "pt-7", UID: func(string) string { return "2.25.7" }}); err != nil {
			t.Fatal(err)
		}
	}
	// Frame workers may still be winding down; a leak grows with reads.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("%d goroutines after %d reads, %d before", after, reads, before)
	}
}

// TestPixelEncodingReadsWhatTheDICOMSays: stored bits, sign, the
// Modality LUT and MONOCHROME1 all turn into levels where brighter is
// more reflective and the lowest is 0.
func TestPixelEncodingReadsWhatTheDICOMSays(t *testing.T) {
	for _, c := range []struct {
		name string
		e    pixelEncoding
		raw  []uint32
		want []float32
	}{
		{"unsigned 16", pixelEncoding{mask: 0xffff, slope: 1, lo: 0, hi: 65535}, []uint32{0, 1000, 65535}, []float32{0, 1000, 65535}},
		{"12 bits stored in 16", pixelEncoding{mask: 0xfff, slope: 1, lo: 0, hi: 4095}, []uint32{0xf123, 0x0fff}, []float32{0x123, 4095}},
		{"signed 16", pixelEncoding{mask: 0xffff, signBit: 0x8000, slope: 1, lo: -32768, hi: 32767}, []uint32{0x8000, 0xffff, 0, 32767},
			[]float32{0, 32767, 32768, 65535}},
		{"rescaled", pixelEncoding{mask: 0xff, slope: 2, icpt: -10, lo: -10, hi: 500}, []uint32{0, 5, 255}, []float32{0, 10, 510}},
		{"MONOCHROME1", pixelEncoding{mask: 0xff, slope: 1, lo: 0, hi: 255, invert: true}, []uint32{0, 55, 255}, []float32{255, 200, 0}},
	} {
		for i, r := range c.raw {
			if got := c.e.value(r); got != c.want[i] {
				t.Errorf("%s: stored %#x read as %v, want %v", c.name, r, got, c.want[i])
			}
		}
	}
}
