package results

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/codec"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/report"
)

// SegmentationSOPClass is Segmentation Storage.
const SegmentationSOPClass = "1.2.840.10008.5.1.4.1.1.66.4"

// KindSegmentation is the segmentation of the retina and the lesions
// over the source scan's frames.
const KindSegmentation = "seg"

// segSeriesNumber follows the PDF's and the SR's.
const segSeriesNumber = "9003"

// localScheme is octflow's own coding scheme (PS3.16 8.2: a private
// scheme's designator starts with "99"), for the lesion kinds no
// standard code could be checked for (docs/dicom.md says which).
const localScheme = "99OCTFLOW"

// SegmentationSource is what an exam's segmentation is drawn from: the
// source scan's geometry and what the image stages found over it. The
// volume the stages worked on has the scan's frames, rows and columns,
// so A-scan (f, c) is column c of the scan's frame f+1.
type SegmentationSource struct {
	// Geometry is the scan's (octdicom.ReadGeometry of its stored
	// de-identified copy).
	Geometry octdicom.Geometry
	// Layers are the layer boundaries (layers.json): the retina is
	// drawn from the ILM to Bruch's membrane.
	Layers *imaging.Layers
	// RetinaMeasured marks the A-scans ([frame*Cols+col]) where the
	// analysis measured and vouched for the retina
	// (imaging.Analysis.RetinaMeasured): the retina is drawn there and
	// nowhere else. Nil: the retina is not drawn.
	RetinaMeasured []bool
	// Labels are the lesion labels (lesion-labels.nrrd), one per voxel
	// [(frame*Rows+row)*Cols+col]: a lesion is drawn only when the
	// report lists it. Nil: no lesion is drawn.
	Labels []uint8
}

// segment is one kind of segment octflow draws, with its codes.
type segment struct {
	// lesion is the lesion type (imaging.IntraretinalFluid, …); "" for
	// the retina.
	lesion         string
	label          string
	category, kind octdicom.CodedEntry
	// stage is the report's stage whose algorithm drew it.
	stage string
}

// segmentKinds are the kinds octflow draws, in the order they are
// numbered (those drawn are numbered 1, 2, … in this order), with their
// codes: the one table of them. Each standard code is as its source
// spells it (docs/dicom.md names the source of each):
//
//   - the categories are CID 7150's, the retina CID 4209's and 4211's
//     (PS3.16, as pydicom's tables of PS3.16 2024c list them);
//   - drusen are SNOMED CT's 247153005 |Retinal drusen (finding)|;
//   - intraretinal fluid, subretinal fluid and PED are in octflow's own
//     scheme: PS3.16 has no code for them, and no SNOMED CT code could
//     be checked.
func segmentKinds() []segment {
	anatomical := octdicom.CodedEntry{Value: "91723000", Scheme: "SCT", Meaning: "Anatomical Structure"}
	abnormal := octdicom.CodedEntry{Value: "49755003", Scheme: "SCT", Meaning: "Morphologically Abnormal Structure"}
	return []segment{
		{label: "Retina (ILM to Bruch's membrane)", category: anatomical, kind: retinaCode(), stage: "layers"},
		{lesion: imaging.IntraretinalFluid, label: "Intraretinal fluid", category: abnormal,
			kind: octdicom.CodedEntry{Value: "IRF", Scheme: localScheme, Meaning: "Intraretinal fluid"}, stage: "lesions"},
		{lesion: imaging.SubretinalFluid, label: "Subretinal fluid", category: abnormal,
			kind: octdicom.CodedEntry{Value: "SRF", Scheme: localScheme, Meaning: "Subretinal fluid"}, stage: "lesions"},
		{lesion: imaging.Drusen, label: "Drusen", category: abnormal,
			kind: octdicom.CodedEntry{Value: "247153005", Scheme: "SCT", Meaning: "Retinal drusen"}, stage: "lesions"},
		{lesion: imaging.PED, label: "Pigment epithelial detachment", category: abnormal,
			kind: octdicom.CodedEntry{Value: "PED", Scheme: localScheme, Meaning: "Pigment epithelial detachment"}, stage: "lesions"},
	}
}

// retinaCode is the retina (CID 4209, 4211), the retina segment's type
// and each lesion segment's Anatomic Region.
func retinaCode() octdicom.CodedEntry {
	return octdicom.CodedEntry{Value: "5665001", Scheme: "SCT", Meaning: "Retina"}
}

// WantsSegmentation reports whether an exam's results include a
// segmentation: a macular cube or a line scan that was measured, whose
// quality gate did not call it ungradable. A circle's figure is its
// RNFL, which the segmentation does not draw.
func WantsSegmentation(rep *report.Report) bool {
	return (rep.ScanPattern == imaging.Cube || rep.ScanPattern == imaging.Line) && rep.Measurable && rep.Figures != nil &&
		rep.Quality.Gradable != imaging.Ungradable
}

// SegmentationFromSealed opens the exam's sealed identity (as
// FromSealed does) and builds its segmentation (Segmentation).
func SegmentationFromSealed(c *codec.Codec, ref exam.Ref, sealed []byte, rep *report.Report, src SegmentationSource,
	sw Software) (obj Object, none string, err error) {
	id, err := octdicom.OpenIdentity(c, ref, sealed)
	if err != nil {
		return Object{}, "", err
	}
	return Segmentation(id, rep, src, sw)
}

// Segmentation builds the exam's DICOM Segmentation (BINARY) over the
// source scan's frames, filed like the other results: in the source
// study, under its patient, in a new series of its own, its UIDs derived
// from the exam and the report's run. Its segments are what the report
// vouches for, and nothing else:
//
//   - the retina, from the ILM to Bruch's membrane, on the A-scans where
//     the analysis measured it (src.RetinaMeasured): not on A-scans it
//     did not grade or whose boundaries it did not find reliable, and not
//     at all when it withheld the measurements;
//   - each kind of lesion the report lists (intraretinal and subretinal
//     fluid, drusen, PED), drawn from the lesion labels region by region,
//     each region only if it is one the report lists: none when the
//     report withholds the lesions or their kind, none on A-scans the
//     gate did not grade. A kind some of whose listed lesions cannot be
//     found in the labels is left out whole.
//
// none says why there is no segmentation (the exam's kind, a source
// without a frame of reference or planes, nothing to draw); obj is then
// empty and err nil. It is a pure function of its arguments.
func Segmentation(id octdicom.Identity, rep *report.Report, src SegmentationSource, sw Software) (obj Object, none string, err error) {
	if rep == nil {
		return Object{}, "", errors.New("results: no report")
	}
	if rep.Campus != id.Exam.Campus || rep.ExamID != id.Exam.ID {
		return Object{}, "", errors.New("results: the report and the identity are of different exams")
	}
	if !octdicom.ValidUID(id.StudyInstanceUID) || !octdicom.ValidUID(id.SeriesInstanceUID) || !octdicom.ValidUID(id.SOPInstanceUID) || !octdicom.ValidUID(id.SOPClassUID) {
		return Object{}, "", fmt.Errorf("results: %w", octdicom.ErrNoIdentity)
	}
	switch {
	case !WantsSegmentation(rep):
		return Object{}, "only a measured cube or line scan is segmented", nil
	case !octdicom.ValidUID(id.FrameOfReferenceUID):
		return Object{}, "the source names no frame of reference", nil
	case !src.Geometry.Complete():
		return Object{}, "the source does not say where each frame lies", nil
	}
	g := src.Geometry
	frames, rows, cols := len(g.Frames), g.Rows, g.Cols
	if l := src.Layers; l == nil || l.Frames != frames || l.Cols != cols || len(l.Boundaries[imaging.ILM]) != frames*cols ||
		len(l.Boundaries[imaging.BM]) != frames*cols {
		return Object{}, "", errResult(KindSegmentation, errors.New("the layers do not match the source's frames"))
	}
	if src.RetinaMeasured != nil && len(src.RetinaMeasured) != frames*cols {
		return Object{}, "", errResult(KindSegmentation, errors.New("the measured A-scans do not match the source's frames"))
	}
	if src.Labels != nil && len(src.Labels) != frames*rows*cols {
		return Object{}, "", errResult(KindSegmentation, errors.New("the lesion labels do not match the source's frames"))
	}
	masks := map[string]bitVolume{}
	if m := retinaMask(rep, src, frames, rows, cols); m != nil {
		masks[""] = m
	}
	for kind, m := range lesionMasks(rep, src.Labels, frames, rows, cols) {
		masks[kind] = m
	}
	var drawn []segment
	for _, s := range segmentKinds() {
		if m, ok := masks[s.lesion]; ok && m.any(0, len(m)*64) {
			drawn = append(drawn, s)
		}
	}
	if len(drawn) == 0 {
		return Object{}, "nothing the analysis vouches for to draw", nil
	}
	b := newBuilder(id, rep, sw)
	obj, err = b.segmentation(g, drawn, masks)
	return obj, "", err
}

// retinaMask is the retina, ILM to BM, on the A-scans where it was
// measured; nil when it is not drawn.
func retinaMask(rep *report.Report, src SegmentationSource, frames, rows, cols int) bitVolume {
	if src.RetinaMeasured == nil || withheld(rep, imaging.FigureMeasurements) {
		return nil
	}
	m := newBitVolume(frames * rows * cols)
	ilm, bm := src.Layers.Boundaries[imaging.ILM], src.Layers.Boundaries[imaging.BM]
	for f := range frames {
		for c := range cols {
			i := f*cols + c
			if !src.RetinaMeasured[i] || math.IsNaN(float64(ilm[i])) || math.IsNaN(float64(bm[i])) {
				continue
			}
			top := max(int(math.Ceil(float64(ilm[i]))), 0)
			bottom := min(int(math.Floor(float64(bm[i]))), rows-1)
			for r := top; r <= bottom; r++ {
				m.set((f*rows+r)*cols + c)
			}
		}
	}
	return m
}

// withheld reports whether the report withholds figure.
func withheld(rep *report.Report, figure string) bool {
	return slices.ContainsFunc(rep.Withheld, func(w imaging.Withheld) bool { return w.Figure == figure })
}

// regionKey is what identifies a lesion region: imaging groups the
// labels into regions as this package does (6-connected voxels of one
// label) and lists each with its voxel count and rounded centroid.
type regionKey struct {
	label              uint8
	voxels, frame, col int
}

// lesionLabel is the label imaging marks a lesion type's voxels with.
func lesionLabel(lesionType string) uint8 {
	if imaging.KindFigure(lesionType) == imaging.FigureFluid {
		return imaging.LabelFluid
	}
	return imaging.LabelDrusen
}

// lesionMasks are the voxels of the lesions the report lists, by type:
// each connected region of the labels that is one of the report's
// lesions (the same voxel count and centroid), typed as the report
// types it. A type some of whose lesions are not found is left out.
func lesionMasks(rep *report.Report, labels []uint8, frames, rows, cols int) map[string]bitVolume {
	if labels == nil || len(rep.Lesions) == 0 || rep.LesionsWithheld != "" || withheld(rep, imaging.FigureLesions) {
		return nil
	}
	listed := map[regionKey][]string{}
	missing := map[string]int{}
	for _, l := range rep.Lesions {
		k := regionKey{lesionLabel(l.Type), l.Voxels, l.Frame, l.Col}
		listed[k] = append(listed[k], l.Type)
		missing[l.Type]++
	}
	out := map[string]bitVolume{}
	seen := newBitVolume(len(labels))
	var region, stack []int
	for start, label := range labels {
		if label == imaging.LabelNone || seen.get(start) {
			continue
		}
		seen.set(start)
		region, stack = region[:0], append(stack[:0], start)
		var sumF, sumC int
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			region = append(region, i)
			f, r, c := i/(rows*cols), (i/cols)%rows, i%cols
			sumF += f
			sumC += c
			for _, d := range [][3]int{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}} {
				ff, rr, cc := f+d[0], r+d[1], c+d[2]
				if ff < 0 || ff >= frames || rr < 0 || rr >= rows || cc < 0 || cc >= cols {
					continue
				}
				if j := (ff*rows+rr)*cols + cc; labels[j] == label && !seen.get(j) {
					seen.set(j)
					stack = append(stack, j)
				}
			}
		}
		n := len(region)
		k := regionKey{label, n, int(math.Round(float64(sumF) / float64(n))), int(math.Round(float64(sumC) / float64(n)))}
		types := listed[k]
		if len(types) == 0 {
			continue // a speck, or a region the report does not vouch for
		}
		kind := types[0]
		listed[k] = types[1:]
		missing[kind]--
		m, ok := out[kind]
		if !ok {
			m = newBitVolume(len(labels))
			out[kind] = m
		}
		for _, i := range region {
			m.set(i)
		}
	}
	for kind, n := range missing {
		if n > 0 {
			delete(out, kind)
		}
	}
	return out
}

// segFrame is one frame of the segmentation: a segment over one frame of
// the source.
type segFrame struct {
	segment int // 1-based
	source  int // 0-based
}

// segmentation writes the Segmentation instance (PS3.3 A.51): Patient,
// General Study, General Series, Segmentation Series, Frame of
// Reference, General Equipment, Enhanced General Equipment, General
// Image, Image Pixel, Segmentation Image, Multi-frame Functional Groups,
// Multi-frame Dimension, Common Instance Reference and SOP Common.
func (b *builder) segmentation(g octdicom.Geometry, drawn []segment, masks map[string]bitVolume) (Object, error) {
	frames, rows, cols := len(g.Frames), g.Rows, g.Cols
	obj := Object{Kind: KindSegmentation, SOPClassUID: SegmentationSOPClass, SOPInstanceUID: b.uid("seg-instance"),
		SeriesInstanceUID: b.uid("seg-series"), StudyInstanceUID: b.id.StudyInstanceUID}
	e := &octdicom.Elements{}
	b.common(e, obj.SOPClassUID, obj.SOPInstanceUID, "SEG", obj.SeriesInstanceUID, segSeriesNumber,
		"octflow OCT segmentation (retina, lesions)")
	if slices.ContainsFunc(drawn, func(s segment) bool { return s.kind.Scheme == localScheme }) {
		e.Seq(tag.CodingSchemeIdentificationSequence, localSchemeItem())
	}

	// Frame of Reference: the source's.
	e.Str(tag.FrameOfReferenceUID, b.id.FrameOfReferenceUID)
	e.Str(tag.PositionReferenceIndicator, "")

	// General Image and Segmentation Image.
	e.Add(tag.ImageType, []string{"DERIVED", "PRIMARY"})
	e.Str(tag.ContentDate, da(b.created))
	e.Str(tag.ContentTime, tm(b.created))
	e.Str(tag.LossyImageCompression, "00")
	e.Str(tag.ContentLabel, "OCTFLOW")
	e.Str(tag.ContentDescription, "octflow retina and lesions; to be reviewed by a clinician")
	e.Str(tag.ContentCreatorName, "")
	e.Str(tag.SegmentationType, "BINARY")
	var segItems []*octdicom.Elements
	for i, s := range drawn {
		segItems = append(segItems, b.segmentItem(i+1, s))
	}
	e.Seq(tag.SegmentSequence, segItems...)

	// The frames: each drawn segment over each source frame it has a
	// voxel on, segment by segment, in the source's frame order.
	var list []segFrame
	for i, s := range drawn {
		m := masks[s.lesion]
		for f := range frames {
			if m.any(f*rows*cols, (f+1)*rows*cols) {
				list = append(list, segFrame{i + 1, f})
			}
		}
	}
	e.Str(tag.NumberOfFrames, strconv.Itoa(len(list)))
	e.Add(tag.SamplesPerPixel, []int{1})
	e.Str(tag.PhotometricInterpretation, "MONOCHROME2")
	e.Add(tag.Rows, []int{rows})
	e.Add(tag.Columns, []int{cols})
	e.Add(tag.BitsAllocated, []int{1})
	e.Add(tag.BitsStored, []int{1})
	e.Add(tag.HighBit, []int{0})
	e.Add(tag.PixelRepresentation, []int{0})

	// Multi-frame Dimension: segment, then the frame's position.
	dimOrg := b.uid("seg-dimension-organization")
	org := &octdicom.Elements{}
	org.Str(tag.DimensionOrganizationUID, dimOrg)
	e.Seq(tag.DimensionOrganizationSequence, org)
	e.Seq(tag.DimensionIndexSequence,
		dimensionIndex(dimOrg, tag.ReferencedSegmentNumber, tag.SegmentIdentificationSequence, "Segment Number"),
		dimensionIndex(dimOrg, tag.ImagePositionPatient, tag.PlanePositionSequence, "Image Position (Patient)"))

	// Functional groups: what all frames share once, the rest per frame.
	first := g.Frames[0]
	samePixels := !slices.ContainsFunc(g.Frames, func(f octdicom.FrameGeometry) bool {
		return !slices.Equal(f.PixelSpacing, first.PixelSpacing) || f.SliceThickness != first.SliceThickness ||
			f.SpacingBetweenSlices != first.SpacingBetweenSlices
	})
	sameOrientation := !slices.ContainsFunc(g.Frames, func(f octdicom.FrameGeometry) bool {
		return !slices.Equal(f.Orientation, first.Orientation)
	})
	shared := &octdicom.Elements{}
	if samePixels {
		shared.Seq(tag.PixelMeasuresSequence, pixelMeasures(first))
	}
	if sameOrientation {
		shared.Seq(tag.PlaneOrientationSequence, planeOrientation(first))
	}
	e.Seq(tag.SharedFunctionalGroupsSequence, shared)
	perFrame := make([]*octdicom.Elements, len(list))
	for k, fr := range list {
		fg := g.Frames[fr.source]
		it := &octdicom.Elements{}
		it.Seq(tag.DerivationImageSequence, b.derivation(fr.source))
		content := &octdicom.Elements{}
		content.Add(tag.DimensionIndexValues, []int{fr.segment, fr.source + 1})
		it.Seq(tag.FrameContentSequence, content)
		pos := &octdicom.Elements{}
		pos.Add(tag.ImagePositionPatient, fg.Position)
		it.Seq(tag.PlanePositionSequence, pos)
		if !sameOrientation {
			it.Seq(tag.PlaneOrientationSequence, planeOrientation(fg))
		}
		if !samePixels {
			it.Seq(tag.PixelMeasuresSequence, pixelMeasures(fg))
		}
		ident := &octdicom.Elements{}
		ident.Add(tag.ReferencedSegmentNumber, []int{fr.segment})
		it.Seq(tag.SegmentIdentificationSequence, ident)
		perFrame[k] = it
	}
	e.Seq(tag.PerFrameFunctionalGroupsSequence, perFrame...)

	// Common Instance Reference: the source scan, in this study.
	inst := &octdicom.Elements{}
	inst.Str(tag.ReferencedSOPClassUID, b.id.SOPClassUID)
	inst.Str(tag.ReferencedSOPInstanceUID, b.id.SOPInstanceUID)
	series := &octdicom.Elements{}
	series.Str(tag.SeriesInstanceUID, b.id.SeriesInstanceUID)
	series.Seq(tag.ReferencedInstanceSequence, inst)
	e.Seq(tag.ReferencedSeriesSequence, series)

	e.Add(tag.PixelData, dicom.PixelDataInfo{IntentionallyUnprocessed: true,
		UnprocessedValueData: packFrames(list, drawn, masks, rows*cols)})
	var err error
	if obj.Part10, err = octdicom.EncodePart10(e, obj.SOPClassUID, obj.SOPInstanceUID); err != nil {
		return Object{}, errResult(KindSegmentation, err)
	}
	return obj, nil
}

// segmentItem is an item of the Segment Sequence.
func (b *builder) segmentItem(number int, s segment) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Add(tag.SegmentNumber, []int{number})
	it.Str(tag.SegmentLabel, s.label)
	it.Str(tag.SegmentAlgorithmType, "AUTOMATIC")
	it.Str(tag.SegmentAlgorithmName, cut("octflow "+s.stage+": "+cmp.Or(b.rep.Algorithms[s.stage], "unknown"), 64))
	it.Seq(tag.SegmentedPropertyCategoryCodeSequence, code(s.category))
	it.Seq(tag.SegmentedPropertyTypeCodeSequence, code(s.kind))
	if s.lesion != "" {
		it.Seq(tag.AnatomicRegionSequence, code(retinaCode()))
	}
	return it
}

// derivation is a frame's Derivation Image item: segmented from frame
// source (0-based) of the scan.
func (b *builder) derivation(source int) *octdicom.Elements {
	src := &octdicom.Elements{}
	src.Str(tag.ReferencedSOPClassUID, b.id.SOPClassUID)
	src.Str(tag.ReferencedSOPInstanceUID, b.id.SOPInstanceUID)
	src.Str(tag.ReferencedFrameNumber, strconv.Itoa(source+1))
	src.Seq(tag.PurposeOfReferenceCodeSequence, octdicom.Code("121322", "DCM", "Source image for image processing operation"))
	it := &octdicom.Elements{}
	it.Seq(tag.DerivationCodeSequence, octdicom.Code("113076", "DCM", "Segmentation"))
	it.Seq(tag.SourceImageSequence, src)
	return it
}

func dimensionIndex(org string, pointer, group tag.Tag, label string) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.DimensionOrganizationUID, org)
	it.Add(tag.DimensionIndexPointer, []int{int(pointer.Group), int(pointer.Element)})
	it.Add(tag.FunctionalGroupPointer, []int{int(group.Group), int(group.Element)})
	it.Str(tag.DimensionDescriptionLabel, label)
	return it
}

func pixelMeasures(f octdicom.FrameGeometry) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Add(tag.PixelSpacing, f.PixelSpacing)
	it.Str(tag.SliceThickness, f.SliceThickness)
	if f.SpacingBetweenSlices != "" {
		it.Str(tag.SpacingBetweenSlices, f.SpacingBetweenSlices)
	}
	return it
}

func planeOrientation(f octdicom.FrameGeometry) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Add(tag.ImageOrientationPatient, f.Orientation)
	return it
}

// localSchemeItem declares octflow's coding scheme (SOP Common's Coding
// Scheme Identification Sequence), in an object that draws a kind coded
// in it.
func localSchemeItem() *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.CodingSchemeDesignator, localScheme)
	it.Str(tag.CodingSchemeName, "octflow OCT lesion kinds")
	it.Str(tag.CodingSchemeResponsibleOrganization, "octflow")
	return it
}

func code(c octdicom.CodedEntry) *octdicom.Elements {
	return octdicom.Code(c.Value, c.Scheme, c.Meaning)
}

// packFrames is the Pixel Data of the frames in list: one bit a pixel,
// the first in the lowest bit of the first byte, frame after frame with
// no padding between them (PS3.5 8.1.1), the whole padded to an even
// length.
func packFrames(list []segFrame, drawn []segment, masks map[string]bitVolume, perFrame int) []byte {
	out := make([]byte, (len(list)*perFrame+15)/16*2)
	for k, fr := range list {
		m := masks[drawn[fr.segment-1].lesion]
		base, at := fr.source*perFrame, k*perFrame
		for p := range perFrame {
			if m.get(base + p) {
				out[(at+p)/8] |= 1 << ((at + p) % 8)
			}
		}
	}
	return out
}

// bitVolume is one bit per voxel.
type bitVolume []uint64

func newBitVolume(n int) bitVolume { return make(bitVolume, (n+63)/64) }
func (v bitVolume) set(i int)      { v[i/64] |= 1 << (i % 64) }
func (v bitVolume) get(i int) bool { return v[i/64]&(1<<(i%64)) != 0 }

// any reports whether a bit in [from, to) is set.
func (v bitVolume) any(from, to int) bool {
	for i := from; i < to && i/64 < len(v); {
		if i%64 == 0 && i+64 <= to {
			if v[i/64] != 0 {
				return true
			}
			i += 64
			continue
		}
		if v.get(i) {
			return true
		}
		i++
	}
	return false
}
