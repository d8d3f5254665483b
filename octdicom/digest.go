package octdicom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"strings"
)

// maxMetaBytes bounds the File Meta Information InstanceHash holds while
// it reads it; a real one is a few hundred bytes. A longer one is not
// read as such: the stream is hashed whole.
const maxMetaBytes = 64 << 10

// part10Domain and wholeDomain lead the bytes NewInstanceHash hashes,
// one for each form, so that the two forms' inputs never coincide.
const (
	part10Domain = "octflow instance digest: part 10 transfer syntax and data set\x00"
	wholeDomain  = "octflow instance digest: whole stream\x00"
)

// NewInstanceHash returns a SHA-256 of a DICOM instance as a stream
// brings it: of its Transfer Syntax UID and its data set, without the
// 128-byte preamble and the rest of the File Meta Information, which say
// how the file was made, not what the instance is, and which every
// router rewrites: Orthanc, taking a scan by C-STORE and forwarding it
// by STOW-RS, writes its own Implementation Class UID and Version Name
// before the same data set. So the same instance reaches octflow with
// the same digest whether a device sends it directly or through a
// router, and an instance whose data set differs (or is declared in
// another transfer syntax) has another. A stream that is not laid out
// as a Part 10 file (preamble, "DICM", group 0002 led by its group
// length) is hashed whole. The two forms are kept apart: each digest
// starts from a tag of its own (part10Domain, wholeDomain), so no stream
// hashed whole can share a digest with a Part 10 file's transfer syntax
// and data set. Where the meta information declares the transfer syntax
// more than once, the first counts, as it does for the reader (prescan,
// the parser): the digest names the syntax the data set is read in.
func NewInstanceHash() hash.Hash {
	return &instanceHash{h: sha256.New()}
}

// instanceHash is NewInstanceHash's hash: it holds the stream's start
// until it knows where the data set begins (raw), then hashes the
// transfer syntax and everything after the meta information.
type instanceHash struct {
	h hash.Hash
	// raw is the stream's start, held until the data set begins
	// (dataset) or the stream turns out not to be Part 10 (whole).
	raw           []byte
	dataset       bool
	whole         bool
	metaEnd       int // where the data set begins, once known
	transferKnown bool
}

func (x *instanceHash) Write(p []byte) (int, error) {
	if x.dataset || x.whole {
		return x.h.Write(p)
	}
	x.raw = append(x.raw, p...)
	x.settle()
	return len(p), nil
}

// settle decides, as far as raw allows, where the data set begins.
func (x *instanceHash) settle() {
	const head = 128 + 4 + 12 // preamble, "DICM", the group length element
	if !x.transferKnown {
		if len(x.raw) < head {
			return
		}
		if string(x.raw[128:132]) != "DICM" || !bytes.Equal(x.raw[132:140], []byte{2, 0, 0, 0, 'U', 'L', 4, 0}) {
			x.hashWhole()
			return
		}
		n := binary.LittleEndian.Uint32(x.raw[140:144])
		if n > maxMetaBytes {
			x.hashWhole()
			return
		}
		x.metaEnd, x.transferKnown = head+int(n), true
	}
	if len(x.raw) < x.metaEnd {
		return
	}
	ts, ok := transferSyntaxOf(x.raw[head:x.metaEnd])
	if !ok {
		x.hashWhole()
		return
	}
	x.h.Write([]byte(part10Domain))
	x.h.Write([]byte(ts))
	x.h.Write([]byte{0})
	x.h.Write(x.raw[x.metaEnd:])
	x.raw, x.dataset = nil, true
}

// hashWhole hashes the stream as it came, from its first byte.
func (x *instanceHash) hashWhole() {
	x.h.Write([]byte(wholeDomain))
	x.h.Write(x.raw)
	x.raw, x.whole = nil, true
}

// transferSyntaxOf is the first Transfer Syntax UID among meta, group
// 0002's elements after its group length (Explicit VR Little Endian, as
// PS3.10 writes them), trimmed as the reader trims it; ok is false where
// they do not read so or name none.
func transferSyntaxOf(meta []byte) (ts string, ok bool) {
	ok = walkMeta(meta, func(elem uint16, v string) {
		if elem == 0x0010 && ts == "" {
			ts = v
		}
	})
	return ts, ok && ts != ""
}

// walkMeta calls fn with each of meta's elements, group 0002's after its
// group length (Explicit VR Little Endian), and its value trimmed of
// padding; it says whether they all read so.
func walkMeta(meta []byte, fn func(elem uint16, value string)) bool {
	for len(meta) >= 8 {
		group, elem := binary.LittleEndian.Uint16(meta), binary.LittleEndian.Uint16(meta[2:])
		vr := string(meta[4:6])
		var n, at int
		switch vr {
		case "OB", "OW", "OF", "OD", "OL", "OV", "SQ", "SV", "UC", "UN", "UR", "UT", "UV":
			if len(meta) < 12 {
				return false
			}
			n, at = int(binary.LittleEndian.Uint32(meta[8:])), 12
		default:
			n, at = int(binary.LittleEndian.Uint16(meta[6:])), 8
		}
		if group != 2 || n < 0 || at+n > len(meta) {
			return false
		}
		fn(elem, strings.Trim(string(meta[at:at+n]), "\x00 "))
		meta = meta[at+n:]
	}
	return len(meta) == 0
}

// FileMetaSOP reads the SOP Class and SOP Instance UIDs a Part 10 file's
// meta information names (Media Storage SOP Class UID (0002,0002) and
// Media Storage SOP Instance UID (0002,0003)), without reading its data
// set: what a STOW-RS answer names an instance it refuses by, whatever
// its kind. ok is false where r is not laid out as a Part 10 file, its
// meta information does not read, or does not name both as valid UIDs.
func FileMetaSOP(r io.Reader) (sopClass, sopInstance string, ok bool) {
	const head = 128 + 4 + 12
	b := make([]byte, head)
	if _, err := io.ReadFull(r, b); err != nil ||
		string(b[128:132]) != "DICM" || !bytes.Equal(b[132:140], []byte{2, 0, 0, 0, 'U', 'L', 4, 0}) {
		return "", "", false
	}
	n := binary.LittleEndian.Uint32(b[140:144])
	if n > maxMetaBytes {
		return "", "", false
	}
	meta := make([]byte, n)
	if _, err := io.ReadFull(r, meta); err != nil {
		return "", "", false
	}
	read := walkMeta(meta, func(elem uint16, v string) {
		switch {
		case elem == 0x0002 && sopClass == "":
			sopClass = v
		case elem == 0x0003 && sopInstance == "":
			sopInstance = v
		}
	})
	if !read || !ValidUID(sopClass) || !ValidUID(sopInstance) {
		return "", "", false
	}
	return sopClass, sopInstance, true
}

// Sum appends the digest to b: of the data set as far as it came, or of
// the whole stream where its meta information did not end.
func (x *instanceHash) Sum(b []byte) []byte {
	if x.dataset || x.whole {
		return x.h.Sum(b)
	}
	h := sha256.New()
	h.Write([]byte(wholeDomain))
	h.Write(x.raw)
	return h.Sum(b)
}

func (x *instanceHash) Reset() {
	x.h.Reset()
	*x = instanceHash{h: x.h}
}

func (x *instanceHash) Size() int      { return sha256.Size }
func (x *instanceHash) BlockSize() int { return sha256.BlockSize }
