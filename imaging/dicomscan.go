package imaging

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"
)

// Limits of the pre-scan. A real OCT object nests its functional groups
// four deep (sequence, item, sequence, item) and holds a few thousand
// elements; these bounds leave ample room and stop a hostile file long
// before the parser's recursion or allocations could hurt the process.
const (
	maxNesting  = 16      // sequences and items open at once
	maxElements = 200_000 // elements outside the pixel data
)

// checkLengths walks a DICOM Part 10 stream element by element, before
// the parser sees it, and rejects what could make the parser exhaust the
// process: a declared value length that runs past the end of the data
// (the parser allocates it before reading), sequences nested deeper than
// maxNesting (the parser recurses into each, and a deep enough file
// overflows the stack, which no recover can catch), more than
// maxElements elements, and pixel data whose declared size (rows ×
// columns × frames × samples × bytes, in 64-bit arithmetic) is over the
// limit or differs from the pixel data actually present (the parser
// allocates the declared size). Sequences and items are entered, not
// skipped, so nested elements are checked too.
func checkLengths(r io.Reader, size int64) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var pos int64
	skip := func(n int64) error {
		m, err := br.Discard(int(n))
		pos += int64(m)
		return err
	}
	read := func(b []byte) error {
		n, err := io.ReadFull(br, b)
		pos += int64(n)
		return err
	}
	head := make([]byte, 132)
	if err := read(head); err != nil {
		return truncated(err)
	}
	if string(head[128:]) != "DICM" {
		return invalidf("not a DICOM file: no DICM prefix after the 128-byte preamble")
	}
	const undefined = 0xFFFFFFFF
	explicit := true
	// open holds the sequences and items entered: where each ends, or -1
	// for one of undefined length, which ends at its delimiter.
	var open []int64
	var geo pixelGeometry
	var buf [8]byte
	for elements := 0; pos < size; elements++ {
		for len(open) > 0 && open[len(open)-1] >= 0 && pos >= open[len(open)-1] {
			open = open[:len(open)-1]
		}
		if elements > maxElements {
			return invalidf("more than %d elements", maxElements)
		}
		if err := read(buf[:4]); err != nil {
			return truncated(err)
		}
		group, elem := binary.LittleEndian.Uint16(buf[0:]), binary.LittleEndian.Uint16(buf[2:])
		if group != 0x0002 && pos == 136 {
			return invalidf("no file meta information")
		}
		var vr string
		var vl uint32
		switch {
		case group == 0xFFFE: // item and delimiters: tag and a 4-byte length, no VR
			if err := read(buf[:4]); err != nil {
				return truncated(err)
			}
			vl = binary.LittleEndian.Uint32(buf[:4])
		case group == 0x0002 || explicit:
			if err := read(buf[:4]); err != nil {
				return truncated(err)
			}
			vr = string(buf[:2])
			switch vr {
			case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT", "UV":
				if err := read(buf[4:8]); err != nil {
					return truncated(err)
				}
				vl = binary.LittleEndian.Uint32(buf[4:8])
			default:
				vl = uint32(binary.LittleEndian.Uint16(buf[2:4]))
			}
		default:
			if err := read(buf[:4]); err != nil {
				return truncated(err)
			}
			vl = binary.LittleEndian.Uint32(buf[:4])
			// Implicit VR names no VR; the parser takes a sequence's from
			// its dictionary, and so does this walk.
			if info, err := tag.Find(tag.Tag{Group: group, Element: elem}); err == nil && len(info.VRs) > 0 && info.VRs[0] == "SQ" {
				vr = "SQ"
			}
		}
		if vl != undefined && int64(vl) > size-pos {
			return invalidf("element (%04x,%04x) claims %d bytes; %d remain", group, elem, vl, size-pos)
		}
		enter := func() error {
			end := int64(-1)
			if vl != undefined {
				end = pos + int64(vl)
			}
			if open = append(open, end); len(open) > maxNesting {
				return invalidf("sequences nested more than %d deep", maxNesting/2)
			}
			return nil
		}
		switch {
		case group == 0xFFFE && (elem == 0xE00D || elem == 0xE0DD): // item or sequence delimiter
			if len(open) > 0 && open[len(open)-1] < 0 {
				open = open[:len(open)-1]
			}
			continue
		case group == 0xFFFE || vr == "SQ":
			if err := enter(); err != nil {
				return err
			}
			continue // enter items and sequences
		case group == 0x7FE0 && elem == 0x0010 && vl == undefined:
			return invalidf("compressed (encapsulated) pixel data is not supported")
		case vl == undefined:
			if explicit && vr != "UN" {
				return invalidf("element (%04x,%04x) has an undefined length", group, elem)
			}
			if err := enter(); err != nil {
				return err
			}
			continue // implicit VR or UN: a sequence of unknown type
		}
		if group == 0x0002 && elem == 0x0010 { // transfer syntax
			ts := make([]byte, vl)
			if err := read(ts); err != nil {
				return truncated(err)
			}
			if err := checkTransferSyntax(trimUID(ts)); err != nil {
				return err
			}
			explicit = trimUID(ts) == uid.ExplicitVRLittleEndian
			continue
		}
		if len(open) == 0 && group == 0x0028 && vl <= 16 {
			// Image geometry: read it, to check the pixel data against it.
			v := make([]byte, vl)
			if err := read(v); err != nil {
				return truncated(err)
			}
			geo.note(elem, v)
			continue
		}
		if len(open) == 0 && group == 0x7FE0 && elem == 0x0010 {
			if err := geo.check(int64(vl)); err != nil {
				return err
			}
		}
		if err := skip(int64(vl)); err != nil {
			return truncated(err)
		}
	}
	return nil
}

// pixelGeometry is what the image pixel module declares.
type pixelGeometry struct {
	rows, cols, bits, samples, frames uint64
}

func (g *pixelGeometry) note(elem uint16, v []byte) {
	us := func() uint64 {
		if len(v) < 2 {
			return 0
		}
		return uint64(binary.LittleEndian.Uint16(v))
	}
	switch elem {
	case 0x0002:
		g.samples = us()
	case 0x0008: // Number of Frames, an integer string
		n, err := strconv.ParseUint(strings.TrimSpace(strings.TrimRight(string(v), "\x00")), 10, 32)
		if err == nil {
			g.frames = n
		}
	case 0x0010:
		g.rows = us()
	case 0x0011:
		g.cols = us()
	case 0x0100:
		g.bits = us()
	}
}

// check compares the declared pixel data size with its element's length.
func (g *pixelGeometry) check(length int64) error {
	frames, samples := max(g.frames, 1), max(g.samples, 1)
	if g.rows == 0 || g.cols == 0 || (g.bits != 8 && g.bits != 16) {
		return invalidf("pixel data before a complete image description (rows %d, columns %d, %d bits allocated)", g.rows, g.cols, g.bits)
	}
	samplesDeclared := g.rows * g.cols * frames * samples
	if samplesDeclared > maxSamples {
		return invalidf("volume of %d×%d×%d samples is over the limit of %d", frames, g.rows, g.cols, uint64(maxSamples))
	}
	want := samplesDeclared * g.bits / 8
	if uint64(length) != want && uint64(length) != want+1 { // +1: an odd length padded to even
		return invalidf("the header declares %d bytes of pixel data (%d×%d×%d, %d bits); the file holds %d", want, frames, g.rows, g.cols, g.bits, length)
	}
	return nil
}

// checkTransferSyntax accepts the uncompressed little-endian encodings.
func checkTransferSyntax(ts string) error {
	if ts != uid.ExplicitVRLittleEndian && ts != uid.ImplicitVRLittleEndian {
		return invalidf("transfer syntax %q is not supported (want uncompressed little endian)", ts)
	}
	return nil
}

func trimUID(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == 0 || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return string(b)
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("truncated DICOM object")
	}
	return fmt.Errorf("read DICOM: %w", err)
}
