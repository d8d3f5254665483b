package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
)

// sweep runs the scan sweep once, as its schedule would, and returns
// what it did.
func (h *harness) sweep(grace time.Duration) contract.SweepResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := h.sys.App.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fmt.Sprintf("test-sweep-%d", time.Now().UnixNano()), TaskQueue: exam.WorkflowQueue,
	}, contract.ScanSweepWorkflow, contract.SweepInput{Grace: grace})
	if err != nil {
		h.t.Fatal(err)
	}
	var res contract.SweepResult
	if err := run.Get(ctx, &res); err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
	return res
}

// forget makes Temporal forget an exam, as its retention does: both of
// its workflows are deleted from the engine, and the test waits until
// they are gone.
func (h *harness) forget(examID string) {
	h.t.Helper()
	ctx := context.Background()
	c := h.sys.App.Client()
	for _, id := range []string{h.examWF(examID), h.reviewWF(examID)} {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			h.t.Fatalf("describe %s: %v", id, err)
		}
		if _, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: h.sys.StackConfig.Namespace, WorkflowExecution: desc.GetWorkflowExecutionInfo().GetExecution(),
		}); err != nil {
			h.t.Fatalf("delete %s: %v", id, err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := c.DescribeWorkflowExecution(ctx, id, "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				break
			}
			if time.Now().After(deadline) {
				h.t.Fatalf("%s still known a minute after its deletion: %v", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (h *harness) storedKeys(prefix string) []string {
	h.t.Helper()
	keys, err := h.store.List(context.Background(), prefix)
	if err != nil {
		h.t.Fatal(err)
	}
	return keys
}

func (h *harness) putObject(key string, body []byte) {
	h.t.Helper()
	if err := h.store.Put(context.Background(), key, bytes.NewReader(body), int64(len(body)), "application/octet-stream"); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) exists(key string) bool {
	h.t.Helper()
	ok, err := h.store.Exists(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	return ok
}

func TestTheScanSweepRemovesOnlyScansNoExamWillNeed(t *testing.T) {
	h := newHarness(t, 1, func(c *devsystem.Config) { c.SweepEvery = time.Hour })
	ctx := context.Background()
	ref := h.ref
	// A scan that names its study: its exams keep their identity sealed.
	var buf bytes.Buffer
	if err := octdicom.WriteDICOM(&buf, imaging.NewPhantom(tiny(221)).Volume, octdicom.Header{SOPInstanceUID: "2.25.221",
		PatientID: "PATIENT-221", StudyInstanceUID: "2.25.2210", SeriesInstanceUID: "2.25.2211"}); err != nil {
		t.Fatal(err)
	}
	scan := buf.Bytes()
	_, other := phantomDICOM(t, tiny(222))
	for _, id := range []string{"kept-1", "forgotten-1", "repaired-1"} {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id}, scan); code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		if st := h.waitTerminal(id); st.State != lifecycle.Completed {
			t.Fatalf("%s ended %s", id, st.State)
		}
	}
	scanOf := func(id string) string {
		keys := h.storedKeys(h.objects(id) + "scan-")
		if len(keys) != 1 {
			t.Fatalf("%s: stored scans %v", id, keys)
		}
		return keys[0]
	}
	kept, forgotten, repaired := scanOf("kept-1"), scanOf("forgotten-1"), scanOf("repaired-1")
	for _, id := range []string{"kept-1", "forgotten-1", "repaired-1"} {
		if h.storedKeys(h.objects(id)+"intake-") != nil {
			t.Errorf("%s: an accepted exam keeps its intake marker", id)
		}
	}

	// Temporal's retention passed for one exam.
	h.forget("forgotten-1")
	// The gateway stopped between another's start and its record.
	var rec exam.Record
	if err := json.Unmarshal(h.read(exam.RecordKey(ref("repaired-1"))), &rec); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Delete(ctx, exam.RecordKey(ref("repaired-1"))); err != nil {
		t.Fatal(err)
	}
	marker, _ := json.Marshal(exam.Intake{Exam: ref("repaired-1"), ScanDigest: rec.ScanDigest, At: rec.AcceptedAt})
	h.putObject(exam.IntakeKey(ref("repaired-1"), rec.ScanDigest), marker)
	// A gateway stopped between storing a scan and starting its exam.
	neverDigest := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	never := exam.ScanKey(ref("never-started"), neverDigest)
	neverMarker := exam.IntakeKey(ref("never-started"), neverDigest)
	marker, _ = json.Marshal(exam.Intake{Exam: ref("never-started"), ScanDigest: neverDigest, At: time.Now()})
	h.putObject(neverMarker, marker)
	h.putObject(never, other)
	// An upload that lost the race for kept-1's ID with another scan.
	lostDigest := "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
	lost := exam.ScanKey(ref("kept-1"), lostDigest)
	marker, _ = json.Marshal(exam.Intake{Exam: ref("kept-1"), ScanDigest: lostDigest, At: time.Now()})
	h.putObject(exam.IntakeKey(ref("kept-1"), lostDigest), marker)
	h.putObject(lost, other)
	// A scan octflow has no account of: not its to delete.
	foreign := exam.ScanKey(ref("foreign-1"), "0123456789abcdef")
	h.putObject(foreign, other)
	// A marker whose scan was never stored.
	stale := exam.IntakeKey(ref("stale-1"), "fedcba9876543210")
	h.putObject(stale, marker)

	// The sealed identities kept beside the scans no exam took (the
	// sweep never opens them), and those of the accepted exams.
	var accepted []string
	for _, id := range []string{"kept-1", "forgotten-1", "repaired-1"} {
		accepted = append(accepted, h.storedKeys(h.objects(id)+"identity-")...)
	}
	neverIdentity, lostIdentity := exam.IdentityKey(ref("never-started"), neverDigest), exam.IdentityKey(ref("kept-1"), lostDigest)
	staleIdentity := exam.IdentityKey(ref("stale-1"), "fedcba9876543210")
	for _, key := range []string{neverIdentity, lostIdentity, staleIdentity} {
		h.putObject(key, []byte("sealed"))
	}

	res := h.sweep(time.Nanosecond)
	want := contract.SweepResult{Scans: 6, Kept: 3, Repaired: 1, Removed: 2, Unaccounted: 1}
	if res != want {
		t.Errorf("sweep did %+v, want %+v", res, want)
	}
	for key, want := range map[string]bool{
		kept: true, forgotten: true, repaired: true, foreign: true,
		never: false, neverMarker: false, lost: false, stale: false,
		neverIdentity: false, lostIdentity: false, staleIdentity: false,
		exam.RecordKey(ref("repaired-1")): true,
	} {
		if got := h.exists(key); got != want {
			t.Errorf("after the sweep %s stored = %v, want %v", key, got, want)
		}
	}
	if len(accepted) != 3 {
		t.Fatalf("accepted exams keep identities %v, want one each", accepted)
	}
	for _, key := range accepted {
		if !h.exists(key) {
			t.Errorf("the sweep removed %s, the identity of an accepted exam", key)
		}
	}
	// A grace period longer than every object's age leaves all alone.
	h.putObject(never, other)
	if res := h.sweep(time.Hour); res.Scans != 0 || res.Removed != 0 || !h.exists(never) {
		t.Errorf("a sweep within the grace period removed scans: %+v", res)
	}

	// The forgotten exam is still the device's: a resend is answered from
	// its record, never run again, and another scan is still a conflict.
	st, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "forgotten-1"}, scan)
	if code != http.StatusOK || err != nil {
		t.Fatalf("resend after retention: %d %v", code, err)
	}
	if st.State != lifecycle.Completed || st.Report == nil || st.Report.JSONKey != exam.ReportJSONKey(ref("forgotten-1")) {
		t.Errorf("resend after retention answered %+v", st)
	}
	if _, code, _ := h.device.Submit(ctx, intake.Meta{ExamID: "forgotten-1"}, other); code != http.StatusConflict {
		t.Errorf("another scan under a forgotten exam's ID: %d, want 409", code)
	}
	if n := h.executions("forgotten-1"); n != 0 {
		t.Errorf("a resend after retention ran the exam again (%d runs)", n)
	}
}

func (h *harness) read(key string) []byte {
	h.t.Helper()
	rc, _, err := h.store.Get(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// A hospital restores Temporal's database from last night's backup: the
// exams accepted since are gone from Temporal, but their scans are not
// deleted, and each exam completes when its device sends it again.
func TestARestoredTemporalDatabaseLosesNoScan(t *testing.T) {
	h := newHarness(t, 1, func(c *devsystem.Config) { c.APIOnly = true })
	ctx := context.Background()
	campus := h.sys.Secrets.Campus
	snapshot := func(from, to string) {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(from, "temporal*.db*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("Temporal's database files in %s: %v %v", from, files, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore := func(from, to string) {
		t.Helper()
		old, _ := filepath.Glob(filepath.Join(to, "temporal*.db*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		snapshot(from, to)
	}

	_, early := phantomDICOM(t, tiny(231))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "early-1"}, early); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.stop()
	backup := t.TempDir()
	snapshot(h.cfg.DataDir, backup) // last night's backup
	h.start()
	late := map[string][]byte{}
	for i, id := range []string{"late-1", "late-2"} {
		_, late[id] = phantomDICOM(t, tiny(uint64(232+i)))
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id}, late[id]); code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
	}
	h.stop()
	// The restore, onto a new host: the object store as it is, Temporal's
	// database from the backup. (A new data dir, because the embedded
	// server keeps its SQLite connections for the life of the process.)
	moved := t.TempDir()
	if out, err := exec.Command("cp", "-a", h.cfg.DataDir+"/.", moved).CombinedOutput(); err != nil {
		t.Fatalf("copy the data dir: %v %s", err, out)
	}
	restore(backup, moved)
	h.cfg.DataDir, h.cfg.APIOnly = moved, false
	h.start()

	scans := h.storedKeys("exams/" + campus + "/")
	res := h.sweep(time.Nanosecond)
	if res.Removed != 0 || res.Kept != 3 {
		t.Errorf("the sweep after the restore did %+v, want the 3 accepted exams' scans kept", res)
	}
	for _, key := range scans {
		if !h.exists(key) {
			t.Errorf("the sweep after the restore removed %s", key)
		}
	}
	for id, scan := range late {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id}, scan); code != http.StatusAccepted {
			t.Fatalf("resend %s after the restore: %d %v", id, code, err)
		}
	}
	for _, id := range []string{"early-1", "late-1", "late-2"} {
		if st := h.waitTerminal(id); st.State != lifecycle.Completed {
			t.Errorf("%s ended %s: %+v", id, st.State, st.LastFailure)
		}
		if n := h.executions(id); n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
}
