package octdicom

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// Geometry is where an Ophthalmic Tomography Image's frames lie in its
// frame of reference, as the scan says: what an object drawn over its
// frames (a segmentation, package results) copies, frame by frame. Its
// values are the scan's Decimal Strings as written, so a copy says
// exactly what the scan says. It holds no identifier: it is read from
// the de-identified copy as well as from the original.
type Geometry struct {
	Rows, Cols int
	// Frames has one entry per frame of the scan, in the scan's order
	// (the volume's B-scan f is frame f+1).
	Frames []FrameGeometry
}

// FrameGeometry is one frame's plane and pixel size: from its Per-frame
// Functional Groups, else the Shared Functional Groups, else the top
// level (a single-frame scan's Image Position and Orientation). A value
// the scan does not give is nil or "".
type FrameGeometry struct {
	// Position is Image Position (Patient), 3 values in mm.
	Position []string
	// Orientation is Image Orientation (Patient), 6 direction cosines.
	Orientation []string
	// PixelSpacing is row spacing then column spacing, in mm.
	PixelSpacing   []string
	SliceThickness string
	// SpacingBetweenSlices is from the frame's Pixel Measures or the top
	// level.
	SpacingBetweenSlices string
}

// Complete reports whether every frame names its position, orientation,
// pixel spacing and slice thickness: what a segmentation's Plane
// Position, Plane Orientation and Pixel Measures functional groups
// need (each Type 1).
func (g Geometry) Complete() bool {
	if len(g.Frames) == 0 || g.Rows < 1 || g.Cols < 1 {
		return false
	}
	for _, f := range g.Frames {
		if len(f.Position) != 3 || len(f.Orientation) != 6 || len(f.PixelSpacing) != 2 || f.SliceThickness == "" {
			return false
		}
	}
	return true
}

// errNoGeometry is ReadGeometry's refusal of a header it cannot parse;
// like ReadIdentity's, it quotes nothing of the object.
var errNoGeometry = errors.New("read geometry: the header cannot be parsed")

// ReadGeometry reads the geometry of an Ophthalmic Tomography Image of
// size bytes (a Part 10 file: the stored de-identified copy, or the
// original), its header only: the pixel data is skipped. An object that
// is no OPT image, or whose Number of Frames disagrees with its
// Per-frame Functional Groups, is refused.
func ReadGeometry(r io.Reader, size int64) (g Geometry, err error) {
	defer func() {
		// The parser trusts the file's lengths; a damaged file must not
		// take the process down.
		if p := recover(); p != nil {
			g, err = Geometry{}, errNoGeometry
		}
	}()
	ds, err := dicom.Parse(bufio.NewReaderSize(r, int(min(max(size, 16), 64<<10))), size, nil, dicom.SkipPixelData())
	if err != nil {
		return Geometry{}, errNoGeometry
	}
	if sop := str(ds, tag.SOPClassUID); sop != OphthalmicTomographySOPClass {
		return Geometry{}, fmt.Errorf("read geometry: SOP class %q is not Ophthalmic Tomography Image", sop)
	}
	g.Rows, g.Cols = integer(ds, tag.Rows), integer(ds, tag.Columns)
	n, _ := strconv.Atoi(str(ds, tag.NumberOfFrames))
	if n == 0 {
		n = 1
	}
	if g.Rows < 1 || g.Cols < 1 || n > 1<<16 {
		return Geometry{}, fmt.Errorf("read geometry: %d frames of %d×%d pixels", n, g.Rows, g.Cols)
	}
	shared := seqItems(ds.Elements, tag.SharedFunctionalGroupsSequence)
	perFrame := seqItems(ds.Elements, tag.PerFrameFunctionalGroupsSequence)
	if len(perFrame) != 0 && len(perFrame) != n {
		return Geometry{}, fmt.Errorf("read geometry: %d per-frame functional groups for %d frames", len(perFrame), n)
	}
	// The top level: a single-frame image's own plane, and the pixel
	// size any image may state there.
	top := FrameGeometry{PixelSpacing: dsTextValues(ds.Elements, tag.PixelSpacing), SliceThickness: firstText(ds.Elements, tag.SliceThickness),
		SpacingBetweenSlices: firstText(ds.Elements, tag.SpacingBetweenSlices)}
	if n == 1 {
		top.Position, top.Orientation = dsTextValues(ds.Elements, tag.ImagePositionPatient), dsTextValues(ds.Elements, tag.ImageOrientationPatient)
	}
	var sharedGroups []*dicom.Element
	if len(shared) > 0 {
		sharedGroups = shared[0]
	}
	g.Frames = make([]FrameGeometry, n)
	for f := range g.Frames {
		fg := top
		for _, groups := range [][]*dicom.Element{sharedGroups, frameGroups(perFrame, f)} {
			if v := groupValues(groups, tag.PlanePositionSequence, tag.ImagePositionPatient); v != nil {
				fg.Position = v
			}
			if v := groupValues(groups, tag.PlaneOrientationSequence, tag.ImageOrientationPatient); v != nil {
				fg.Orientation = v
			}
			if v := groupValues(groups, tag.PixelMeasuresSequence, tag.PixelSpacing); v != nil {
				fg.PixelSpacing = v
			}
			if v := groupValues(groups, tag.PixelMeasuresSequence, tag.SliceThickness); v != nil {
				fg.SliceThickness = v[0]
			}
			if v := groupValues(groups, tag.PixelMeasuresSequence, tag.SpacingBetweenSlices); v != nil {
				fg.SpacingBetweenSlices = v[0]
			}
		}
		g.Frames[f] = fg
	}
	return g, nil
}

// frameGroups is frame f's functional groups, nil when the scan has none
// per frame.
func frameGroups(perFrame [][]*dicom.Element, f int) []*dicom.Element {
	if f < len(perFrame) {
		return perFrame[f]
	}
	return nil
}

// seqItems are the items of the sequence t among els.
func seqItems(els []*dicom.Element, t tag.Tag) [][]*dicom.Element {
	for _, el := range els {
		if el.Tag != t {
			continue
		}
		seq, ok := el.Value.GetValue().([]*dicom.SequenceItemValue)
		if !ok {
			return nil
		}
		out := make([][]*dicom.Element, 0, len(seq))
		for _, it := range seq {
			e, _ := it.GetValue().([]*dicom.Element)
			out = append(out, e)
		}
		return out
	}
	return nil
}

// groupValues is the text values of t in the first item of the functional
// group seq among groups; nil when absent or empty.
func groupValues(groups []*dicom.Element, seq, t tag.Tag) []string {
	its := seqItems(groups, seq)
	if len(its) == 0 {
		return nil
	}
	return dsTextValues(its[0], t)
}

// dsTextValues is the text values of t among els, each trimmed of padding;
// nil when absent or empty.
func dsTextValues(els []*dicom.Element, t tag.Tag) []string {
	for _, el := range els {
		if el.Tag != t {
			continue
		}
		v, ok := el.Value.GetValue().([]string)
		if !ok || len(v) == 0 {
			return nil
		}
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = strings.TrimSpace(strings.TrimRight(s, "\x00"))
		}
		if len(out) == 1 && out[0] == "" {
			return nil
		}
		return out
	}
	return nil
}

// firstText is the first text value of t among els, or "".
func firstText(els []*dicom.Element, t tag.Tag) string {
	if v := dsTextValues(els, t); len(v) > 0 {
		return v[0]
	}
	return ""
}
