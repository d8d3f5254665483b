package e2e

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"octflow/api/intake"
	"octflow/exam"
	"octflow/imaging"
	"octflow/lifecycle"
	"octflow/octdicom"
)

// A worklist-driven device uses the scan's Accession Number, or the
// Patient ID, as its exam ID. Such an exam is accepted and runs like any
// other, and is found by that ID, but the ID leaves no trace: not in
// Temporal's database (workflow IDs, visibility, history), not in the
// object store (keys or contents, the report's text included), not in
// the log or the audit journal, not in the webhook or the clinician's
// event stream. Everything names the exam by its reference.
func TestAnExamIDThatIsAnIdentifierLeavesNoTrace(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	var (
		mu    sync.Mutex
		hooks [][]byte
	)
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, []byte(r.Header.Get("Idempotency-Key")+"\n"+r.URL.String()+"\n"), body)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ws.Close()

	const accession, patientID = "ACC-20261202-7731", "PID-5550123"
	p := imaging.NewPhantom(tiny(241))
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, p.Volume, octdicom.Header{SOPInstanceUID: "2.25.241", PatientID: patientID,
		Identity: &octdicom.DeviceIdentity{AccessionNumber: accession}}); err != nil {
		t.Fatal(err)
	}
	_, other := phantomDICOM(t, tiny(242))
	sent := map[string][]byte{accession: scan.Bytes(), patientID: other}
	for id, b := range sent {
		st, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, CallbackURL: ws.URL + "/hook"}, b)
		if code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		if !exam.IsReference(st.ExamID) || st.ExamID != h.ref(id).ID {
			t.Errorf("the answer names the exam %q, want its reference %q", st.ExamID, h.ref(id).ID)
		}
	}
	for id := range sent {
		// Found by the device's ID and by the reference alike.
		st := h.waitTerminal(id)
		if st.State != lifecycle.Completed || st.Report == nil {
			t.Fatalf("%s ended %s: %+v", id, st.State, st.LastFailure)
		}
		byRef, err := h.clin.Status(ctx, st.ExamID)
		if err != nil || byRef.ExamID != st.ExamID || byRef.State != lifecycle.Completed {
			t.Fatalf("status by reference: %+v %v", byRef, err)
		}
		var tl []lifecycle.Entry
		h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/"+id+"/events", http.StatusOK, &tl)
		pdf, err := h.store.ReadAll(ctx, st.Report.PDFKey)
		if err != nil {
			t.Fatal(err)
		}
		text := pdfText(t, pdf)
		if !strings.Contains(text, st.ExamID) {
			t.Errorf("the report does not name the exam by its reference %s", st.ExamID)
		}
		for _, x := range []string{accession, patientID} {
			if strings.Contains(text, x) {
				t.Errorf("the report PDF of %s shows %s", id, x)
			}
		}
	}
	var streamed bytes.Buffer
	for _, ev := range h.readEvents(0, len(sent)) {
		streamed.WriteString(ev.event.ExamID + " " + ev.event.Campus + "\n")
		if !exam.IsReference(ev.event.ExamID) {
			t.Errorf("the event stream names an exam %q", ev.event.ExamID)
		}
	}
	h.stop() // everything written out: Temporal's database, objects, the audit journal

	leaks := func(where string, b []byte) {
		t.Helper()
		for _, x := range []string{accession, patientID} {
			if bytes.Contains(b, []byte(x)) {
				t.Errorf("%s holds %s", where, x)
			}
		}
	}
	mu.Lock()
	if len(hooks) != 2*len(sent) {
		t.Errorf("%d webhook deliveries, want %d", len(hooks)/2, len(sent))
	}
	for _, b := range hooks {
		leaks("a webhook delivery", b)
	}
	mu.Unlock()
	leaks("the event stream", streamed.Bytes())
	leaks("the log", []byte(h.logs.String()))
	files := 0
	err := filepath.WalkDir(h.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		leaks("the key "+path, []byte(path))
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		leaks(path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("only %d files under the data dir: the check looked in the wrong place", files)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DataDir, "audit.log")); err != nil {
		t.Errorf("no audit journal to check: %v", err)
	}
}
