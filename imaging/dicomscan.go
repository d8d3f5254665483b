package imaging

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/suyashkumar/dicom/pkg/uid"
)

// checkLengths walks a DICOM Part 10 stream element by element and
// rejects one whose declared value length runs past the end of the data.
// The parser allocates a value's declared length before reading it, so
// without this walk a few hostile bytes could make it allocate gigabytes.
// Sequences and items are entered, not skipped, so nested elements are
// checked too; only the values of other elements are skipped.
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
	explicit := true
	var buf [8]byte
	for pos < size {
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
		}
		const undefined = 0xFFFFFFFF
		if vl != undefined && int64(vl) > size-pos {
			return invalidf("element (%04x,%04x) claims %d bytes; %d remain", group, elem, vl, size-pos)
		}
		switch {
		case group == 0xFFFE || vr == "SQ":
			continue // enter items and sequences
		case group == 0x7FE0 && elem == 0x0010 && vl == undefined:
			return invalidf("compressed (encapsulated) pixel data is not supported")
		case vl == undefined:
			if explicit && vr != "UN" {
				return invalidf("element (%04x,%04x) has an undefined length", group, elem)
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
		if err := skip(int64(vl)); err != nil {
			return truncated(err)
		}
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
