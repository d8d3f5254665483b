package results

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
	"octflow/report"
)

// realLine is a real device's line scan through the fovea: one B-scan,
// with its plane in its functional groups and a frame of reference.
const realLine = "../../imaging/testdata/realdata/spectralis-line-0.dcm"

// analysed is an exam run through octflow's image stages as the
// pipeline runs them: its report (made by report.FromAnalysis, as the
// report stage makes it) and what the segmentation is drawn from.
type analysed struct {
	rep *report.Report
	src SegmentationSource
	vol *imaging.Volume
}

// analyse runs the image stages on v and makes its report; geometry is
// the source's.
func analyse(t *testing.T, v *imaging.Volume, geometry octdicom.Geometry) analysed {
	t.Helper()
	ctx := context.Background()
	w, _ := imaging.Normalize(v)
	den, err := imaging.Denoise(ctx, w, imaging.DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := imaging.SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	masks, err := imaging.FindLesionMasks(ctx, den, layers)
	if err != nil {
		t.Fatal(err)
	}
	lesions, err := masks.Lesions(den, layers)
	if err != nil {
		t.Fatal(err)
	}
	an, err := imaging.Analyze(ctx, den, layers)
	if err != nil {
		t.Fatal(err)
	}
	rep := cubeReport()
	rep.Volume = report.VolumeInfo{Frames: v.Frames, Rows: v.Rows, Cols: v.Cols, Spacing: v.Spacing}
	rep.FromAnalysis(an, lesions, v.Cols)
	return analysed{rep: rep, vol: den,
		src: SegmentationSource{Geometry: geometry, Layers: layers, RetinaMeasured: an.RetinaMeasured(), Labels: masks.Labels()}}
}

// realLineExam is the real line scan analysed, its identity (as the
// gateway reads it) and its geometry as the stored de-identified copy
// gives it.
func realLineExam(t *testing.T) (octdicom.Identity, analysed, []byte) {
	t.Helper()
	b, err := os.ReadFile(realLine)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := octdicom.ParseScan(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var copy bytes.Buffer
	if err := scan.WriteDeidentified(&copy, octdicom.Deidentification{PatientID: "pt-1", UID: func(string) string { return "2.25.42" }}); err != nil {
		t.Fatal(err)
	}
	g, err := octdicom.ReadGeometry(bytes.NewReader(copy.Bytes()), int64(copy.Len()))
	if err != nil {
		t.Fatal(err)
	}
	id, err := octdicom.ReadIdentity(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	id.Exam = testRef
	a := analyse(t, scan.Volume, g)
	if a.rep.ScanPattern != imaging.Line || !a.rep.Measurable {
		t.Fatalf("the real line scan was analysed as a %s, measurable %v: %v", a.rep.ScanPattern, a.rep.Measurable, a.rep.NotMeasurable)
	}
	return id, a, b
}

// phantomCube is a phantom macular cube with fluid and drusen, analysed,
// with a plane for each B-scan as a device would write (B-scans 0.12 mm
// apart, each in the x–z plane like the real scans').
func phantomCube(t *testing.T) analysed {
	t.Helper()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 3, Frames: 5, Rows: 248, Cols: 128, Fluid: true, Drusen: true})
	v := p.Volume
	mm := func(um float64) string { return strconv.FormatFloat(um/1000, 'g', 8, 64) }
	g := octdicom.Geometry{Rows: v.Rows, Cols: v.Cols}
	for f := range v.Frames {
		g.Frames = append(g.Frames, octdicom.FrameGeometry{
			Position:     []string{"0", mm(float64(f) * v.Spacing.FrameUm), "0"},
			Orientation:  []string{"1", "0", "0", "0", "0", "1"},
			PixelSpacing: []string{mm(v.Spacing.AxialUm), mm(v.Spacing.LateralUm)}, SliceThickness: mm(v.Spacing.FrameUm),
			SpacingBetweenSlices: mm(v.Spacing.FrameUm)})
	}
	a := analyse(t, v, g)
	if a.rep.ScanPattern != imaging.Cube || !a.rep.Measurable || len(a.rep.Lesions) == 0 {
		t.Fatalf("the phantom was analysed as a %s, measurable %v, %d lesions", a.rep.ScanPattern, a.rep.Measurable, len(a.rep.Lesions))
	}
	return a
}

func segmentation(t *testing.T, id octdicom.Identity, rep *report.Report, src SegmentationSource) Object {
	t.Helper()
	obj, none, err := Segmentation(id, rep, src, Software{Version: "v0.27.0"})
	if err != nil {
		t.Fatal(err)
	}
	if none != "" {
		t.Fatalf("no segmentation: %s", none)
	}
	return obj
}

// dciodvfy checks an object with dicom3tools' dciodvfy and returns its
// errors and warnings, one a line.
func dciodvfy(t *testing.T, o Object) (errs, warnings []string) {
	t.Helper()
	tool := needTool(t, "dciodvfy", "dicom3tools")
	f := filepath.Join(t.TempDir(), o.Kind+".dcm")
	if err := os.WriteFile(f, o.Part10, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(tool, "-new", f).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Error"):
			errs = append(errs, line)
		case strings.HasPrefix(line, "Warning"):
			warnings = append(warnings, line)
		}
	}
	return errs, warnings
}

// segmentationRead is a segmentation as read back: its segments'
// labels, and per frame its segment, source frame, position and pixels.
type segmentationRead struct {
	ds     dicom.Dataset
	labels []string
	frames []readFrame
}

type readFrame struct {
	segment, source int // segment number; source frame number (1-based)
	position        string
	on              []bool // rows × cols
}

// readSegmentation parses a segmentation and unpacks its frames, checking
// as it goes what each frame must say of itself.
func readSegmentation(t *testing.T, o Object, id octdicom.Identity, rows, cols int) segmentationRead {
	t.Helper()
	ds, err := dicom.Parse(bytes.NewReader(o.Part10), int64(len(o.Part10)), nil, dicom.SkipProcessingPixelDataValue())
	if err != nil {
		t.Fatal(err)
	}
	out := segmentationRead{ds: ds}
	for _, it := range segItems(t, ds.Elements, tag.SegmentSequence) {
		out.labels = append(out.labels, itemValue(t, it, tag.SegmentLabel))
		if n := itemValue(t, it, tag.SegmentNumber); n != strconv.Itoa(len(out.labels)) {
			t.Errorf("segment %d is numbered %s", len(out.labels), n)
		}
	}
	px, err := ds.FindElementByTag(tag.PixelData)
	if err != nil {
		t.Fatal(err)
	}
	bits := px.Value.GetValue().(dicom.PixelDataInfo).UnprocessedValueData
	frames := segItems(t, ds.Elements, tag.PerFrameFunctionalGroupsSequence)
	if n := value(t, ds, tag.NumberOfFrames); n != strconv.Itoa(len(frames)) {
		t.Errorf("Number of Frames %s, %d per-frame groups", n, len(frames))
	}
	if want := (len(frames)*rows*cols + 15) / 16 * 2; len(bits) != want {
		t.Fatalf("%d bytes of pixel data for %d frames of %d×%d, want %d", len(bits), len(frames), rows, cols, want)
	}
	for k, fg := range frames {
		deriv := segItems(t, fg, tag.DerivationImageSequence)
		src := segItems(t, deriv[0], tag.SourceImageSequence)[0]
		if got := itemValue(t, src, tag.ReferencedSOPInstanceUID); got != id.SOPInstanceUID {
			t.Errorf("frame %d is derived from %s, not the source", k+1, got)
		}
		var f readFrame
		f.source, _ = strconv.Atoi(itemValue(t, src, tag.ReferencedFrameNumber))
		f.segment, _ = strconv.Atoi(itemValue(t, segItems(t, fg, tag.SegmentIdentificationSequence)[0], tag.ReferencedSegmentNumber))
		dims := itemValue(t, segItems(t, fg, tag.FrameContentSequence)[0], tag.DimensionIndexValues)
		if want := fmt.Sprintf("%d %d", f.segment, f.source); dims != want {
			t.Errorf("frame %d: dimension index values %s, want %s (segment, source frame)", k+1, dims, want)
		}
		f.position = itemValue(t, segItems(t, fg, tag.PlanePositionSequence)[0], tag.ImagePositionPatient)
		f.on = make([]bool, rows*cols)
		for p := range f.on {
			at := k*rows*cols + p
			f.on[p] = bits[at/8]&(1<<(at%8)) != 0
		}
		out.frames = append(out.frames, f)
	}
	return out
}

func segItems(t *testing.T, els []*dicom.Element, tg tag.Tag) [][]*dicom.Element {
	t.Helper()
	for _, el := range els {
		if el.Tag == tg {
			var out [][]*dicom.Element
			for _, it := range el.Value.GetValue().([]*dicom.SequenceItemValue) {
				out = append(out, it.GetValue().([]*dicom.Element))
			}
			return out
		}
	}
	t.Fatalf("no %v", tg)
	return nil
}

func itemValue(t *testing.T, els []*dicom.Element, tg tag.Tag) string {
	t.Helper()
	for _, el := range els {
		if el.Tag == tg {
			if v, ok := el.Value.GetValue().([]string); ok {
				return strings.Join(v, `\`)
			}
			return strings.Trim(el.Value.String(), "[]")
		}
	}
	t.Fatalf("no %v", tg)
	return ""
}

// voxels counts a segment's voxels over all its frames.
func (s segmentationRead) voxels(segment int) int {
	n := 0
	for _, f := range s.frames {
		if f.segment == segment {
			for _, on := range f.on {
				if on {
					n++
				}
			}
		}
	}
	return n
}

// retinaVoxels is how many voxels the retina has from the ILM to BM on
// the measured A-scans, counted from the layers.
func retinaVoxels(src SegmentationSource, rows int) int {
	n := 0
	ilm, bm := src.Layers.Boundaries[imaging.ILM], src.Layers.Boundaries[imaging.BM]
	for i, on := range src.RetinaMeasured {
		if on {
			top, bottom := max(int(math.Ceil(float64(ilm[i]))), 0), min(int(math.Floor(float64(bm[i]))), rows-1)
			n += max(bottom-top+1, 0)
		}
	}
	return n
}

// The segmentation of a real line scan and of a phantom cube is a valid
// DICOM Segmentation (dciodvfy) in the source's study and frame of
// reference, each frame derived from the source frame it lies on, at its
// position; the retina is the measured A-scans' ILM to BM, each lesion
// the report lists is its voxels. The same report makes the same bytes;
// another run makes another instance.
func TestTheSegmentationIsAValidSegmentationOverTheSourceFrames(t *testing.T) {
	lineID, line, _ := realLineExam(t)
	cube := phantomCube(t)
	cases := []struct {
		name     string
		id       octdicom.Identity
		a        analysed
		segments []string
	}{
		{"a real line scan", lineID, line, []string{"Retina (ILM to Bruch's membrane)"}},
		{"a phantom cube with fluid", octdicomtest.Identity(testRef), cube, []string{"Retina (ILM to Bruch's membrane)", "Intraretinal fluid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := segmentation(t, c.id, c.a.rep, c.a.src)
			g := c.a.src.Geometry
			s := readSegmentation(t, obj, c.id, g.Rows, g.Cols)
			checkSegmentCodes(t, obj, s)
			for _, want := range []struct {
				t tag.Tag
				v string
			}{
				{tag.SOPClassUID, SegmentationSOPClass}, {tag.Modality, "SEG"}, {tag.StudyInstanceUID, c.id.StudyInstanceUID},
				{tag.PatientID, c.id.PatientID}, {tag.FrameOfReferenceUID, c.id.FrameOfReferenceUID},
				{tag.SeriesInstanceUID, obj.SeriesInstanceUID}, {tag.SegmentationType, "BINARY"},
			} {
				if got := value(t, s.ds, want.t); got != want.v {
					t.Errorf("%v = %q, want %q", want.t, got, want.v)
				}
			}
			if obj.SeriesInstanceUID == c.id.SeriesInstanceUID {
				t.Error("the segmentation is in the source's series")
			}
			if !slices.Equal(s.labels, c.segments) {
				t.Errorf("segments %q, want %q", s.labels, c.segments)
			}
			for _, f := range s.frames {
				if want := strings.Join(g.Frames[f.source-1].Position, `\`); f.position != want {
					t.Errorf("segment %d over source frame %d at %s, the source frame is at %s", f.segment, f.source, f.position, want)
				}
				if !slices.Contains(f.on, true) {
					t.Errorf("segment %d over source frame %d is empty", f.segment, f.source)
				}
			}
			if got, want := s.voxels(1), retinaVoxels(c.a.src, g.Rows); got != want || want == 0 {
				t.Errorf("the retina has %d voxels, want %d", got, want)
			}
			for i, label := range s.labels[1:] {
				want := 0
				for _, l := range c.a.rep.Lesions {
					if segmentLabel(l.Type) == label {
						want += l.Voxels
					}
				}
				if got := s.voxels(i + 2); got != want {
					t.Errorf("%s has %d voxels, the report's lesions %d", label, got, want)
				}
			}
			again := segmentation(t, c.id, c.a.rep, c.a.src)
			rerun := *c.a.rep
			rerun.Run = "another-run"
			other := segmentation(t, c.id, &rerun, c.a.src)
			if !bytes.Equal(again.Part10, obj.Part10) {
				t.Error("a second call made other bytes")
			}
			if other.SOPInstanceUID == obj.SOPInstanceUID || other.SeriesInstanceUID == obj.SeriesInstanceUID {
				t.Error("another run made the same UIDs")
			}
		})
	}
}

// segmentLabel is the Segment Label of a lesion type.
func segmentLabel(lesionType string) string {
	for _, s := range segmentKinds() {
		if s.lesion == lesionType {
			return s.label
		}
	}
	return ""
}

// What the analysis does not vouch for is not drawn: not the retina
// where it was not measured, nor at all when the measurements are
// withheld; no lesion when the lesions are withheld. An exam that is not
// segmented says why.
func TestTheSegmentationDrawsOnlyWhatTheAnalysisVouchesFor(t *testing.T) {
	cube := phantomCube(t)
	id := octdicomtest.Identity(testRef)
	g := cube.src.Geometry
	// An A-scan the retina was measured on, in the middle of the cube.
	cut := slices.Index(cube.src.RetinaMeasured[2*g.Cols:], true) + 2*g.Cols
	cases := []struct {
		name     string
		change   func(*report.Report, *SegmentationSource, *octdicom.Identity)
		segments []string
		none     string
	}{
		{"the measurements withheld", func(r *report.Report, _ *SegmentationSource, _ *octdicom.Identity) {
			r.Withheld = append(slices.Clone(r.Withheld), imaging.Withheld{Figure: imaging.FigureMeasurements, Reason: "BM unreliable"})
		}, []string{"Intraretinal fluid"}, ""},
		{"the lesions withheld", func(r *report.Report, _ *SegmentationSource, _ *octdicom.Identity) {
			r.LesionsWithheld, r.Lesions = "the BM is not reliable", []imaging.Lesion{}
		}, []string{"Retina (ILM to Bruch's membrane)"}, ""},
		{"an A-scan not measured", func(_ *report.Report, s *SegmentationSource, _ *octdicom.Identity) {
			s.RetinaMeasured = slices.Clone(s.RetinaMeasured)
			s.RetinaMeasured[cut] = false
		}, []string{"Retina (ILM to Bruch's membrane)", "Intraretinal fluid"}, ""},
		{"nothing vouched for", func(r *report.Report, s *SegmentationSource, _ *octdicom.Identity) {
			s.RetinaMeasured, r.LesionsWithheld, r.Lesions = nil, "the BM is not reliable", []imaging.Lesion{}
		}, nil, "nothing the analysis vouches for to draw"},
		{"an ungradable scan", func(r *report.Report, _ *SegmentationSource, _ *octdicom.Identity) {
			r.Quality.Gradable, r.Measurable, r.Figures = imaging.Ungradable, false, nil
		}, nil, "only a measured cube or line scan is segmented"},
		{"a circle scan", func(r *report.Report, _ *SegmentationSource, _ *octdicom.Identity) {
			r.ScanPattern, r.Figures = imaging.Circle, &imaging.RNFLMeasurements{GlobalUm: 97}
		}, nil, "only a measured cube or line scan is segmented"},
		{"a source without a frame of reference", func(_ *report.Report, _ *SegmentationSource, id *octdicom.Identity) {
			id.FrameOfReferenceUID = ""
		}, nil, "the source names no frame of reference"},
		{"a source that does not say where its frames lie", func(_ *report.Report, s *SegmentationSource, _ *octdicom.Identity) {
			s.Geometry.Frames = slices.Clone(s.Geometry.Frames)
			s.Geometry.Frames[1].Position = nil
		}, nil, "the source does not say where each frame lies"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, src, cid := *cube.rep, cube.src, id
			c.change(&rep, &src, &cid)
			obj, none, err := Segmentation(cid, &rep, src, Software{Version: "v0.27.0"})
			if err != nil {
				t.Fatal(err)
			}
			if none != c.none || (none == "") != (obj.Part10 != nil) {
				t.Fatalf("none %q with %d bytes, want %q", none, len(obj.Part10), c.none)
			}
			if none != "" {
				return
			}
			s := readSegmentation(t, obj, cid, g.Rows, g.Cols)
			if !slices.Equal(s.labels, c.segments) {
				t.Errorf("segments %q, want %q", s.labels, c.segments)
			}
			if s.labels[0] == "Retina (ILM to Bruch's membrane)" {
				if got, want := s.voxels(1), retinaVoxels(src, g.Rows); got != want {
					t.Errorf("the retina has %d voxels, want %d", got, want)
				}
				f, col := cut/g.Cols, cut%g.Cols
				for _, fr := range s.frames {
					if fr.segment != 1 || fr.source != f+1 {
						continue
					}
					drawn := false
					for r := range g.Rows {
						drawn = drawn || fr.on[r*g.Cols+col]
					}
					if drawn == (c.name == "an A-scan not measured") {
						t.Errorf("the retina drawn on A-scan %d of frame %d: %v", col, f+1, drawn)
					}
				}
			}
		})
	}
}

// A lesion region is drawn only when the report lists it (the same voxel
// count and centroid), typed as the report types it; a kind with a
// listed lesion not in the labels is left out whole.
func TestLesionRegionsAreDrawnOnlyAsTheReportListsThem(t *testing.T) {
	const frames, rows, cols = 3, 40, 30
	labels := make([]uint8, frames*rows*cols)
	box := func(label uint8, f0, f1, r0, r1, c0, c1 int, kind string) imaging.Lesion {
		return markBox(labels, rows, cols, label, [2]int{f0, f1}, [2]int{r0, r1}, [2]int{c0, c1}, kind)
	}
	irf := box(imaging.LabelFluid, 0, 1, 5, 9, 2, 6, imaging.IntraretinalFluid)
	srf := box(imaging.LabelFluid, 1, 2, 20, 22, 20, 27, imaging.SubretinalFluid)
	box(imaging.LabelFluid, 2, 2, 30, 31, 2, 3, "")                          // a speck the report does not list
	drusen := box(imaging.LabelDrusen, 0, 0, 33, 35, 10, 25, imaging.Drusen) // listed
	ped := box(imaging.LabelDrusen, 2, 2, 33, 38, 5, 12, imaging.PED)
	ped.Voxels++ // listed, but no region of the labels is it
	rep := &report.Report{Lesions: []imaging.Lesion{irf, srf, drusen, ped}}
	masks := lesionMasks(rep, labels, frames, rows, cols)
	want := map[string]int{imaging.IntraretinalFluid: irf.Voxels, imaging.SubretinalFluid: srf.Voxels, imaging.Drusen: drusen.Voxels}
	got := map[string]int{}
	for kind, m := range masks {
		for i := range labels {
			if m.get(i) {
				got[kind]++
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("drawn %v, want %v", got, want)
	}
}

// markBox marks the box of frames f, rows r and columns c (each
// inclusive) of labels (frames × rows × cols) with label and returns the
// lesion imaging would list for it: its voxels and rounded centroid.
func markBox(labels []uint8, rows, cols int, label uint8, f, r, c [2]int, kind string) imaging.Lesion {
	n, sf, sc := 0, 0, 0
	for ff := f[0]; ff <= f[1]; ff++ {
		for rr := r[0]; rr <= r[1]; rr++ {
			for cc := c[0]; cc <= c[1]; cc++ {
				labels[(ff*rows+rr)*cols+cc] = label
				n, sf, sc = n+1, sf+ff, sc+cc
			}
		}
	}
	return imaging.Lesion{Type: kind, Voxels: n, Frame: int(math.Round(float64(sf) / float64(n))), Col: int(math.Round(float64(sc) / float64(n)))}
}

// codedSegment is what a segment of a kind is coded as: its Segmented
// Property Category and Type and its Anatomic Region, each "value,
// scheme, meaning" ("" for none).
type codedSegment struct {
	category, kind, region string
}

// wantSegmentCodes are the codes of each kind, by lesion type ("" the
// retina), written out here and not taken from segmentKinds, so that a
// changed code fails. The standard ones are as their sources spell
// them (docs/dicom.md): the categories CID 7150's and the retina CID
// 4209's and 4211's in PS3.16 (pydicom's tables of PS3.16 2024c),
// drusen SNOMED CT's 247153005 |Retinal drusen (finding)|; the others
// are octflow's own, no standard code having been checked for them.
func wantSegmentCodes() map[string]codedSegment {
	const (
		anatomical = "91723000, SCT, Anatomical Structure"
		abnormal   = "49755003, SCT, Morphologically Abnormal Structure"
		retina     = "5665001, SCT, Retina"
	)
	return map[string]codedSegment{
		"":                        {anatomical, retina, ""},
		imaging.IntraretinalFluid: {abnormal, "IRF, 99OCTFLOW, Intraretinal fluid", retina},
		imaging.SubretinalFluid:   {abnormal, "SRF, 99OCTFLOW, Subretinal fluid", retina},
		imaging.Drusen:            {abnormal, "247153005, SCT, Retinal drusen", retina},
		imaging.PED:               {abnormal, "PED, 99OCTFLOW, Pigment epithelial detachment", retina},
	}
}

func codeString(c octdicom.CodedEntry) string {
	if c == (octdicom.CodedEntry{}) {
		return ""
	}
	return c.Value + ", " + c.Scheme + ", " + c.Meaning
}

// Each kind octflow draws, the retina and every lesion type imaging
// finds, has one segment kind, coded as its source gives it; only the
// kinds no standard code was checked for are in octflow's own scheme.
func TestEachSegmentKindHasItsCode(t *testing.T) {
	want := wantSegmentCodes()
	seen := map[string]int{}
	for _, s := range segmentKinds() {
		seen[s.lesion]++
		var region octdicom.CodedEntry
		if s.lesion != "" {
			region = retinaCode()
		}
		got := codedSegment{codeString(s.category), codeString(s.kind), codeString(region)}
		if w, ok := want[s.lesion]; !ok || got != w {
			t.Errorf("%q (%s) is coded %+v, want %+v", s.lesion, s.label, got, w)
		}
		if standard := s.kind.Scheme == "SCT" || s.kind.Scheme == "DCM"; !standard && s.kind.Scheme != localScheme {
			t.Errorf("%s is coded in %s, neither a standard scheme nor octflow's", s.label, s.kind.Scheme)
		}
	}
	for _, lesion := range []string{"", imaging.IntraretinalFluid, imaging.SubretinalFluid, imaging.Drusen, imaging.PED} {
		if seen[lesion] != 1 {
			t.Errorf("%q has %d segment kinds, want 1", lesion, seen[lesion])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("segment kinds of %d types, want %d", len(seen), len(want))
	}
}

// checkSegmentCodes checks a segmentation as dciodvfy and a PACS read
// it: each segment coded as its kind must be (wantSegmentCodes), no
// dciodvfy error, and the Coding Scheme Identification Sequence,
// declaring octflow's scheme, there exactly when a segment is coded in
// it: dciodvfy's only warning is then that scheme's designator, which
// it does not know.
func checkSegmentCodes(t *testing.T, obj Object, s segmentationRead) {
	t.Helper()
	byLabel := map[string]string{}
	for _, k := range segmentKinds() {
		byLabel[k.label] = k.lesion
	}
	want := wantSegmentCodes()
	private := false
	for i, it := range segItems(t, s.ds.Elements, tag.SegmentSequence) {
		lesion, ok := byLabel[s.labels[i]]
		if !ok {
			t.Errorf("segment %d: label %q is no kind's", i+1, s.labels[i])
			continue
		}
		got := codedSegment{segmentCode(t, it, tag.SegmentedPropertyCategoryCodeSequence),
			segmentCode(t, it, tag.SegmentedPropertyTypeCodeSequence), segmentCode(t, it, tag.AnatomicRegionSequence)}
		if got != want[lesion] {
			t.Errorf("segment %d (%s) is coded %+v, want %+v", i+1, s.labels[i], got, want[lesion])
		}
		private = private || strings.Contains(got.kind, ", "+localScheme+", ")
	}
	var schemes []string
	if _, err := s.ds.FindElementByTag(tag.CodingSchemeIdentificationSequence); err == nil {
		for _, it := range segItems(t, s.ds.Elements, tag.CodingSchemeIdentificationSequence) {
			schemes = append(schemes, itemValue(t, it, tag.CodingSchemeDesignator))
		}
	}
	var wantSchemes []string
	if private {
		wantSchemes = []string{localScheme}
	}
	if !slices.Equal(schemes, wantSchemes) {
		t.Errorf("Coding Scheme Identification Sequence declares %q, want %q", schemes, wantSchemes)
	}
	errs, warnings := dciodvfy(t, obj)
	if len(errs) > 0 {
		t.Errorf("dciodvfy errors:\n%s", strings.Join(errs, "\n"))
	}
	for _, w := range warnings {
		if !private || !strings.Contains(w, "Unrecognized defined term = <"+localScheme+">") {
			t.Errorf("dciodvfy warning: %s", w)
		}
	}
}

// segmentCode is the code of a code sequence's one item in an item's
// elements as "value, scheme, meaning"; "" when it has no such sequence.
func segmentCode(t *testing.T, els []*dicom.Element, seq tag.Tag) string {
	t.Helper()
	if !slices.ContainsFunc(els, func(el *dicom.Element) bool { return el.Tag == seq }) {
		return ""
	}
	items := segItems(t, els, seq)
	if len(items) != 1 {
		t.Errorf("%v has %d items, want 1", seq, len(items))
		return ""
	}
	return itemValue(t, items[0], tag.CodeValue) + ", " + itemValue(t, items[0], tag.CodingSchemeDesignator) + ", " +
		itemValue(t, items[0], tag.CodeMeaning)
}

// Each lesion kind, drawn alone or with the others, is coded in the
// object as its kind must be, and dciodvfy finds no error in it: an
// object with no kind in octflow's scheme declares no such scheme and
// has no warning.
func TestEachLesionKindIsCodedInTheSegmentation(t *testing.T) {
	const frames, rows, cols = 3, 40, 30
	labels := make([]uint8, frames*rows*cols)
	lesions := map[string]imaging.Lesion{
		imaging.IntraretinalFluid: markBox(labels, rows, cols, imaging.LabelFluid, [2]int{0, 1}, [2]int{5, 9}, [2]int{2, 6}, imaging.IntraretinalFluid),
		imaging.SubretinalFluid:   markBox(labels, rows, cols, imaging.LabelFluid, [2]int{1, 2}, [2]int{20, 22}, [2]int{20, 27}, imaging.SubretinalFluid),
		imaging.Drusen:            markBox(labels, rows, cols, imaging.LabelDrusen, [2]int{0, 0}, [2]int{33, 35}, [2]int{10, 25}, imaging.Drusen),
		imaging.PED:               markBox(labels, rows, cols, imaging.LabelDrusen, [2]int{2, 2}, [2]int{33, 38}, [2]int{5, 12}, imaging.PED),
	}
	g := octdicom.Geometry{Rows: rows, Cols: cols}
	layers := &imaging.Layers{Frames: frames, Cols: cols, Boundaries: map[string][]float32{
		imaging.ILM: make([]float32, frames*cols), imaging.BM: make([]float32, frames*cols)}}
	for f := range frames {
		g.Frames = append(g.Frames, octdicom.FrameGeometry{Position: []string{"0", strconv.Itoa(f), "0"},
			Orientation: []string{"1", "0", "0", "0", "0", "1"}, PixelSpacing: []string{"0.004", "0.012"}, SliceThickness: "1"})
	}
	src := SegmentationSource{Geometry: g, Layers: layers, Labels: labels}
	id := octdicomtest.Identity(testRef)
	cases := [][]string{{imaging.IntraretinalFluid}, {imaging.SubretinalFluid}, {imaging.Drusen}, {imaging.PED},
		{imaging.IntraretinalFluid, imaging.SubretinalFluid, imaging.Drusen, imaging.PED}}
	for _, kinds := range cases {
		t.Run(strings.Join(kinds, "+"), func(t *testing.T) {
			rep := cubeReport()
			var want []string
			for _, k := range kinds {
				rep.Lesions = append(rep.Lesions, lesions[k])
				want = append(want, segmentLabel(k))
			}
			obj := segmentation(t, id, rep, src)
			s := readSegmentation(t, obj, id, rows, cols)
			if !slices.Equal(s.labels, want) {
				t.Fatalf("segments %q, want %q", s.labels, want)
			}
			checkSegmentCodes(t, obj, s)
		})
	}
}

// A real PACS files the segmentation in the source study beside the
// scan and the report, under the source's patient, in a series of its
// own, with every frame.
func TestOrthancFilesTheSegmentationInTheSourceStudy(t *testing.T) {
	o := startOrthanc(t)
	id, a, scan := realLineExam(t)
	if code := o.do(http.MethodPost, "/instances", "application/dicom", scan, nil); code != http.StatusOK {
		t.Fatalf("storing the source scan in Orthanc: %d", code)
	}
	objs := build(t, id, a.rep, renderPDF(t, a.rep))
	seg := segmentation(t, id, a.rep, a.src)
	objs = append(objs, seg)
	if code, failed := o.stow(objs); code != http.StatusOK || len(failed) > 0 {
		t.Fatalf("STOW-RS: %d, failed %v", code, failed)
	}
	want := []string{id.SOPInstanceUID}
	for _, obj := range objs {
		want = append(want, obj.SOPInstanceUID)
	}
	slices.Sort(want)
	if got := o.studyInstances(id.StudyInstanceUID); !slices.Equal(got, want) {
		t.Errorf("the source study holds %v, want the scan, the PDF and the segmentation %v", got, want)
	}
	var meta []map[string]struct{ Value []any }
	path := fmt.Sprintf("/dicom-web/studies/%s/series/%s/instances/%s/metadata", id.StudyInstanceUID, seg.SeriesInstanceUID, seg.SOPInstanceUID)
	if code := o.do(http.MethodGet, path, "", nil, &meta); code != http.StatusOK || len(meta) != 1 {
		t.Fatalf("WADO-RS metadata of the segmentation: %d, %d instances", code, len(meta))
	}
	for attr, want := range map[string]string{"00080016": SegmentationSOPClass, "00080060": "SEG", "00100020": id.PatientID,
		"0020000D": id.StudyInstanceUID, "00200052": id.FrameOfReferenceUID, "00280008": "1"} {
		if v := meta[0][attr].Value; len(v) != 1 || fmt.Sprint(v[0]) != want {
			t.Errorf("Orthanc holds the segmentation's %s as %v, want %s", attr, v, want)
		}
	}
	var patients []string
	o.do(http.MethodGet, "/patients", "", nil, &patients)
	if len(patients) != 1 {
		t.Errorf("Orthanc holds %d patients, want the source's", len(patients))
	}
}
