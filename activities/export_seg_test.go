package activities

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/octdicom"
	"octflow/octdicom/results"
	"octflow/report"
	"octflow/storage"
)

// withPlanes is a scan with what a device writes of where its frames
// lie, as the gateway stores it: a frame of reference, each B-scan's
// plane (0.12 mm apart) and the pixel size in functional groups.
func withPlanes(t *testing.T, scan []byte, frames int) []byte {
	t.Helper()
	ds, err := dicom.Parse(bytes.NewReader(scan), int64(len(scan)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &octdicom.Elements{}
	e.Str(tag.FrameOfReferenceUID, "2.25.77")
	shared := &octdicom.Elements{}
	orient, measures := &octdicom.Elements{}, &octdicom.Elements{}
	orient.Add(tag.ImageOrientationPatient, []string{"1", "0", "0", "0", "0", "1"})
	measures.Add(tag.PixelSpacing, []string{"0.0039", "0.0117"})
	measures.Str(tag.SliceThickness, "0.12")
	shared.Seq(tag.PlaneOrientationSequence, orient)
	shared.Seq(tag.PixelMeasuresSequence, measures)
	e.Seq(tag.SharedFunctionalGroupsSequence, shared)
	var perFrame []*octdicom.Elements
	for f := range frames {
		pos, it := &octdicom.Elements{}, &octdicom.Elements{}
		pos.Add(tag.ImagePositionPatient, []string{"0", strconv.FormatFloat(0.12*float64(f), 'g', 6, 64), "0"})
		it.Seq(tag.PlanePositionSequence, pos)
		perFrame = append(perFrame, it)
	}
	e.Seq(tag.PerFrameFunctionalGroupsSequence, perFrame...)
	// Encode the additions alone, then take their elements over.
	b, err := octdicom.EncodePart10(e, octdicom.OphthalmicTomographySOPClass, "2.25.1")
	if err != nil {
		t.Fatal(err)
	}
	add, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, el := range add.Elements {
		if el.Tag.Group != 2 {
			ds.Elements = append(ds.Elements, el)
		}
	}
	var out bytes.Buffer
	if err := dicom.Write(&out, ds); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// failingStore answers as the store would, but for one key: missing
// (storage's ErrNotFound, as a deleted object) or an error (a store that
// does not answer).
type failingStore struct {
	ObjectStore
	key string
	err error
}

func (s failingStore) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if key == s.key {
		return nil, 0, s.err
	}
	return s.ObjectStore.Get(ctx, key)
}

// The export draws the segmentation from what the stages stored, over
// the stored scan's frames, with the exam's sealed identity; an exam
// whose stored outputs cannot make one is exported without it, saying
// why in the log, and a store that does not answer fails the try.
func TestTheExportDrawsTheSegmentationFromWhatTheStagesStored(t *testing.T) {
	a := &Activities{}
	_, _, sub := runStages(t, a)
	ctx := context.Background()
	scan, err := a.get(ctx, sub.ScanKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.put(ctx, sub.ScanKey, withPlanes(t, scan, pipelinePhantom().Volume.Frames), "application/dicom"); err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := a.getJSON(ctx, exam.ReportJSONKey(sub.Ref()), &rep); err != nil {
		t.Fatal(err)
	}
	keys, err := codec.NewKeys("k")
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	id := octdicom.Identity{Exam: sub.Ref(), ScanDigest: sub.ScanDigest, PatientID: "PID-1", StudyInstanceUID: "2.25.10",
		SeriesInstanceUID: "2.25.11", SOPClassUID: octdicom.OphthalmicTomographySOPClass, SOPInstanceUID: "2.25.12",
		FrameOfReferenceUID: "2.25.77"}
	sealed, err := octdicom.SealIdentity(c, id)
	if err != nil {
		t.Fatal(err)
	}
	unavailableErr := errors.New("connection reset")
	// The retina and each kind of lesion the report lists.
	kinds := map[string]bool{}
	for _, l := range rep.Lesions {
		kinds[l.Type] = true
	}
	if len(kinds) == 0 {
		t.Fatal("the pipeline's phantom has no lesion in its report")
	}
	cases := []struct {
		name     string
		store    ObjectStore
		id       []byte
		segments int // 0: none
		fails    bool
		logged   string
	}{
		{"everything stored", a.Store, sealed, 1 + len(kinds), false, ""},
		{"the lesion labels missing", failingStore{a.Store, exam.LesionLabelsKey(sub.Ref()), storage.ErrNotFound}, sealed, 0, false, "not found"},
		{"the store not answering", failingStore{a.Store, exam.LayersKey(sub.Ref()), unavailableErr}, sealed, 0, true, ""},
	}
	t.Run("sent with the PDF and the SR", func(t *testing.T) {
		var sent []string // the SOP classes of the parts of each STOW-RS request
		pacs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
				mr := multipart.NewReader(r.Body, params["boundary"])
				for {
					p, err := mr.NextPart()
					if err != nil {
						break
					}
					b, _ := io.ReadAll(p)
					ds, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil, dicom.SkipPixelData())
					if err != nil {
						t.Errorf("a part is no DICOM: %v", err)
						continue
					}
					el, _ := ds.FindElementByTag(tag.SOPClassUID)
					sent = append(sent, el.Value.GetValue().([]string)[0])
				}
			}
			w.Header().Set("Content-Type", "application/dicom+json")
			w.Write([]byte("{}"))
		}))
		defer pacs.Close()
		x := &Exporter{Store: a.Store, Identities: c, Targets: map[string]PACSTarget{sub.Campus: {URL: pacs.URL}}}
		if err := a.put(ctx, exam.IdentityKey(sub.Ref(), sub.ScanDigest), sealed, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		out, err := x.ExportToPACS(ctx, contract.StageInput{Exam: sub})
		if err != nil {
			t.Fatal(err)
		}
		pdf, err := a.get(ctx, exam.ReportPDFKey(sub.Ref()))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := results.FromSealed(c, sub.Ref(), sealed, &rep, pdf, results.Software{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, o := range objs {
			want = append(want, o.SOPClassUID)
		}
		want = append(want, results.SegmentationSOPClass)
		if !slices.Equal(sent, want) || len(out.Instances) != len(want) {
			t.Errorf("the export sent %v (%d instances delivered), want %v", sent, len(out.Instances), want)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			x := &Exporter{Store: tc.store, Identities: c, Logger: zap.New(core)}
			seg, err := x.segmentation(ctx, contract.StageInput{Exam: sub}, tc.id, &rep, results.Software{Version: "test"})
			if (err != nil) != tc.fails {
				t.Fatalf("error %v, want failure %v", err, tc.fails)
			}
			if tc.fails && !isUnavailable(err) {
				t.Errorf("the store's failure is %v, not one to try again", err)
			}
			if (seg != nil) != (tc.segments > 0) {
				t.Fatalf("segmentation %v, want %d segments", seg != nil, tc.segments)
			}
			if tc.logged != "" {
				if logs.Len() != 1 || !strings.Contains(logs.All()[0].ContextMap()["reason"].(string), tc.logged) {
					t.Errorf("logged %v, want a warning saying %q", logs.All(), tc.logged)
				}
			}
			if seg == nil {
				return
			}
			ds, err := dicom.Parse(bytes.NewReader(seg.Part10), int64(len(seg.Part10)), nil, dicom.SkipPixelData())
			if err != nil {
				t.Fatal(err)
			}
			el, err := ds.FindElementByTag(tag.SegmentSequence)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(el.Value.GetValue().([]*dicom.SequenceItemValue)); n != tc.segments || seg.Kind != results.KindSegmentation ||
				seg.StudyInstanceUID != id.StudyInstanceUID {
				t.Errorf("%s of %d segments in study %s, want a segmentation of %d in the source's", seg.Kind, n, seg.StudyInstanceUID, tc.segments)
			}
			for _, l := range logs.All() {
				t.Errorf("logged %q", l.Message)
			}
		})
	}
}
