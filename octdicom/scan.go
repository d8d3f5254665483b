package octdicom

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/frame"
	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"

	"octflow/imaging"
)

// OphthalmicTomographySOPClass is the DICOM SOP class UID of an
// Ophthalmic Tomography Image, the only kind of object octflow accepts.
const OphthalmicTomographySOPClass = "1.2.840.10008.5.1.4.1.1.77.1.5.4"

// maxSamples bounds a volume at 2^28 samples (1 GiB as float32): four times
// the largest cube a clinical OCT writes (128 × 1024 × 512).
const maxSamples = 1 << 28

// ErrNotOCT is wrapped (with ErrInvalidVolume) by ParseScan's refusal
// of an object that is not an Ophthalmic Tomography Image at all: another
// SOP class or modality, as opposed to a broken one.
var ErrNotOCT = errors.New("not an Ophthalmic Tomography Image")

// ErrTransferSyntax is wrapped (with ErrInvalidVolume) by the refusal of
// an object in a transfer syntax the reader does not take (compressed,
// big endian): the object may be sound, its encoding is not supported.
var ErrTransferSyntax = errors.New("transfer syntax not supported")

// notOCT is a refusal for another kind of object; it reads as the error
// it wraps.
type notOCT struct{ error }

func (notOCT) Is(target error) bool { return target == ErrNotOCT }
func (e notOCT) Unwrap() error      { return e.error }

// Header is the identifying part of a DICOM object.
type Header struct {
	// DeviceSerialNumber names the device that made the scan (ParseScan
	// reads it; WriteDICOM writes Identity's). The de-identified copy
	// does not keep it.
	DeviceSerialNumber string
	SOPInstanceUID     string
	StudyInstanceUID   string
	SeriesInstanceUID  string
	// PatientID is protected health information. The gateway turns it
	// into a keyed pseudonym at once; it is never logged, stored in an
	// object key or sent to Temporal in clear.
	PatientID string
	// Identity is what a device also writes about the patient and the
	// visit (WriteDICOM writes it when set, as a device would; ParseScan
	// does not read it back: what octflow keeps of it for the way back is
	// an Identity, sealed).
	Identity *DeviceIdentity
	// Bits is the stored sample size WriteDICOM uses: 8 or 16 (default).
	Bits int
	// Description is the Series Description WriteDICOM writes, e.g. the
	// scan pattern as a device names it.
	Description string
}

// DeviceIdentity is the identifying data a device writes into a scan
// (WriteDICOM writes it, as a device would). It is not Identity, what
// octflow keeps sealed of a scan it took in for the way back.
type DeviceIdentity struct {
	PatientName, PatientBirthDate, OtherPatientIDs, AccessionNumber      string
	InstitutionName, ReferringPhysician, OperatorsName, StudyDescription string
	StudyDate, DeviceSerialNumber                                        string
	// TimezoneOffset is the Timezone Offset From UTC ("+0100").
	TimezoneOffset string
	// RequestedProcedureID, when set, writes a Request Attributes
	// Sequence of one item: the procedure, its step and the accession
	// number.
	RequestedProcedureID, ScheduledProcedureStepID string
}

// WriteDICOM writes v as an Ophthalmic Tomography Image (Explicit VR
// Little Endian, unsigned 16-bit or, with h.Bits 8, 8-bit samples, one
// frame per B-scan). Samples are rounded and clamped to what the sample
// size holds.
func WriteDICOM(w io.Writer, v *imaging.Volume, h Header) error {
	if err := v.Validate(); err != nil {
		return err
	}
	return writeElements(w, otElements(v, h))
}

// dicomElement is one element to write: a tag and its value.
type dicomElement struct {
	t    tag.Tag
	data any
}

// otElements lists the elements of an Ophthalmic Tomography Image of v.
func otElements(v *imaging.Volume, h Header) []dicomElement {
	bits := 16
	if h.Bits == 8 {
		bits = 8
	}
	top := float64(int(1)<<bits - 1)
	frames := make([]*frame.Frame, v.Frames)
	for f := range frames {
		src := v.Frame(f)
		level := func(i int) float64 { return math.Round(math.Max(0, math.Min(top, float64(src[i])))) }
		if bits == 8 {
			raw := make([]uint8, len(src))
			for i := range raw {
				raw[i] = uint8(level(i))
			}
			frames[f] = &frame.Frame{NativeData: &frame.NativeFrame[uint8]{InternalBitsPerSample: 8, InternalRows: v.Rows,
				InternalCols: v.Cols, InternalSamplesPerPixel: 1, RawData: raw}}
			continue
		}
		raw := make([]uint16, len(src))
		for i := range raw {
			raw[i] = uint16(level(i))
		}
		frames[f] = &frame.Frame{NativeData: &frame.NativeFrame[uint16]{InternalBitsPerSample: 16, InternalRows: v.Rows,
			InternalCols: v.Cols, InternalSamplesPerPixel: 1, RawData: raw}}
	}
	mm := func(um float64) string { return strconv.FormatFloat(um/1000, 'g', 8, 64) }
	elems := []dicomElement{
		{tag.MediaStorageSOPClassUID, []string{OphthalmicTomographySOPClass}},
		{tag.MediaStorageSOPInstanceUID, []string{h.SOPInstanceUID}},
		{tag.TransferSyntaxUID, []string{uid.ExplicitVRLittleEndian}},
		{tag.SOPClassUID, []string{OphthalmicTomographySOPClass}},
		{tag.SOPInstanceUID, []string{h.SOPInstanceUID}},
		{tag.Modality, []string{"OPT"}},
		{tag.PatientID, []string{h.PatientID}},
		{tag.SpacingBetweenSlices, []string{mm(v.Spacing.FrameUm)}},
		{tag.StudyInstanceUID, []string{h.StudyInstanceUID}},
		{tag.SeriesInstanceUID, []string{h.SeriesInstanceUID}},
		{tag.ImageLaterality, []string{lateralityCode(v.Laterality)}},
		{tag.SamplesPerPixel, []int{1}},
		{tag.PhotometricInterpretation, []string{"MONOCHROME2"}},
		{tag.NumberOfFrames, []string{strconv.Itoa(v.Frames)}},
		{tag.Rows, []int{v.Rows}},
		{tag.Columns, []int{v.Cols}},
		// Pixel Spacing is row spacing (axial) then column spacing (lateral), in mm.
		{tag.PixelSpacing, []string{mm(v.Spacing.AxialUm), mm(v.Spacing.LateralUm)}},
		{tag.BitsAllocated, []int{bits}},
		{tag.BitsStored, []int{bits}},
		{tag.HighBit, []int{bits - 1}},
		{tag.PixelRepresentation, []int{0}},
		{tag.PixelData, dicom.PixelDataInfo{Frames: frames}},
	}
	if h.Description != "" {
		elems = append(elems, dicomElement{tag.SeriesDescription, []string{h.Description}})
	}
	return append(elems, identityElements(h.Identity)...)
}

// identityElements are the identifying elements of id.
func identityElements(id *DeviceIdentity) []dicomElement {
	if id == nil {
		return nil
	}
	var out []dicomElement
	for _, e := range []struct {
		t tag.Tag
		v string
	}{
		{tag.StudyDate, id.StudyDate}, {tag.AccessionNumber, id.AccessionNumber},
		{tag.InstitutionName, id.InstitutionName}, {tag.ReferringPhysicianName, id.ReferringPhysician},
		{tag.StudyDescription, id.StudyDescription}, {tag.OperatorsName, id.OperatorsName},
		{tag.PatientName, id.PatientName}, {tag.PatientBirthDate, id.PatientBirthDate},
		{tag.OtherPatientIDs, id.OtherPatientIDs}, {tag.DeviceSerialNumber, id.DeviceSerialNumber},
		{tag.TimezoneOffsetFromUTC, id.TimezoneOffset},
	} {
		if e.v != "" {
			out = append(out, dicomElement{e.t, []string{e.v}})
		}
	}
	if id.RequestedProcedureID != "" {
		var item []*dicom.Element
		for _, e := range []struct {
			t tag.Tag
			v string
		}{
			{tag.AccessionNumber, id.AccessionNumber}, {tag.ScheduledProcedureStepID, id.ScheduledProcedureStepID},
			{tag.RequestedProcedureID, id.RequestedProcedureID},
		} {
			// Text of these tags always makes an element.
			if el, err := dicom.NewElement(e.t, []string{e.v}); err == nil && e.v != "" {
				item = append(item, el)
			}
		}
		out = append(out, dicomElement{tag.RequestAttributesSequence, [][]*dicom.Element{item}})
	}
	return out
}

// writeElements writes elements as one DICOM object, in tag order.
func writeElements(w io.Writer, elems []dicomElement) error {
	ds := dicom.Dataset{}
	for _, e := range elems {
		el, err := dicom.NewElement(e.t, e.data)
		if err != nil {
			return fmt.Errorf("dicom element %v: %w", e.t, err)
		}
		ds.Elements = append(ds.Elements, el)
	}
	sortElements(ds.Elements)
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := dicom.Write(bw, ds); err != nil {
		return fmt.Errorf("write dicom: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write dicom: %w", err)
	}
	return nil
}

// ReadDICOM parses an Ophthalmic Tomography Image of size bytes. Anything
// that is not a readable OCT volume yields an error wrapping
// ErrInvalidVolume; only I/O failures of r are returned unwrapped. The
// file is walked once before parsing (checkLengths), so a damaged or
// hostile file cannot make the parser recurse too deep or allocate more
// than the file holds.
func ReadDICOM(r io.ReadSeeker, size int64) (*imaging.Volume, Header, error) {
	s, err := ParseScan(r, size)
	if err != nil {
		return nil, Header{}, err
	}
	return s.Volume, s.Header, nil
}

// Scan is a parsed Ophthalmic Tomography Image: the volume the stages
// read, the header fields octflow needs, and the DICOM dataset a
// de-identified copy is made from (WriteDeidentified).
type Scan struct {
	Volume *imaging.Volume
	Header Header
	ds     dicom.Dataset
}

// ParseScan is ReadDICOM that keeps the whole dataset.
func ParseScan(r io.ReadSeeker, size int64) (scan *Scan, err error) {
	var v *imaging.Volume
	var h Header
	defer func() {
		// The parser trusts lengths in the file; a hostile or damaged
		// file must not take the process down.
		if p := recover(); p != nil {
			scan, err = nil, invalidf("dicom parser failed: %v", p)
		}
	}()
	if err := checkLengths(r, size); err != nil {
		return nil, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read DICOM: rewind: %w", err)
	}
	src := &ioErrReader{r: r}
	// A buffer no larger than the file: the benchmark's phantoms are
	// kilobytes, and every read of one allocated (and zeroed) 1 MB.
	ds, err := dicom.Parse(bufio.NewReaderSize(src, int(min(size, 1<<20))), size, nil)
	if src.err != nil {
		// The source failed (a cancelled or broken download), not the
		// file: that is worth retrying, unlike a bad volume.
		return nil, fmt.Errorf("read DICOM: %w", src.err)
	}
	if err != nil {
		return nil, invalidf("not a readable DICOM object: %v", err)
	}
	if sop := str(ds, tag.SOPClassUID); sop != OphthalmicTomographySOPClass {
		if sop == "" {
			sop = str(ds, tag.MediaStorageSOPClassUID)
		}
		return nil, notOCT{invalidf("SOP class %q is not Ophthalmic Tomography Image (%s)", sop, OphthalmicTomographySOPClass)}
	}
	if m := str(ds, tag.Modality); m != "OPT" {
		return nil, notOCT{invalidf("modality %q is not OPT (ophthalmic tomography)", m)}
	}
	if err := checkTransferSyntax(str(ds, tag.TransferSyntaxUID)); err != nil {
		return nil, err
	}
	h = Header{
		DeviceSerialNumber: str(ds, tag.DeviceSerialNumber),
		SOPInstanceUID:     str(ds, tag.SOPInstanceUID),
		StudyInstanceUID:   str(ds, tag.StudyInstanceUID),
		SeriesInstanceUID:  str(ds, tag.SeriesInstanceUID),
		PatientID:          str(ds, tag.PatientID),
	}
	rows, cols := integer(ds, tag.Rows), integer(ds, tag.Columns)
	nframes, _ := strconv.Atoi(str(ds, tag.NumberOfFrames))
	if nframes == 0 {
		nframes = 1
	}
	if bits := integer(ds, tag.BitsAllocated); bits != 8 && bits != 16 {
		return nil, invalidf("%d bits allocated; want 8 or 16", bits)
	}
	if spp := integer(ds, tag.SamplesPerPixel); spp != 1 {
		return nil, invalidf("%d samples per pixel; want 1 (grayscale)", spp)
	}
	pixEl, err := ds.FindElementByTag(tag.PixelData)
	if err != nil {
		return nil, invalidf("no pixel data")
	}
	pix, ok := pixEl.Value.GetValue().(dicom.PixelDataInfo)
	if !ok {
		return nil, invalidf("pixel data is not image data")
	}
	if pix.ParseErr != nil {
		return nil, invalidf("pixel data: %v", pix.ParseErr)
	}
	if pix.IsEncapsulated {
		return nil, invalidf("compressed (encapsulated) pixel data is not supported")
	}
	if len(pix.Frames) == 0 {
		return nil, invalidf("no frames")
	}
	if len(pix.Frames) != nframes {
		return nil, invalidf("header says %d frames, pixel data holds %d", nframes, len(pix.Frames))
	}
	spacing, err := readSpacing(ds)
	if err != nil {
		return nil, err
	}
	if rows < 8 || cols < 8 || int64(nframes)*int64(rows)*int64(cols) > maxSamples {
		return nil, invalidf("volume of %d×%d×%d samples is out of range", nframes, rows, cols)
	}
	enc, err := readPixelEncoding(ds)
	if err != nil {
		return nil, err
	}
	v = imaging.NewVolume(nframes, rows, cols, spacing)
	v.Laterality = lateralityFromCode(str(ds, tag.ImageLaterality), str(ds, tag.Laterality))
	v.Pattern = readPattern(ds)
	for f, fr := range pix.Frames {
		nf, err := fr.GetNativeFrame()
		if err != nil {
			return nil, invalidf("frame %d: %v", f, err)
		}
		if nf.Rows() != rows || nf.Cols() != cols {
			return nil, invalidf("frame %d is %d×%d, header says %d×%d", f, nf.Rows(), nf.Cols(), rows, cols)
		}
		dst := v.Frame(f)
		switch raw := nf.RawDataSlice().(type) {
		case []uint16:
			if len(raw) < len(dst) {
				return nil, invalidf("frame %d is truncated", f)
			}
			for i := range dst {
				dst[i] = enc.value(uint32(raw[i]))
			}
		case []uint8:
			if len(raw) < len(dst) {
				return nil, invalidf("frame %d is truncated", f)
			}
			for i := range dst {
				dst[i] = enc.value(uint32(raw[i]))
			}
		default:
			return nil, invalidf("frame %d has unsupported sample type %T", f, raw)
		}
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return &Scan{Volume: v, Header: h, ds: ds}, nil
}

// pixelEncoding turns stored sample values into non-negative levels
// where brighter is more reflective: Bits Stored masks the sample, Pixel
// Representation 1 makes it two's complement, the Modality LUT (Rescale
// Slope and Intercept) scales it, the result is shifted so the lowest
// level the encoding can hold is 0, and MONOCHROME1 (minimum is white)
// is turned around. How the device compressed reflectivity into those
// levels (linear, log, a power) is Normalize's question, not the
// reader's.
type pixelEncoding struct {
	mask        uint32
	signBit     uint32 // 0 for unsigned samples
	slope, icpt float64
	lo, hi      float64 // the rescaled range the stored bits can hold
	invert      bool
}

func readPixelEncoding(ds dicom.Dataset) (pixelEncoding, error) {
	allocated := integer(ds, tag.BitsAllocated)
	stored := integer(ds, tag.BitsStored)
	if stored <= 0 || stored > allocated {
		stored = allocated
	}
	e := pixelEncoding{mask: 1<<stored - 1, slope: 1}
	if integer(ds, tag.PixelRepresentation) == 1 {
		e.signBit = 1 << (stored - 1)
	}
	if s := str(ds, tag.RescaleSlope); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return e, invalidf("rescale slope %q is not a non-zero number", s)
		}
		e.slope = x
	}
	if s := str(ds, tag.RescaleIntercept); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return e, invalidf("rescale intercept %q is not a number", s)
		}
		e.icpt = x
	}
	minStored, maxStored := 0.0, float64(e.mask)
	if e.signBit != 0 {
		minStored, maxStored = -float64(e.signBit), float64(e.signBit-1)
	}
	a, b := e.slope*minStored+e.icpt, e.slope*maxStored+e.icpt
	e.lo, e.hi = min(a, b), max(a, b)
	switch pi := str(ds, tag.PhotometricInterpretation); pi {
	case "", "MONOCHROME2":
	case "MONOCHROME1":
		e.invert = true
	default:
		return e, invalidf("photometric interpretation %q; want MONOCHROME2 or MONOCHROME1", pi)
	}
	return e, nil
}

// value is the level of one stored sample.
func (e pixelEncoding) value(raw uint32) float32 {
	raw &= e.mask
	x := float64(raw)
	if e.signBit != 0 && raw&e.signBit != 0 {
		x -= float64(e.mask) + 1
	}
	x = e.slope*x + e.icpt - e.lo
	if e.invert {
		x = e.hi - e.lo - x
	}
	return float32(x)
}

// patternFromText recognises a scan pattern in a DICOM description, as
// devices write it ("HEYEX …, scan pattern 2 (circle)", "Macular Cube
// 512x128", "ONH and RNFL OU Analysis:Optic Disc Cube 200x200", "Line
// Raster", "RNFL circle"). It returns "" when the text says nothing.
func patternFromText(texts ...string) imaging.Pattern {
	for _, t := range texts {
		t = strings.ToLower(t)
		has := func(words ...string) bool {
			for _, w := range words {
				if strings.Contains(t, w) {
					return true
				}
			}
			return false
		}
		switch {
		case has("circle", "peripapillary", "rnfl thickness", "onh circle"):
			return imaging.Circle
		case has("radial"):
			return imaging.Radial
		case has("cube", "volume", "raster", "dense", "macular map", "ppole", "posterior pole"):
			return imaging.Cube
		case has("single line", "line scan", "hd line", "5 line", "cross line", "crossline", "(line)", " line"):
			return imaging.Line
		}
	}
	return ""
}

// readPattern is the scan pattern the DICOM object describes, or "":
// from its descriptions, or a B-scan that starts where it ends (a
// circle, as some exports record one in Plane Position and Orientation).
func readPattern(ds dicom.Dataset) imaging.Pattern {
	if p := patternFromText(str(ds, tag.SeriesDescription), str(ds, tag.ProtocolName),
		str(ds, tag.ImageComments), str(ds, tag.PerformedProcedureStepDescription)); p != "" {
		return p
	}
	if o := strs(ds, tag.ImageOrientationPatient); len(o) == 6 {
		var row float64
		for _, s := range o[:3] {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return ""
			}
			row += x * x
		}
		if row == 0 {
			return imaging.Circle
		}
	}
	return ""
}

// readSpacing takes Pixel Spacing and Spacing Between Slices from the top
// level or, as scanners write them, from the Pixel Measures functional
// group.
func readSpacing(ds dicom.Dataset) (imaging.Spacing, error) {
	ps := strs(ds, tag.PixelSpacing)
	if len(ps) != 2 {
		return imaging.Spacing{}, invalidf("pixel spacing missing or malformed")
	}
	axial, err1 := strconv.ParseFloat(strings.TrimSpace(ps[0]), 64)
	lateral, err2 := strconv.ParseFloat(strings.TrimSpace(ps[1]), 64)
	if err := errors.Join(err1, err2); err != nil || axial <= 0 || lateral <= 0 {
		return imaging.Spacing{}, invalidf("pixel spacing %q is not two positive numbers", ps)
	}
	s := imaging.Spacing{AxialUm: axial * 1000, LateralUm: lateral * 1000}
	between := str(ds, tag.SpacingBetweenSlices)
	if between == "" {
		between = str(ds, tag.SliceThickness)
	}
	if between != "" {
		z, err := strconv.ParseFloat(strings.TrimSpace(between), 64)
		if err != nil || z <= 0 {
			return imaging.Spacing{}, invalidf("slice spacing %q is not a positive number", between)
		}
		s.FrameUm = z * 1000
	}
	return s, nil
}

// ioErrReader remembers the first error of its source other than EOF,
// which the DICOM parser would otherwise report as a malformed file.
type ioErrReader struct {
	r   io.Reader
	err error
}

func (e *ioErrReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

func strs(ds dicom.Dataset, t tag.Tag) []string {
	el := findNested(ds, t)
	if el == nil {
		return nil
	}
	v, ok := el.Value.GetValue().([]string)
	if !ok {
		return nil
	}
	return v
}

// findNested is the first element with tag t, sequences included. It
// does what Dataset.FindElementByTagNested does without its channel
// iterator: that one's goroutine is left blocked when the search stops
// early, keeping the whole dataset (the pixel data too) alive for the
// life of the process.
func findNested(ds dicom.Dataset, t tag.Tag) *dicom.Element {
	for it := ds.FlatStatefulIterator(); it.HasNext(); {
		if e := it.Next(); e.Tag == t {
			return e
		}
	}
	return nil
}

func str(ds dicom.Dataset, t tag.Tag) string {
	v := strs(ds, t)
	if len(v) == 0 {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(v[0], "\x00"))
}

func integer(ds dicom.Dataset, t tag.Tag) int {
	el, err := ds.FindElementByTag(t)
	if err != nil {
		return 0
	}
	v, ok := el.Value.GetValue().([]int)
	if !ok || len(v) == 0 {
		return 0
	}
	return v[0]
}

// DICOM writes laterality R or L; octflow speaks OD and OS.
func lateralityCode(eye string) string {
	switch eye {
	case "OD":
		return "R"
	case "OS":
		return "L"
	}
	return ""
}

func lateralityFromCode(codes ...string) string {
	for _, c := range codes {
		switch c {
		case "R":
			return "OD"
		case "L":
			return "OS"
		}
	}
	return ""
}

// invalidf is a refusal of what no retry can fix: an error wrapping
// imaging.ErrInvalidVolume, which callers test for.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", imaging.ErrInvalidVolume, fmt.Sprintf(format, args...))
}
