package e2e

// Recording the replay corpus (workflows/testdata): real runs of every
// workflow type on the embedded server, down every path a deploy can
// meet in flight. It runs only when asked:
//
//	OCTFLOW_RECORD_HISTORY_DIR=$PWD/workflows/testdata go test ./cmd/octflow/e2e -run TestRecordReplayCorpus
//
// workflows' replay test replays every file there against today's code,
// and lifecycle's tests fold them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"

	"octflow/activities"
	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
)

func TestRecordReplayCorpus(t *testing.T) {
	dir := os.Getenv("OCTFLOW_RECORD_HISTORY_DIR")
	if dir == "" {
		t.Skip("set OCTFLOW_RECORD_HISTORY_DIR to record the replay corpus")
	}

	t.Run("exams", func(t *testing.T) { recordExams(t, dir) })
	t.Run("aging", func(t *testing.T) { recordAging(t, dir) })
	t.Run("review", func(t *testing.T) { recordReview(t, dir) })
	t.Run("fleet and inbox", func(t *testing.T) { recordLongRunning(t, dir) })
	t.Run("pinned", func(t *testing.T) { recordPinned(t, dir) })
	t.Run("affinity fallback", func(t *testing.T) { recordAffinityFallback(t, dir) })
	t.Run("export", func(t *testing.T) { recordExport(t, dir) })
	t.Run("hedged", func(t *testing.T) { recordHedged(t, dir) })
	t.Run("supersede", func(t *testing.T) { recordSupersede(t, dir) })
}

// recordSupersede records an admin's superseding rerun of a completed
// exam (its pipeline hands the new report to the open review by signal)
// and the first report's review, closed as superseded and continued as
// the new report's.
func recordSupersede(t *testing.T, dir string) {
	const examID = "corpus-supersede"
	h := newHarness(t, 1, corpusKeys(t, dir))
	_, scan := phantomDICOM(t, tiny(330))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: examID}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal(examID); st.State != lifecycle.Completed {
		t.Fatalf("first run ended %s", st.State)
	}
	first, review := h.runID(h.examWF(examID)), h.runID(h.reviewWF(examID))
	h.review(h.sys.Secrets.Clinician, examID, "approve", "", http.StatusOK)
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/exams/"+examID+"/rerun?campus="+h.sys.Secrets.Campus,
		strings.NewReader(`{"supersede":true,"reason":"corpus: algorithm fix"}`), http.StatusAccepted, nil)
	h.waitFor(examID, 2*time.Minute, func(s *api.ExamStatus) bool {
		return s.Runs == 2 && s.State == lifecycle.Completed && s.Review == exam.ReviewPending
	})
	h.waitClosedRun(h.reviewWF(examID), review)
	h.saveRun(h.examWF(examID), first, filepath.Join(dir, "exam_supersede_1.json"))
	h.saveRun(h.examWF(examID), "", filepath.Join(dir, "exam_supersede_2.json"))
	h.saveRun(h.reviewWF(examID), review, filepath.Join(dir, "review_superseded.json"))
}

// recordHedged records an exam whose denoise is held by a node an
// operator then marks degraded: the fleet asks the exam to hedge it on
// the other node, whose run wins; the held try is cancelled.
func recordHedged(t *testing.T, dir string) {
	const examID = "corpus-hedged"
	h := newHarness(t, 0, corpusKeys(t, dir), func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, node string, stage exam.Stage) error {
			if node != "gpu-held" || stage != exam.Denoise || !isExam(ctx, examID) {
				return nil
			}
			// Alive but never done: it heartbeats until cancelled.
			for {
				activity.RecordHeartbeat(ctx)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
		})
	})
	h.startParts(false, gpuworker.Config{NodeID: "gpu-held"})
	_, scan := phantomDICOM(t, tiny(332))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: examID}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.waitFor(examID, time.Minute, func(st *api.ExamStatus) bool {
		return st.Stage == exam.Denoise && (st.State == lifecycle.Claimed || st.State == lifecycle.Executing)
	})
	h.startParts(false, gpuworker.Config{NodeID: "gpu-spare"})
	h.waitNode("gpu-spare", func(v api.NodeView) bool { return v.Pace != nil })
	h.markNode("gpu-held", contract.Degraded)
	if st := h.waitTerminal(examID); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	var got []string
	for _, a := range h.tries(examID) {
		if a.Stage == exam.Denoise {
			got = append(got, fmt.Sprintf("%d %s %s hedge=%v", a.Try, a.Ended, a.Node, a.Hedge))
		}
	}
	if want := []string{"1 cancelled gpu-held hedge=false", "2 done gpu-spare hedge=true"}; !slices.Equal(got, want) {
		t.Fatalf("denoise attempts %v, want %v", got, want)
	}
	h.saveRun(h.examWF(examID), "", filepath.Join(dir, "exam_hedged.json"))
}

// recordExport records an exam of a campus with a PACS (the pipeline
// starts its export), an export delivered to a real Orthanc, and one
// whose PACS never answers: tried again, then failed past its budget.
func recordExport(t *testing.T, dir string) {
	plugin := needOrthanc(t)
	orthanc := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true}}, nil)
	scanOf := func(n int) []byte {
		var b bytes.Buffer
		if err := octdicom.WriteDICOM(&b, imaging.NewPhantom(tiny(uint64(340+n))).Volume, octdicom.Header{
			SOPInstanceUID: fmt.Sprintf("2.25.3401%d", n), StudyInstanceUID: fmt.Sprintf("2.25.3402%d", n),
			SeriesInstanceUID: fmt.Sprintf("2.25.3403%d", n), PatientID: fmt.Sprintf("CORPUS-%d", n)}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		pacs, id, file string
	}{
		{orthanc.base + "/dicom-web", "corpus-export", "export_delivered.json"},
		{"http://127.0.0.1:9/dicom-web", "corpus-export-down", "export_unreachable.json"},
	} {
		h := newHarness(t, 1, corpusKeys(t, dir), func(cfg *devsystem.Config) {
			cfg.PACSURL, cfg.Policy.ExportRetryFor = c.pacs, 8*time.Second
		})
		if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: c.id}, scanOf(len(c.file))); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", c.id, code, err)
		}
		if st := h.waitTerminal(c.id); st.State != lifecycle.Completed {
			t.Fatalf("%s ended %s", c.id, st.State)
		}
		export := contract.ExportWorkflowID(h.ref(c.id))
		h.waitClosed(export)
		h.saveRun(export, "", filepath.Join(dir, c.file))
		if c.id == "corpus-export" {
			h.saveRun(h.examWF(c.id), "", filepath.Join(dir, "exam_export.json"))
		}
		h.stop()
	}
}

// recordPinned records an exam whose later GPU stages went to the node
// that ran its first, and a scan sweep run over what it stored.
func recordPinned(t *testing.T, dir string) {
	h := newHarness(t, 1, corpusKeys(t, dir))
	_, scan := phantomDICOM(t, tiny(330))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "corpus-pinned"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("corpus-pinned"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	h.saveRun(h.examWF("corpus-pinned"), "", filepath.Join(dir, "exam_pinned.json"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := h.sys.App.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "corpus-sweep", TaskQueue: exam.WorkflowQueue},
		contract.ScanSweepWorkflow, contract.SweepInput{Grace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	h.saveRun("corpus-sweep", "", filepath.Join(dir, "sweep_scans.json"))
}

// recordAffinityFallback records an exam whose node stopped polling
// after its first GPU stage: the next stage, sent to that node's queue,
// is not taken within the affinity wait and goes to the shared queue,
// where another node runs it (contract.Unclaimed).
func recordAffinityFallback(t *testing.T, dir string) {
	const examID = "corpus-unclaimed"
	release := make(chan struct{})
	h := newHarness(t, 0, corpusKeys(t, dir), func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, node string, stage exam.Stage) error {
			if node == "gpu-first" && stage == exam.Denoise && isExam(ctx, examID) {
				<-release // held until the node has stopped polling
			}
			return nil
		})
	})
	h.startParts(false, gpuworker.Config{NodeID: "gpu-first"})
	first := h.extra[0]
	_, scan := phantomDICOM(t, tiny(331))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: examID}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.waitFor(examID, time.Minute, func(st *api.ExamStatus) bool {
		return st.Stage == exam.Denoise && (st.State == lifecycle.Claimed || st.State == lifecycle.Executing)
	})
	stopped := make(chan struct{})
	go func() { first.Stop(); close(stopped) }()
	// Stop cancels the node's polls at once and then drains: give it a
	// moment to stop polling, let the held stage finish, and only then
	// start a node that may take the next stage from the shared queue.
	time.Sleep(time.Second)
	close(release)
	<-stopped
	h.extra = h.extra[1:]
	h.startParts(false, gpuworker.Config{NodeID: "gpu-second"})
	if st := h.waitTerminal(examID); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	unclaimed := 0
	h.stageEvents(examID, exam.Layers, func(ev *historypb.HistoryEvent) bool {
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil && a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			unclaimed++
		}
		return true
	})
	if unclaimed != 1 {
		t.Fatalf("layers timed out unclaimed %d times, want once", unclaimed)
	}
	h.saveRun(h.examWF(examID), "", filepath.Join(dir, "exam_unclaimed.json"))
}

// recordExams records a plain exam, a retried stage, a stage rescheduled
// after an infrastructure failure, a DEAD exam and its rerun.
// corpusKeys seals a harness's payloads as in production, with the
// corpus's own test key (dir/codec-keys.json), so the replay test can
// open what it replays.
func corpusKeys(t *testing.T, dir string) func(*devsystem.Config) {
	keys, err := os.ReadFile(filepath.Join(dir, "codec-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	return func(c *devsystem.Config) {
		if err := os.WriteFile(filepath.Join(c.DataDir, "codec-keys.json"), keys, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func recordExams(t *testing.T, dir string) {
	var mu sync.Mutex
	failed := map[string]bool{}
	once := func(id string) bool { // true the first time only
		mu.Lock()
		defer mu.Unlock()
		first := !failed[id]
		failed[id] = true
		return first
	}
	h := newHarness(t, 1, corpusKeys(t, dir), func(c *devsystem.Config) {
		// Short enough to spend within the recording.
		c.Policy.InfraRetryFor, c.Policy.UrgentSLA = 3*time.Second, time.Second
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			switch {
			case isExam(ctx, "corpus-spent") && stage == exam.Layers:
				return errors.New("simulated CUDA out of memory, every time")
			case isExam(ctx, "corpus-infra-spent") && stage == exam.Lesions:
				return temporal.NewApplicationError("unavailable: the object store does not answer", contract.ErrTypeInfrastructure)
			case isExam(ctx, "corpus-sla") && stage == exam.Denoise && once("corpus-sla"):
				time.Sleep(1500 * time.Millisecond) // past the urgent SLA
			case isExam(ctx, "corpus-retry") && stage == exam.Layers && once("corpus-retry"):
				return errors.New("simulated CUDA out of memory")
			case isExam(ctx, "corpus-lost") && stage == exam.Layers && once("corpus-lost"):
				// What a node that restarted says of the attempt it held
				// when it died (gpuworker.Takes): lost, retry at once.
				return temporal.NewApplicationErrorWithOptions("the node restarted while it held the stage", contract.ErrTypeNodeLost,
					temporal.ApplicationErrorOptions{NextRetryDelay: time.Millisecond, Details: []any{contract.FailureDetails{Node: "sim-gpu-node-1"}}})
			case isExam(ctx, "corpus-infra") && stage == exam.Lesions && once("corpus-infra"):
				return temporal.NewApplicationError("unavailable: get exams/corpus-infra/layers.json: connection refused", contract.ErrTypeInfrastructure)
			case isExam(ctx, "corpus-dead") && stage == exam.Measure && once("corpus-dead"):
				return temporal.NewNonRetryableApplicationError("measurements impossible on this volume", "InvalidVolume", nil)
			}
			return nil
		})
	})
	ctx := context.Background()
	refuser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this workstation takes no events", http.StatusGone)
	}))
	defer refuser.Close()
	for i, id := range []string{"corpus-plain", "corpus-retry", "corpus-infra", "corpus-dead", "corpus-spent", "corpus-infra-spent",
		"corpus-notify", "corpus-sla", "corpus-lost"} {
		_, scan := phantomDICOM(t, tiny(uint64(300+i)))
		meta := intake.Meta{ExamID: id, Priority: "normal"}
		switch id {
		case "corpus-sla":
			meta.Priority = "urgent"
		case "corpus-notify":
			meta.CallbackURL = refuser.URL + "/hook" // a 4xx is final: the notification fails, the report stands
		}
		if _, code, err := h.device.Submit(ctx, meta, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		h.waitTerminal(id)
	}
	deadRun := h.runID(h.examWF("corpus-dead"))
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/exams/corpus-dead/rerun?campus="+h.sys.Secrets.Campus, nil, http.StatusAccepted, nil)
	if st := h.waitTerminal("corpus-dead"); st.State != lifecycle.Completed {
		t.Fatalf("rerun ended %s", st.State)
	}
	for file, id := range map[string]string{
		"exam_plain.json":         "corpus-plain",
		"exam_retry.json":         "corpus-retry",
		"exam_node_lost.json":     "corpus-lost",
		"exam_infra_retry.json":   "corpus-infra",
		"exam_dead_attempts.json": "corpus-spent",
		"exam_dead_infra.json":    "corpus-infra-spent",
		"exam_notify_failed.json": "corpus-notify",
		"exam_urgent_sla.json":    "corpus-sla",
		"exam_rerun_2.json":       "corpus-dead",
	} {
		h.saveRun(h.examWF(id), "", filepath.Join(dir, file))
	}
	h.saveRun(h.examWF("corpus-dead"), deadRun, filepath.Join(dir, "exam_rerun_1_dead.json"))
}

// recordAging records a low exam promoted twice while no GPU node runs.
func recordAging(t *testing.T, dir string) {
	h := newHarness(t, 0, corpusKeys(t, dir), func(c *devsystem.Config) {
		c.Policy.Aging = map[exam.Priority]time.Duration{exam.Low: 2 * time.Second, exam.Normal: 2 * time.Second}
	})
	_, scan := phantomDICOM(t, tiny(310))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "corpus-aging", Priority: "low"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.waitFor("corpus-aging", time.Minute, func(s *api.ExamStatus) bool { return s.EffectivePriority == exam.Urgent })
	h.startParts(false, gpuworker.Config{NodeID: "gpu-corpus"})
	h.waitTerminal("corpus-aging")
	h.saveRun(h.examWF("corpus-aging"), "", filepath.Join(dir, "exam_aging.json"))
}

// recordReview records an urgent exam reminded until its window closed,
// its first reminder pushed again after the workstation failed it once,
// and a review with decisions, one of them refused after the window.
func recordReview(t *testing.T, dir string) {
	var failed sync.Once
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusNoContent
		if strings.HasSuffix(r.Header.Get(activities.IdempotencyKey), "/reminder-1") {
			failed.Do(func() { status = http.StatusServiceUnavailable })
		}
		w.WriteHeader(status)
	}))
	defer ws.Close()
	h := newHarness(t, 1, corpusKeys(t, dir), func(c *devsystem.Config) {
		c.Policy.ReviewWindow, c.Policy.ReviewReminder = 7*time.Second, 2*time.Second
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(320))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "corpus-remind", Priority: "urgent", CallbackURL: ws.URL + "/hook"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	_, scan = phantomDICOM(t, tiny(321))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "corpus-decide"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.waitTerminal("corpus-decide")
	clin := h.sys.Secrets.Clinician
	h.review(clin, "corpus-decide", "approve", "no fluid", http.StatusOK)
	h.review(clin, "corpus-decide", "reject", "", http.StatusConflict)
	h.review(clin, "corpus-decide", "amend", "drusen nasal", http.StatusOK)
	for _, id := range []string{"corpus-remind", "corpus-decide"} {
		h.waitClosed(h.reviewWF(id))
	}
	h.review(clin, "corpus-decide", "amend", "too late", http.StatusConflict)
	h.saveRun(h.reviewWF("corpus-remind"), "", filepath.Join(dir, "review_reminders.json"))
	h.saveRun(h.reviewWF("corpus-decide"), "", filepath.Join(dir, "review_decisions.json"))
}

// recordLongRunning records a fleet and an inbox run that continue as
// new, with a history limit low enough to reach it quickly.
func recordLongRunning(t *testing.T, dir string) {
	h := newHarness(t, 0, corpusKeys(t, dir), func(c *devsystem.Config) { c.APIOnly = true })
	ctx := context.Background()
	c := h.sys.App.Client()
	start := func(id, name string, state any) string {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: exam.WorkflowQueue}, name, state)
		if err != nil {
			t.Fatal(err)
		}
		return run.GetRunID()
	}
	fleetRun := start("corpus-fleet", contract.FleetWorkflow, contract.FleetState{HistoryLimit: 30})
	inboxRun := start("corpus-inbox", contract.InboxWorkflow, contract.InboxState{Campus: "corpus", HistoryLimit: 30})
	h.startParts(true) // the workflow worker
	for i := range 20 {
		report := contract.NodeReport{NodeID: fmt.Sprintf("gpu-%d", i%3), Interval: time.Second}
		if err := c.SignalWorkflow(ctx, "corpus-fleet", "", contract.NodeReportSignal, report); err != nil {
			t.Fatal(err)
		}
		event := contract.ReportReadyEvent{ExamID: fmt.Sprintf("e-%d", i%15), Campus: "corpus", Priority: exam.Normal}
		if err := c.SignalWorkflow(ctx, "corpus-inbox", "", contract.InboxEventSignal, event); err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "corpus-fleet",
				UpdateName: contract.ResetBreakerUpdate, Args: []any{"gpu-1"}, WaitForStage: client.WorkflowUpdateStageCompleted})
			if err != nil || handle.Get(ctx, nil) != nil {
				t.Fatalf("reset breaker: %v", err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.waitClosedRun("corpus-fleet", fleetRun)
	h.waitClosedRun("corpus-inbox", inboxRun)
	h.saveRun("corpus-fleet", fleetRun, filepath.Join(dir, "fleet_continue_as_new.json"))
	h.saveRun("corpus-inbox", inboxRun, filepath.Join(dir, "inbox_continue_as_new.json"))
}

func (h *harness) runID(workflowID string) string {
	h.t.Helper()
	desc, err := h.sys.App.Client().DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// waitClosed waits until a workflow's latest run has closed.
func (h *harness) waitClosed(workflowID string) { h.waitClosedRun(workflowID, "") }

func (h *harness) waitClosedRun(workflowID, runID string) {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		desc, err := h.sys.App.Client().DescribeWorkflowExecution(context.Background(), workflowID, runID)
		if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Fatalf("%s %s still running", workflowID, runID)
}

// saveRun writes a run's history as JSON, the format the replayer reads.
func (h *harness) saveRun(workflowID, runID, path string) {
	h.t.Helper()
	it := h.sys.App.Client().GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var history historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			h.t.Fatal(err)
		}
		history.Events = append(history.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&history)
	if err != nil {
		h.t.Fatal(err)
	}
	// Pretty, stable JSON for review in diffs.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		h.t.Fatal(err)
	}
	if b, err = json.MarshalIndent(v, "", "  "); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.t.Logf("recorded %d events of %s to %s", len(history.Events), workflowID, path)
}
