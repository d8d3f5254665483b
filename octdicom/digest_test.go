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
		sum := sha256.Sum256(c.b)
		if got := instanceDigest(t, c.b, 5); got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: digest %s, want the whole stream's", c.name, got)
		}
	}
}
