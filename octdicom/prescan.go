package octdicom

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

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
	// maxPeakBytes bounds Declared.Peak: what the largest volume the
	// reader accepts (maxSamples 16-bit samples) takes to read and
	// de-identify, and 1 GiB for the rest of the object.
	maxPeakBytes = maxSamples*(2*2+peakSample) + 1<<30
	// maxGeometryValue bounds the length of an image geometry value the
	// pre-scan reads; the standard's are 2 bytes (US) or 12 (IS).
	maxGeometryValue = 1 << 10
)

// What the parser (github.com/suyashkumar/dicom v1.1.0) and the
// de-identified copy allocate, in bytes, as Declared.Peak counts it;
// TestPreScanPeakBoundsWhatReadingTakes measures them against the real
// thing. Each element costs peakElement (its Element, value, tag and VR,
// its place in up to two datasets and in the copy); a text value
// peakText times its length (the bytes read, a charset's decoding, the
// string) and peakTextValue per value (each a string header); an integer
// or FD value peakNumber times its length (a []int or []float64 of
// length/2 capacity); an FL value peakFL times its length (each float
// goes through fmt); an OB, OW or UN value peakBytes times its length
// (OW is read word by word into a buffer); pixel data, per sample, its
// stored bytes twice (the parsed frames and the copy's buffer) and
// peakSample more: the float32 volume and the garbage of the parser and
// the writer, which handle each sample on its own (measured: ParseScan
// and WriteDeidentified allocate 33 bytes a sample in all for 8-bit
// scans, 38 for 16-bit, real SPECTRALIS scans and phantoms alike); each
// frame peakFrame more. Counting allocations, garbage included, they
// bound the heap from above.
const (
	peakElement   = 512
	peakText      = 8
	peakTextValue = 16
	peakNumber    = 4
	peakFL        = 16
	peakBytes     = 4
	peakSample    = 36
	peakFrame     = 256
	// peakFixed is the parser's buffers and the pre-scan's own.
	peakFixed = 4 << 20
)

// Declared is what a DICOM object declares of itself, as PreScan read
// it: the geometry of its (top-level) image and what reading it takes.
type Declared struct {
	// Frames, Rows, Cols and Bits (allocated per sample) are the image's,
	// zero where the object does not say; Frames is 1 when the object
	// has pixel data but no Number of Frames.
	Frames, Rows, Cols, Bits int
	// Peak estimates, from above, the bytes of memory ParseScan and then
	// WriteDeidentified take for the object: every element as the
	// parser allocates it, the volume, and the copy's pixel buffer.
	Peak int64
}

// PreScan walks a DICOM Part 10 stream of size bytes, before the parser
// sees it, exactly as the parser will (transfer syntax, VRs and value
// lengths, sequences and items, the datasets native pixel data is read
// against), and refuses with an error wrapping ErrInvalidVolume what
// could make the parser exhaust the process, and what it cannot read as
// the parser does:
//   - a value length that runs past the end of the data or of the
//     sequence or item that holds it (the parser allocates it before
//     reading); undefined lengths other than sequences';
//   - sequences nested deeper than maxNesting (the parser recurses into
//     each, and a deep enough file overflows the stack, which no recover
//     can catch), or more than maxElements elements;
//   - pixel data, at any depth, whose dataset (the top level, or the
//     item that holds it: an Icon Image Sequence holds small images of
//     its own) does not describe it exactly: Rows, Columns, Bits
//     Allocated and Samples per Pixel as one US each, Number of Frames
//     as the parser reads it (strconv.Atoi of its first value, so "+7"
//     and "007" are 7) and at least 1, no attribute twice, rows ×
//     columns × frames × samples (overflow-safe) within maxSamples, and
//     the element's length equal to that many samples' bytes;
//   - a total estimated cost (Declared.Peak) over maxPeakBytes.
func PreScan(r io.Reader, size int64) (Declared, error) {
	s := &preScanner{br: bufio.NewReaderSize(r, 64<<10), size: size}
	return s.run()
}

// checkLengths is PreScan for ParseScan, which needs only its verdict.
func checkLengths(r io.Reader, size int64) error {
	_, err := PreScan(r, size)
	return err
}

// preScanner reads a stream once, keeping nothing of it but the state
// PreScan needs.
type preScanner struct {
	br   *bufio.Reader
	pos  int64
	size int64
	// charset is set once the top level declares a Specific Character
	// Set, as the parser's decoding is.
	charset bool
	buf     [maxGeometryValue]byte
}

// scope is a sequence or a dataset being read: the top level or an
// item, each the dataset the parser reads its own pixel data against.
type scope struct {
	end int64 // where its defined length ends it; -1 for a delimiter
	seq bool
	geo pixelGeometry
}

const undefinedLength = 0xFFFFFFFF

func (s *preScanner) run() (Declared, error) {
	head, err := s.read(132)
	if err != nil {
		return Declared{}, err
	}
	if string(head[128:]) != "DICM" {
		return Declared{}, invalidf("not a DICOM file: no DICM prefix after the 128-byte preamble")
	}
	// The parser bounds the file meta information by its group length
	// and reads it as explicit VR; it takes the first Transfer Syntax
	// UID in it, and the rest of the file is read in that syntax.
	t, vr, vl, err := s.header(true)
	if err != nil {
		return Declared{}, err
	}
	if t != tag.FileMetaInformationGroupLength || vr != "UL" || vl != 4 {
		return Declared{}, invalidf("no file meta information group length")
	}
	v, err := s.read(4)
	if err != nil {
		return Declared{}, err
	}
	metaEnd := s.pos + int64(binary.LittleEndian.Uint32(v))
	if metaEnd > s.size {
		return Declared{}, invalidf("file meta information claims %d bytes; %d remain", metaEnd-s.pos, s.size-s.pos)
	}
	var (
		syntax   string // the transfer syntax, once read
		explicit bool
		peak     = int64(peakFixed + peakElement)
		top      Declared
	)
	open := []scope{{end: s.size}}
	for elements := 0; ; elements++ {
		for len(open) > 1 && open[len(open)-1].end == s.pos {
			open = open[:len(open)-1]
		}
		if s.pos == s.size {
			break
		}
		if elements > maxElements {
			return Declared{}, invalidf("more than %d elements", maxElements)
		}
		inMeta := s.pos < metaEnd
		if !inMeta && syntax == "" {
			return Declared{}, invalidf("no transfer syntax in the file meta information")
		}
		t, vr, vl, err := s.header(inMeta || explicit)
		if err != nil {
			return Declared{}, err
		}
		in := &open[len(open)-1]
		limit := in.end
		if inMeta {
			limit = metaEnd
		}
		if limit < 0 {
			limit = s.size
		}
		if s.pos > limit || vl != undefinedLength && int64(vl) > limit-s.pos {
			return Declared{}, invalidf("element %v claims %d bytes; %d remain where it is", t, vl, limit-s.pos)
		}
		if peak += peakElement; peak > maxPeakBytes {
			return Declared{}, invalidf("reading the object would take over %d MB", maxPeakBytes>>20)
		}
		kind := tag.GetVRKind(t, vr)
		if t == tag.SpecificCharacterSet && len(open) == 1 && !inMeta {
			s.charset = true // from the next element on
		}
		if t.Group == 0xFFFE && t != tag.Item {
			if vl != 0 {
				return Declared{}, invalidf("delimiter %v with a length", t)
			}
			item := t == tag.ItemDelimitationItem
			if t != tag.ItemDelimitationItem && t != tag.SequenceDelimitationItem || len(open) == 1 ||
				in.end >= 0 || in.seq == item {
				return Declared{}, invalidf("element %v out of place", t)
			}
			open = open[:len(open)-1]
			continue
		}
		if in.seq && kind != tag.VRItem {
			return Declared{}, invalidf("element %v in a sequence, outside any item", t)
		}
		enter := func(seq bool) error {
			if inMeta {
				return invalidf("sequence %v in the file meta information", t)
			}
			end := int64(-1)
			if vl != undefinedLength {
				end = s.pos + int64(vl)
			}
			if open = append(open, scope{end: end, seq: seq}); len(open) > maxNesting+1 {
				return invalidf("sequences nested more than %d deep", maxNesting/2)
			}
			return nil
		}
		switch {
		case t == tag.TransferSyntaxUID && inMeta && syntax == "":
			if syntax, err = s.transferSyntax(vr, vl); err == nil {
				explicit = syntax == uid.ExplicitVRLittleEndian
				peak += peakText * int64(vl)
			}
		case t.Group == 0x0028 && in.geo.watches(t.Element):
			var v []byte
			if v, err = s.value(vl); err == nil {
				err = in.geo.note(t.Element, vr, v)
				peak += peakText * int64(vl)
			}
		case kind == tag.VRItem:
			err = enter(false)
		case kind == tag.VRSequence || kind == tag.VRUnknown && vl == undefinedLength:
			err = enter(true) // a UN of undefined length is read as a sequence
		case vl == undefinedLength && kind == tag.VRPixelData:
			err = invalidf("compressed (encapsulated) pixel data is not supported")
		case vl == undefinedLength:
			err = invalidf("element %v has an undefined length", t)
		case kind == tag.VRPixelData:
			var samples, bytesPerSample, frames uint64
			if samples, bytesPerSample, frames, err = in.geo.check(vl); err == nil {
				peak += int64(samples*(2*bytesPerSample+peakSample) + frames*peakFrame)
				if len(open) == 1 && top.Rows == 0 {
					top = Declared{Frames: int(frames), Rows: int(in.geo.rows), Cols: int(in.geo.cols), Bits: int(in.geo.bits)}
				}
			}
			if err == nil {
				err = s.skip(int64(vl))
			}
		default:
			var cost int64
			cost, err = s.skipValue(kind, vl)
			peak += cost
		}
		if err != nil {
			return Declared{}, err
		}
		if peak > maxPeakBytes {
			return Declared{}, invalidf("reading the object would take over %d MB", maxPeakBytes>>20)
		}
	}
	if len(open) > 1 {
		return Declared{}, invalidf("truncated DICOM object: a sequence or item is not closed")
	}
	if top.Rows == 0 { // no pixel data: say what the header does
		g := open[0].geo
		top = Declared{Rows: int(g.rows), Cols: int(g.cols), Bits: int(g.bits), Frames: int(g.frames)}
	}
	top.Peak = peak
	return top, nil
}

// skipValue skips a value the parser will read and keep, of the given
// kind and defined length, and returns what the parser allocates for it.
func (s *preScanner) skipValue(kind tag.VRKind, vl uint32) (int64, error) {
	n := int64(vl)
	switch kind {
	case tag.VRBytes, tag.VRUnknown:
		return peakBytes * n, s.skip(n)
	case tag.VRUInt16List, tag.VRUInt32List, tag.VRInt16List, tag.VRInt32List, tag.VRTagList:
		return peakNumber * n, s.skip(n)
	case tag.VRFloat32List:
		return peakFL * n, s.skip(n)
	case tag.VRFloat64List:
		return peakNumber * n, s.skip(n)
	case tag.VRDate:
		return peakText * n, s.skip(n)
	}
	// Text: the parser splits it at each backslash, a string header for
	// each value.
	values, err := s.countSkip(n, '\\')
	return peakText*n + peakTextValue*(values+1), err
}

// header reads an element's tag, VR and value length as the parser does:
// an item's always as implicit VR, an implicit VR from the dictionary, an
// explicit 2-byte length of FFFFH as undefined.
func (s *preScanner) header(explicit bool) (t tag.Tag, vr string, vl uint32, err error) {
	b, err := s.read(4)
	if err != nil {
		return t, "", 0, err
	}
	t = tag.Tag{Group: binary.LittleEndian.Uint16(b), Element: binary.LittleEndian.Uint16(b[2:])}
	if t == tag.Item || !explicit {
		vr = implicitVR(t)
		b, err := s.read(4)
		if err != nil {
			return t, "", 0, err
		}
		return t, vr, binary.LittleEndian.Uint32(b), nil
	}
	if b, err = s.read(4); err != nil {
		return t, "", 0, err
	}
	vr = string(b[:2])
	if t.Group == 0xFFFE {
		// A delimiter, which the parser reads as the transfer syntax
		// says: as a VR and a 2-byte length in explicit VR. That agrees
		// with the standard's 4-byte length only when it is zero.
		if binary.LittleEndian.Uint32(b) != 0 {
			return t, "", 0, invalidf("delimiter %v with a length", t)
		}
		return t, "", 0, nil
	}
	if s.charset && (vr[0] < 'A' || vr[0] > 'Z' || vr[1] < 'A' || vr[1] > 'Z') {
		// Once a Specific Character Set is read, the parser decodes each
		// VR in it: only letters read the same in every one. Without
		// one, it takes bytes that are no VR as a VR with a 2-byte
		// length, and so does this walk.
		return t, "", 0, invalidf("element %v has VR %q", t, vr)
	}
	switch vr {
	case "NA", "OB", "OD", "OF", "OL", "OW", "SQ", "UN", "UC", "UR", "UT":
		if b, err = s.read(4); err != nil {
			return t, "", 0, err
		}
		return t, vr, binary.LittleEndian.Uint32(b), nil
	}
	vl = uint32(binary.LittleEndian.Uint16(b[2:]))
	if vl == 0xFFFF {
		vl = undefinedLength
	}
	return t, vr, vl, nil
}

// implicitVR is the VR the parser gives an element in implicit VR.
func implicitVR(t tag.Tag) string {
	info, err := tag.Find(t)
	switch {
	case err != nil:
		return tag.UnknownVR
	case info.Tag == tag.PixelData || info.Tag == tag.OverlayData:
		return "OW"
	}
	return info.VRs[0]
}

// transferSyntax reads the Transfer Syntax UID and accepts the
// uncompressed little-endian encodings.
func (s *preScanner) transferSyntax(vr string, vl uint32) (string, error) {
	if vr != "UI" {
		return "", invalidf("transfer syntax UID has VR %q", vr)
	}
	v, err := s.value(vl)
	if err != nil {
		return "", err
	}
	ts := textValues(v)[0]
	return ts, checkTransferSyntax(ts)
}

// value reads a value of at most maxGeometryValue bytes.
func (s *preScanner) value(vl uint32) ([]byte, error) {
	if vl > maxGeometryValue {
		return nil, invalidf("a %d-byte value where the standard has a few", vl)
	}
	n, err := io.ReadFull(s.br, s.buf[:vl])
	s.pos += int64(n)
	return s.buf[:vl], truncated(err)
}

// textValues splits a text value as the parser does: a value not all
// space loses its leading and trailing spaces and NULs, and values are
// separated by backslashes.
func textValues(v []byte) []string {
	str := string(v)
	if strings.IndexFunc(str, func(r rune) bool { return !unicode.IsSpace(r) }) >= 0 {
		str = strings.Trim(str, " \x00")
	}
	return strings.Split(str, `\`)
}

func (s *preScanner) read(n int) ([]byte, error) {
	b := s.buf[:n]
	m, err := io.ReadFull(s.br, b)
	s.pos += int64(m)
	return b, truncated(err)
}

func (s *preScanner) skip(n int64) error {
	for n > 0 {
		m, err := s.br.Discard(int(min(n, 1<<30)))
		s.pos += int64(m)
		n -= int64(m)
		if err != nil {
			return truncated(err)
		}
	}
	return nil
}

// countSkip skips n bytes and counts c among them.
func (s *preScanner) countSkip(n int64, c byte) (int64, error) {
	var count int64
	for n > 0 {
		b, err := s.br.Peek(int(min(n, int64(s.br.Size()))))
		count += int64(bytes.Count(b, []byte{c}))
		m, _ := s.br.Discard(len(b))
		s.pos += int64(m)
		n -= int64(m)
		if err != nil {
			return count, truncated(err)
		}
	}
	return count, nil
}

// pixelGeometry is what a dataset declares of its image, each attribute
// as the parser will read it.
type pixelGeometry struct {
	rows, cols, bits, samples, frames uint64
	seen                              [5]bool // by geometryIndex
}

// geometryIndex numbers the attributes the parser reads native pixel
// data by (group 0028).
func geometryIndex(elem uint16) int {
	switch elem {
	case 0x0002: // Samples per Pixel
		return 0
	case 0x0008: // Number of Frames
		return 1
	case 0x0010: // Rows
		return 2
	case 0x0011: // Columns
		return 3
	case 0x0100: // Bits Allocated
		return 4
	}
	return -1
}

func (g *pixelGeometry) watches(elem uint16) bool { return geometryIndex(elem) >= 0 }

// note takes one attribute of group 0028 (watches(elem)) with its VR
// and value. The parser takes the first of each attribute; a dataset
// that says one twice is refused, so that no reader can take another.
func (g *pixelGeometry) note(elem uint16, vr string, v []byte) error {
	i := geometryIndex(elem)
	if g.seen[i] {
		return invalidf("image attribute (0028,%04x) given twice", elem)
	}
	g.seen[i] = true
	if elem == 0x0008 {
		// The parser reads Number of Frames with strconv.Atoi, which
		// takes a sign and leading zeros, in int.
		if vr != "IS" {
			return invalidf("number of frames has VR %q; want IS", vr)
		}
		s := textValues(v)[0]
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return invalidf("number of frames %q is not a positive integer", s)
		}
		g.frames = uint64(n)
		return nil
	}
	if vr != "US" || len(v) != 2 {
		return invalidf("image attribute (0028,%04x) is %d bytes of %q; want one US", elem, len(v), vr)
	}
	n := uint64(binary.LittleEndian.Uint16(v))
	switch elem {
	case 0x0002:
		g.samples = n
	case 0x0010:
		g.rows = n
	case 0x0011:
		g.cols = n
	case 0x0100:
		g.bits = n
	}
	return nil
}

// check compares the declared pixel data size with its element's
// length, and returns the samples, bytes per sample and frames declared.
func (g *pixelGeometry) check(length uint32) (samples, bytesPerSample, frames uint64, err error) {
	if !g.seen[0] || g.rows == 0 || g.cols == 0 || g.samples == 0 || (g.bits != 8 && g.bits != 16) {
		return 0, 0, 0, invalidf("pixel data before a complete image description (rows %d, columns %d, %d samples per pixel, %d bits allocated)",
			g.rows, g.cols, g.samples, g.bits)
	}
	frames = 1
	if g.seen[1] {
		frames = g.frames
	}
	samples, ok := product(maxSamples, g.rows, g.cols, frames, g.samples)
	if !ok {
		return 0, 0, 0, invalidf("volume of %d×%d×%d samples (%d per pixel) is over the limit of %d", frames, g.rows, g.cols, g.samples, uint64(maxSamples))
	}
	bytesPerSample = g.bits / 8
	want := samples * bytesPerSample
	if uint64(length) != want && uint64(length) != want+1 { // +1: an odd length padded to even
		return 0, 0, 0, invalidf("the header declares %d bytes of pixel data (%d×%d×%d, %d bits); the file holds %d", want, frames, g.rows, g.cols, g.bits, length)
	}
	return samples, bytesPerSample, frames, nil
}

// product multiplies factors, none 0, and says whether the product is
// within limit; it cannot overflow.
func product(limit uint64, factors ...uint64) (uint64, bool) {
	p := uint64(1)
	for _, f := range factors {
		if f > limit/p {
			return 0, false
		}
		p *= f
	}
	return p, true
}

// checkTransferSyntax accepts the uncompressed little-endian encodings.
func checkTransferSyntax(ts string) error {
	if ts != uid.ExplicitVRLittleEndian && ts != uid.ImplicitVRLittleEndian {
		return fmt.Errorf("%w (%w)", invalidf("transfer syntax %q is not supported (want uncompressed little endian)", ts), ErrTransferSyntax)
	}
	return nil
}

func truncated(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("truncated DICOM object")
	}
	return fmt.Errorf("read DICOM: %w", err)
}
