package activities

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
	"octflow/octdicom/results"
	"octflow/report"
	"octflow/storage/storagetest"
)

// fakePACS takes STOW-RS requests, keeping each one's instances, and
// answers WADO-RS metadata requests 200 for what it holds.
type fakePACS struct {
	mu    sync.Mutex
	sends [][][]byte // each request's parts
	held  map[string]bool
}

func (p *fakePACS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Method == http.MethodGet {
		parts := strings.Split(strings.TrimSuffix(r.URL.Path, "/metadata"), "/")
		if !p.held[parts[len(parts)-1]] {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("[{}]"))
		return
	}
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(r.Body, params["boundary"])
	var parts [][]byte
	for {
		part, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(part)
		parts = append(parts, b)
		ds, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil)
		if err == nil {
			p.held[str(ds.Elements, tag.SOPInstanceUID)] = true
		}
	}
	p.sends = append(p.sends, parts)
	_, _ = w.Write([]byte("{}"))
}

// str is the first value of a text element of els.
func str(els []*dicom.Element, tg tag.Tag) string {
	for _, el := range els {
		if el.Tag == tg {
			if v, ok := el.Value.GetValue().([]string); ok && len(v) > 0 {
				return strings.TrimRight(v[0], "\x00 ")
			}
		}
	}
	return ""
}

// items are the items of the sequence tg of els.
func items(els []*dicom.Element, tg tag.Tag) [][]*dicom.Element {
	var out [][]*dicom.Element
	for _, el := range els {
		if el.Tag == tg {
			its, _ := el.Value.GetValue().([]*dicom.SequenceItemValue)
			for _, it := range its {
				out = append(out, it.GetValue().([]*dicom.Element))
			}
		}
	}
	return out
}

// sentObject is an object as the PACS got it.
type sentObject struct {
	class, instance, series, seriesNumber string
	// predecessors and evidence are the SOP Instance UIDs its
	// Predecessor Documents Sequence and its Current Requested
	// Procedure Evidence Sequence (a rejection note's) name.
	predecessors, evidence []string
	part10                 []byte
}

func referenced(els []*dicom.Element, tg tag.Tag) []string {
	var out []string
	for _, study := range items(els, tg) {
		for _, series := range items(study, tag.ReferencedSeriesSequence) {
			for _, sop := range items(series, tag.ReferencedSOPSequence) {
				out = append(out, str(sop, tag.ReferencedSOPInstanceUID))
			}
		}
	}
	return out
}

func readSent(t *testing.T, parts [][]byte) []sentObject {
	t.Helper()
	var out []sentObject
	for _, b := range parts {
		ds, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sentObject{class: str(ds.Elements, tag.SOPClassUID), instance: str(ds.Elements, tag.SOPInstanceUID),
			series: str(ds.Elements, tag.SeriesInstanceUID), seriesNumber: str(ds.Elements, tag.SeriesNumber),
			predecessors: referenced(ds.Elements, tag.PredecessorDocumentsSequence),
			evidence:     referenced(ds.Elements, tag.CurrentRequestedProcedureEvidenceSequence), part10: b})
	}
	return out
}

// An exam's export after a rerun's report replaced the one an earlier
// export sent: the new SR and PDF name the earlier ones as their
// predecessors, a rejection note rejects every earlier result (not the
// earlier rejection notes), the new series are numbered apart; a retry
// of the same run sends the same bytes and records nothing new. The
// first run's export sends the PDF and the SR alone.
func TestAnExportAfterARerunReplacesAndRejectsTheEarlierResults(t *testing.T) {
	ref := exam.Ref{Campus: "north", ID: "ex-0123456789abcdef01234567"}
	id := octdicomtest.Identity(ref)
	c, err := codec.New(codec.Keys{Active: "k", Keys: map[string]string{"k": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := octdicom.SealIdentity(c, id)
	if err != nil {
		t.Fatal(err)
	}
	store := storagetest.NewMemory(map[string][]byte{exam.IdentityKey(ref, id.ScanDigest): sealed,
		exam.ReportPDFKey(ref): []byte("%PDF-1.4 the report")})
	pacs := &fakePACS{held: map[string]bool{}}
	srv := httptest.NewServer(pacs)
	defer srv.Close()
	x := &Exporter{Store: store, Targets: map[string]PACSTarget{"north": {URL: srv.URL}}, Identities: c, HTTP: srv.Client()}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(x.ExportToPACS, activity.RegisterOptions{Name: contract.ExportToPACS})

	// export stores run's report, as a run's report stage does, exports
	// it and returns what the PACS got.
	export := func(run string) []sentObject {
		t.Helper()
		rep := report.Report{SchemaVersion: report.SchemaVersion, ExamID: ref.ID, Campus: ref.Campus, Eye: "OD",
			GeneratedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), ScanPattern: imaging.Cube, Measurable: true,
			Quality: imaging.Quality{Gradable: imaging.Gradable, SignalStrength: 8, Grade: "good", GradableFraction: 1},
			Figures: &imaging.Measurements{CentralSubfieldThicknessUm: 271, TotalVolumeMm3: 8.6, MeanThicknessUm: 301,
				ETDRS: map[string]float64{"C": 271, "IS": 338, "IN": 341, "II": 335, "IT": 322, "OS": 297, "ON": 312, "OI": 286, "OT": 280}},
			Algorithms: map[string]string{"measure": "etdrs-v2"}, Run: run}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(t.Context(), exam.ReportJSONKey(ref), bytes.NewReader(b), int64(len(b)), "application/json"); err != nil {
			t.Fatal(err)
		}
		if _, err := env.ExecuteActivity(contract.ExportToPACS, contract.StageInput{Exam: exam.Submission{Campus: ref.Campus,
			ExamID: ref.ID, ScanDigest: id.ScanDigest}}); err != nil {
			t.Fatalf("export of %s: %v", run, err)
		}
		return readSent(t, pacs.sends[len(pacs.sends)-1])
	}
	recorded := func() []string {
		t.Helper()
		rc, _, err := store.Get(t.Context(), exam.ExportsKey(ref))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var r exportsRecord
		if err := json.NewDecoder(rc).Decode(&r); err != nil {
			t.Fatal(err)
		}
		var runs []string
		for _, e := range r.Runs {
			runs = append(runs, e.Run)
		}
		return runs
	}
	classes := func(objs []sentObject) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.class)
		}
		return out
	}
	pdfSR := []string{results.EncapsulatedPDFSOPClass, results.MacularGridSOPClass}
	withKOS := append(slices.Clone(pdfSR), results.KeyObjectSelectionSOPClass)

	run1 := export("run-1")
	if got := classes(run1); !slices.Equal(got, pdfSR) || len(run1[0].predecessors)+len(run1[1].predecessors) > 0 {
		t.Fatalf("the first run sent %v with predecessors %v %v, want a PDF and an SR replacing nothing", got, run1[0].predecessors, run1[1].predecessors)
	}
	run2 := export("run-2")
	if got := classes(run2); !slices.Equal(got, withKOS) {
		t.Fatalf("the rerun sent %v, want %v", got, withKOS)
	}
	for i, kind := range []string{"PDF", "SR"} {
		if want := []string{run1[i].instance}; !slices.Equal(run2[i].predecessors, want) {
			t.Errorf("the rerun's %s names predecessors %v, want the first run's %v", kind, run2[i].predecessors, want)
		}
	}
	if want := []string{run1[0].instance, run1[1].instance}; !slices.Equal(run2[2].evidence, want) {
		t.Errorf("the rerun's rejection note rejects %v, want the first run's PDF and SR %v", run2[2].evidence, want)
	}
	// The retry of the rerun's export: the same objects, nothing new
	// recorded.
	if again := export("run-2"); len(again) != len(run2) || !slices.EqualFunc(again, run2, func(a, b sentObject) bool { return bytes.Equal(a.part10, b.part10) }) {
		t.Error("the rerun's export sent other bytes when tried again")
	}
	if got := recorded(); !slices.Equal(got, []string{"run-1", "run-2"}) {
		t.Errorf("the record lists runs %v, want run-1 and run-2", got)
	}
	run3 := export("run-3")
	if want := []string{run1[0].instance, run1[1].instance, run2[0].instance, run2[1].instance}; len(run3) != 3 || !slices.Equal(run3[2].evidence, want) {
		t.Errorf("the third run's rejection note rejects %v, want both earlier runs' results (not the rejection note) %v", run3[2].evidence, want)
	}
	if want := []string{run2[1].instance}; !slices.Equal(run3[1].predecessors, want) {
		t.Errorf("the third run's SR names predecessors %v, want the second run's SR %v", run3[1].predecessors, want)
	}
	numbers := map[string]bool{}
	for _, o := range slices.Concat(run1, run2, run3) {
		if numbers[o.seriesNumber] {
			t.Errorf("series number %s is used twice", o.seriesNumber)
		}
		numbers[o.seriesNumber] = true
	}
}
