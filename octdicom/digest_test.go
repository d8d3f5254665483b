package octdicom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"octflow/imaging"
)

// instanceDigest is NewInstanceHash's digest of b, written in pieces of
// step bytes (a stream comes in reads of any size).
func instanceDigest(t *testing.T, b []byte, step int) string {
	t.Helper()
	h := NewInstanceHash()
	for len(b) > 0 {
		n := min(step, len(b))
		if _, err := h.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// withMeta is the Part 10 file raw with the meta element (0002,elem), a
// short-length text or UID, set to value (padded to even length with
// pad), or added in its place where raw has none, and its group length
// written again: what a router does when it writes the instance it
// received into a file of its own.
func withMeta(t *testing.T, raw []byte, elem uint16, value string, pad byte) []byte {
	t.Helper()
	if len(value)%2 == 1 {
		value += string(pad)
	}
	end := 144 + int(binary.LittleEndian.Uint32(raw[140:144]))
	var group []byte
	put := func() {
		group = append(append(group, 2, 0, byte(elem), byte(elem>>8)), vrOf(elem)...)
		group = append(append(group, byte(len(value)), byte(len(value)>>8)), value...)
	}
	found := false
	for at := 144; at < end; {
		e, n := binary.LittleEndian.Uint16(raw[at+2:]), 0
		hdr := 8
		switch string(raw[at+4 : at+6]) {
		case "OB", "OW", "UN", "SQ", "UT":
			n, hdr = int(binary.LittleEndian.Uint32(raw[at+8:])), 12
		default:
			n = int(binary.LittleEndian.Uint16(raw[at+6:]))
		}
		if e > elem && !found {
			put()
			found = true
		}
		if e == elem {
			put()
			found = true
		} else {
			group = append(group, raw[at:at+hdr+n]...)
		}
		at += hdr + n
	}
	if !found {
		put()
	}
	out := append([]byte(nil), raw[:140]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(group)))
	out = append(append(out, group...), raw[end:]...)
	return out
}

// vrOf is the VR of the meta elements withMeta sets.
func vrOf(elem uint16) string {
	if elem == 0x0013 {
		return "SH"
	}
	return "UI"
}

// The same instance written again by a router (another Implementation
// Class UID and Version Name, so another meta group length) has the
// same digest however the stream comes; another data set, or the same
// one declared in another transfer syntax, has another; what is not a
// Part 10 file is hashed whole.
func TestTheInstanceDigestIsOfTheDataSetNotTheFile(t *testing.T) {
	circle, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-2.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	var phantom bytes.Buffer
	if err := WriteDICOM(&phantom, imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 32, Cols: 16}).Volume,
		Header{SOPInstanceUID: "2.25.1"}); err != nil {
		t.Fatal(err)
	}
	for _, scan := range []struct {
		name string
		raw  []byte
	}{{"a real SPECTRALIS scan", circle}, {"a phantom", phantom.Bytes()}} {
		t.Run(scan.name, func(t *testing.T) {
			raw := scan.raw
			routed := withMeta(t, withMeta(t, raw, 0x0012, "1.2.276.0.7230010.3.0.3.6.7", 0), 0x0013, "OFFIS_DCMTK_367", ' ')
			if bytes.Equal(routed, raw) || len(routed) == len(raw) {
				t.Fatal("the router's file is not another file")
			}
			want := instanceDigest(t, raw, len(raw))
			for _, c := range []struct {
				name string
				b    []byte
				step int
				same bool
			}{
				{"read a byte at a time", raw, 1, true},
				{"read 100 bytes at a time", raw, 100, true},
				{"written again by a router", routed, 7, true},
				{"another transfer syntax declared", withMeta(t, raw, 0x0010, "1.2.840.10008.1.2", 0), 4096, false},
				{"another data set", append(append([]byte(nil), raw[:len(raw)-1]...), raw[len(raw)-1]^1), 4096, false},
				{"the meta information cut short", raw[:200], 3, false},
			} {
				if got := instanceDigest(t, c.b, c.step); (got == want) != c.same {
					t.Errorf("%s: digest %s, the scan's %s; want the same: %v", c.name, got, want, c.same)
				}
			}
			if sum := sha256.Sum256(raw); want == hex.EncodeToString(sum[:]) {
				t.Error("the digest is of the whole file")
			}
		})
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not DICOM", bytes.Repeat([]byte("not a DICOM object "), 20)},
		{"a preamble and DICM, no group length", append(make([]byte, 128), "DICMxxxxxxxxxxxxxxxx"...)},
		{"the meta information cut short", circle[:200]},
	} {
		sum := sha256.Sum256(append([]byte(wholeDomain), c.b...))
		if got := instanceDigest(t, c.b, 5); got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: digest %s, want the whole stream's", c.name, got)
		}
	}
}

// withSecondTransferSyntax is the Part 10 file raw with a second
// Transfer Syntax UID, value, right after the first, and its group
// length written again.
func withSecondTransferSyntax(t *testing.T, raw []byte, value string) []byte {
	t.Helper()
	if len(value)%2 == 1 {
		value += "\x00"
	}
	end := 144 + int(binary.LittleEndian.Uint32(raw[140:144]))
	var group []byte
	added := false
	for at := 144; at < end; {
		e, n, hdr := binary.LittleEndian.Uint16(raw[at+2:]), 0, 8
		switch string(raw[at+4 : at+6]) {
		case "OB", "OW", "UN", "SQ", "UT":
			n, hdr = int(binary.LittleEndian.Uint32(raw[at+8:])), 12
		default:
			n = int(binary.LittleEndian.Uint16(raw[at+6:]))
		}
		group = append(group, raw[at:at+hdr+n]...)
		if e == 0x0010 {
			group = append(group, 2, 0, 0x10, 0, 'U', 'I', byte(len(value)), byte(len(value)>>8))
			group = append(group, value...)
			added = true
		}
		at += hdr + n
	}
	if !added {
		t.Fatal("the file declares no transfer syntax")
	}
	out := append([]byte(nil), raw[:140]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(group)))
	return append(append(out, group...), raw[end:]...)
}

// A meta group that declares the transfer syntax twice is hashed with
// the first, the one the reader (PreScan, the parser) reads the data set
// in; and a stream hashed whole never shares a digest with a Part 10
// file whose transfer syntax and data set are that stream's bytes.
func TestTheInstanceDigestNamesTheSyntaxTheReaderReadsAndKeepsItsFormsApart(t *testing.T) {
	var phantom bytes.Buffer
	if err := WriteDICOM(&phantom, imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 32, Cols: 16}).Volume,
		Header{SOPInstanceUID: "2.25.1"}); err != nil {
		t.Fatal(err)
	}
	raw := phantom.Bytes()
	declared, err := PreScan(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	first, ok := transferSyntaxOf(raw[144 : 144+int(binary.LittleEndian.Uint32(raw[140:144]))])
	if !ok {
		t.Fatal("the phantom's meta information names no transfer syntax")
	}
	other := "1.2.840.10008.1.2" // implicit VR little endian
	if first == other {
		other = "1.2.840.10008.1.2.1"
	}
	twice := withSecondTransferSyntax(t, raw, other)
	d, err := PreScan(bytes.NewReader(twice), int64(len(twice)))
	d.Peak = declared.Peak // the second UID's bytes count toward it
	if err != nil || d != declared {
		t.Fatalf("the reader reads the file with two transfer syntaxes as %+v, %v; the file with one as %+v", d, err, declared)
	}
	want := instanceDigest(t, raw, len(raw))
	for _, c := range []struct {
		name string
		b    []byte
		same bool
	}{
		{"the first declared, another after it", twice, true},
		{"only the other declared", withMeta(t, raw, 0x0010, other, 0), false},
	} {
		if got := instanceDigest(t, c.b, 13); (got == want) != c.same {
			t.Errorf("%s: digest %s, the file's %s; want the same: %v", c.name, got, want, c.same)
		}
	}

	// The Part 10 form's input without its domain tag: the transfer
	// syntax, a zero byte, the data set. Sent as a stream of its own it
	// is not Part 10 and is hashed whole, to another digest.
	end := 144 + int(binary.LittleEndian.Uint32(raw[140:144]))
	bare := append(append([]byte(first), 0), raw[end:]...)
	if got := instanceDigest(t, bare, 4096); got == want {
		t.Errorf("a stream of the transfer syntax and data set has the Part 10 file's digest %s", got)
	}
	// And the other way: a stream hashed whole that begins as a Part 10
	// file would (a meta group over maxMetaBytes) is not the digest of
	// its own bytes alone.
	long := append(append([]byte(nil), raw[:140]...), binary.LittleEndian.AppendUint32(nil, maxMetaBytes+1)...)
	long = append(long, raw[144:]...)
	if sum := sha256.Sum256(long); instanceDigest(t, long, 100) == hex.EncodeToString(sum[:]) {
		t.Error("a stream hashed whole has the plain SHA-256 of its bytes, which a Part 10 input can equal")
	}
}

// FileMetaSOP names a Part 10 file by its meta information alone, and
// nothing that is not one.
func TestFileMetaSOPNamesAPart10FileByItsMetaInformation(t *testing.T) {
	var phantom bytes.Buffer
	if err := WriteDICOM(&phantom, imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 32, Cols: 16}).Volume,
		Header{SOPInstanceUID: "2.25.77"}); err != nil {
		t.Fatal(err)
	}
	raw := phantom.Bytes()
	for _, c := range []struct {
		name            string
		b               []byte
		class, instance string
		ok              bool
	}{
		{"an OCT file", raw, OphthalmicTomographySOPClass, "2.25.77", true},
		{"its meta information only", raw[:144+int(binary.LittleEndian.Uint32(raw[140:144]))], OphthalmicTomographySOPClass, "2.25.77", true},
		{"a UID that is none", withMeta(t, raw, 0x0003, "PATIENT NAME", ' '), "", "", false},
		{"cut in its meta information", raw[:160], "", "", false},
		{"not DICOM", bytes.Repeat([]byte("not a DICOM object "), 20), "", "", false},
		{"empty", nil, "", "", false},
	} {
		class, instance, ok := FileMetaSOP(bytes.NewReader(c.b))
		if class != c.class || instance != c.instance || ok != c.ok {
			t.Errorf("%s: %q %q %v, want %q %q %v", c.name, class, instance, ok, c.class, c.instance, c.ok)
		}
	}
}
