package e2e

// End-to-end tests: the real embedded Temporal server and S3 endpoint,
// the real gateway over HTTP, real workers and GPU nodes, all in this
// process (as `octflow dev` runs them). They run one after another: the
// embedded S3 gateway allows one instance per process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/app"
	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/imaging"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
	"octflow/report"
	"octflow/report/reporttest"
	"octflow/storage"
)

// testPolicy keeps retries and lost-node detection to seconds.
func testPolicy() exam.Policy {
	p := exam.DefaultPolicy()
	p.RetryBase, p.RetryCap, p.HeartbeatTimeout, p.StageTimeout = time.Second, 2*time.Second, 4*time.Second, time.Minute
	p.NodeAffinityWait = 3 * time.Second
	return p
}

// harness is one dev system under test.
type harness struct {
	t      *testing.T
	cfg    devsystem.Config
	log    *zap.Logger
	logs   *syncBuffer // every line logged, at debug level
	sys    *devsystem.System
	extra  []*app.App // workers and nodes a test started later
	device *api.Client
	clin   *api.Client
	// http holds every exchange to api/openapi.yaml (apitest).
	http  *http.Client
	store *storage.Store
}

func newHarness(t *testing.T, gpuNodes int, tweaks ...func(*devsystem.Config)) *harness {
	t.Helper()
	addrs, err := devstack.FreeAddrs("127.0.0.1", 4)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfg: devsystem.Config{
		DataDir: t.TempDir(), APIAddr: addrs[0], TemporalAddr: addrs[1], UIAddr: addrs[2],
		S3Addr: addrs[3], GPUNodes: gpuNodes, Policy: testPolicy(), StopTimeout: 10 * time.Second,
		NodeReportEvery: time.Second,
	}}
	for _, tweak := range tweaks {
		tweak(&h.cfg)
	}
	// The stack's pseudonym key is the tests' own, so that fault hooks,
	// which run before a harness exists, can name exams (isExam).
	if err := os.WriteFile(filepath.Join(h.cfg.DataDir, "pseudonym.key"), []byte(testPseudonymKey), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	// Not zaptest: the server's goroutines may still log after a test has
	// ended. go test shows stderr only for a failing package.
	if h.logs == nil {
		h.logs = &syncBuffer{}
	}
	h.log = zap.New(zapcore.NewTee(
		zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel),
		zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(h.logs), zap.DebugLevel)))
	sys, err := devsystem.Start(context.Background(), h.cfg, h.log)
	if err != nil {
		h.t.Fatal(err)
	}
	h.sys = sys
	// Every request and answer of the harness's clients is held to
	// api/openapi.yaml.
	h.http = apitest.Client(h.t, nil)
	h.device = &api.Client{Base: sys.App.APIURL(), Token: sys.Secrets.Device, HTTP: h.http}
	h.clin = &api.Client{Base: sys.App.APIURL(), Token: sys.Secrets.Clinician, HTTP: h.http}
	creds := sys.Stack.S3Credentials()
	h.store, err = storage.Open(context.Background(), storage.Config{Endpoint: sys.Stack.S3Endpoint(),
		AccessKey: creds.AccessKey, SecretKey: creds.SecretKey, Bucket: "octflow"})
	if err != nil {
		h.t.Fatal(err)
	}
}

// startParts starts workers and/or GPU nodes against the running stack.
func (h *harness) startParts(workers bool, nodes ...gpuworker.Config) {
	h.t.Helper()
	sealer, err := codec.Open(h.sys.Secrets.CodecKeysFile)
	if err != nil {
		h.t.Fatal(err)
	}
	opts := app.Options{Stack: h.sys.StackConfig, Identity: "test-parts", Logger: h.log, StopTimeout: h.cfg.StopTimeout,
		ClientInterceptors: h.cfg.ClientInterceptors, WorkerInterceptors: h.cfg.WorkerInterceptors, Codec: sealer,
		GPU: &app.GPUOptions{Nodes: nodes, ReportEvery: h.cfg.NodeReportEvery, SimulatedCompute: h.cfg.SimulatedCompute}}
	if workers {
		opts.Worker = &app.WorkerOptions{}
	}
	a, err := app.Start(context.Background(), opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.extra = append(h.extra, a)
}

func (h *harness) stop() {
	for _, a := range h.extra {
		a.Stop()
	}
	h.extra = nil
	if h.sys != nil {
		h.sys.Stop()
		h.sys = nil
	}
}

// waitFor polls the exam until cond holds or the deadline passes.
func (h *harness) waitFor(examID string, timeout time.Duration, cond func(*api.ExamStatus) bool) *api.ExamStatus {
	h.t.Helper()
	return waitExam(h.t, h.clin, examID, timeout, cond)
}

// waitExam polls the exam through the gateway client c until cond holds
// or the deadline passes; errors (Temporal or its database down) count
// as not yet.
func waitExam(t *testing.T, c *api.Client, examID string, timeout time.Duration, cond func(*api.ExamStatus) bool) *api.ExamStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *api.ExamStatus
	for time.Now().Before(deadline) {
		if st, err := c.Status(context.Background(), examID); err == nil {
			last = st
			if cond(st) {
				return st
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("exam %s: condition not met within %s; last status %+v", examID, timeout, last)
	return nil
}

func (h *harness) waitTerminal(examID string) *api.ExamStatus {
	return h.waitFor(examID, 2*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
}

// ref is the reference of the demo device's exam examID, as the gateway
// keeps it.
func (h *harness) ref(examID string) exam.Ref {
	return intake.NewPseudonymizer([]byte(h.sys.Secrets.PseudonymKey)).ExamRef(h.sys.Secrets.Campus, examID)
}

// objects is the prefix of the object keys of the demo device's exam
// examID.
func (h *harness) objects(examID string) string {
	ref := h.ref(examID)
	return exam.ScansPrefix + ref.Campus + "/" + ref.ID + "/"
}

// examWF and reviewWF are the workflow IDs of an exam of the demo
// device's campus.
func (h *harness) examWF(examID string) string { return contract.ExamWorkflowID(h.ref(examID)) }

func (h *harness) reviewWF(examID string) string { return contract.ReviewWorkflowID(h.ref(examID)) }

// executions counts the workflow runs Temporal holds for an exam.
func (h *harness) executions(examID string) int {
	h.t.Helper()
	resp, err := h.sys.App.Client().ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", h.examWF(examID)),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(resp.GetExecutions())
}

// stageEvents calls fn with each event of the stage's activities in the
// exam's latest run (scheduled, started, completed, failed, …), in
// order, until fn returns false.
func (h *harness) stageEvents(examID string, stage exam.Stage, fn func(ev *historypb.HistoryEvent) bool) {
	h.t.Helper()
	stageEventsOf(h.t, h.sys.App.Client(), h.examWF(examID), stage, fn)
}

// stageEventsOf is stageEvents for any workflow on any Temporal client.
func stageEventsOf(t *testing.T, c client.Client, workflowID string, stage exam.Stage, fn func(ev *historypb.HistoryEvent) bool) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		id := ev.GetEventId()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[id] = a.GetActivityType().GetName()
		}
		if s := scheduledEventID(ev); s != 0 {
			id = s
		}
		if scheduled[id] == activityOf(stage) && !fn(ev) {
			return
		}
	}
}

// scheduledEventID is the ID of the scheduling event an activity event
// refers to (0 for others).
func scheduledEventID(ev *historypb.HistoryEvent) int64 {
	switch {
	case ev.GetActivityTaskStartedEventAttributes() != nil:
		return ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
	case ev.GetActivityTaskCompletedEventAttributes() != nil:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
	case ev.GetActivityTaskFailedEventAttributes() != nil:
		return ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
	}
	return 0
}

// stageRuns counts completed runs of a stage in the exam's history.
func (h *harness) stageRuns(examID string, stage exam.Stage) int {
	h.t.Helper()
	return stageRunsOf(h.t, h.sys.App.Client(), h.examWF(examID), stage)
}

// stageRunsOf is stageRuns for any workflow on any Temporal client.
func stageRunsOf(t *testing.T, c client.Client, workflowID string, stage exam.Stage) int {
	t.Helper()
	n := 0
	stageEventsOf(t, c, workflowID, stage, func(ev *historypb.HistoryEvent) bool {
		if ev.GetActivityTaskCompletedEventAttributes() != nil {
			n++
		}
		return true
	})
	return n
}

func phantomDICOM(t *testing.T, o imaging.PhantomOptions) (*imaging.Phantom, []byte) {
	t.Helper()
	p := imaging.NewPhantom(o)
	var buf bytes.Buffer
	if err := octdicom.WriteDICOM(&buf, p.Volume, octdicom.Header{SOPInstanceUID: fmt.Sprintf("2.25.%d", o.Seed+1),
		PatientID: fmt.Sprintf("PATIENT-%d", o.Seed)}); err != nil {
		t.Fatal(err)
	}
	return p, buf.Bytes()
}

// readReport reads an exam's report.json from the store, as stored and
// decoded.
func (h *harness) readReport(key string) (report.Report, []byte) {
	h.t.Helper()
	raw, err := h.store.ReadAll(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		h.t.Fatal(err)
	}
	return rep, raw
}

func small(seed uint64) imaging.PhantomOptions {
	return imaging.PhantomOptions{Seed: seed, Frames: 13, Rows: 248, Cols: 256}
}

func TestExamRunsEndToEndToAReportWithPlausibleThickness(t *testing.T) {
	h := newHarness(t, 2)
	ctx := context.Background()
	// A full-size clinical cube (49 × 496 × 512), as a device sends it.
	p, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 7})
	truth, err := p.Truth(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}

	st, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "e2e-1", Priority: "urgent"}, scan)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st.State != lifecycle.Created && st.State != lifecycle.Queued {
		t.Errorf("state right after submit = %s, want CREATED or QUEUED", st.State)
	}
	final := h.waitTerminal("e2e-1")
	if final.State != lifecycle.Completed || final.Report == nil {
		t.Fatalf("final status %+v, want COMPLETED with a report", final)
	}

	rep, raw := h.readReport(final.Report.JSONKey)
	cube, _ := rep.Figures.(*imaging.Measurements)
	if rep.SchemaVersion != report.SchemaVersion || rep.ScanPattern != imaging.Cube || !rep.Measurable ||
		rep.Quality.Gradable != imaging.Gradable || cube == nil || rep.Intensity == nil || rep.Intensity.Encoding != imaging.Linear {
		t.Fatalf("report %s: pattern %s, measurable %v, quality %s (%q), intensity %+v", rep.SchemaVersion, rep.ScanPattern,
			rep.Measurable, rep.Quality.Gradable, rep.Quality.Reasons, rep.Intensity)
	}
	// The report against the phantom's own geometry (not against the
	// measuring code).
	cst, want := cube.CentralSubfieldThicknessUm, truth.Measurements
	if math.Abs(cst-want.CentralSubfieldThicknessUm) > 10 {
		t.Errorf("central subfield thickness %.1f µm, the phantom's %.1f µm", cst, want.CentralSubfieldThicknessUm)
	}
	for _, k := range imaging.ETDRSSubfields {
		if got := cube.ETDRS[k]; math.Abs(got-want.ETDRS[k]) > 10 {
			t.Errorf("ETDRS %s %.1f µm, the phantom's %.1f µm", k, got, want.ETDRS[k])
		}
	}
	if got := cube.TotalVolumeMm3; math.Abs(got-want.TotalVolumeMm3) > 0.15 {
		t.Errorf("macular volume %.3f mm³, the phantom's %.3f mm³", got, want.TotalVolumeMm3)
	}
	if rep.ExamID != h.ref("e2e-1").ID || rep.DeviceID != h.sys.Secrets.DeviceID || rep.Eye != "OD" {
		t.Errorf("report header = %+v", rep)
	}
	if strings.Contains(string(raw), "PATIENT-7") || !strings.HasPrefix(rep.PatientRef, "pt-") {
		t.Errorf("report must carry a pseudonym, not the patient ID; patientRef = %q", rep.PatientRef)
	}
	pdf, err := h.store.ReadAll(ctx, final.Report.PDFKey)
	if err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		t.Errorf("report.pdf: %v, starts %q", err, pdf[:min(len(pdf), 8)])
	}
	keys, err := h.store.List(ctx, h.objects("e2e-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, "PATIENT") {
			t.Errorf("object key %s holds the patient ID", k)
		}
	}
	if len(keys) != 10 {
		t.Errorf("objects = %v, want the exam's record, scan, intensity, denoised, layers, lesions, lesion labels, measurements, report.json, report.pdf", keys)
	}
	t.Log(h.waitMetric("temporal_request", `operation="StartWorkflowExecution"`))
	// Last, so that a missing pdftotext on a developer's machine skips
	// only this.
	t.Run("report PDF text", func(t *testing.T) {
		text := pdfText(t, pdf)
		for _, want := range []string{"Macular OCT report", h.ref("e2e-1").ID, fmt.Sprintf("%.0f µm", cst), "Central subfield thickness", "Layer thickness", "GCL+IPL",
			"chiu-graph/v1", "gradable: signal strength"} {
			if !strings.Contains(text, want) {
				t.Errorf("report.pdf text lacks %q", want)
			}
		}
	})
}

func TestSubmissionIsIdempotentOnTheExamID(t *testing.T) {
	// One token stands for the 20 devices.
	h := newHarness(t, 2, func(c *devsystem.Config) { c.Uploads.PerDevice = 20 })
	ctx := context.Background()
	_, scan := phantomDICOM(t, small(11))
	_, other := phantomDICOM(t, small(12))

	// 20 devices' resends at once: one run, the rest see it.
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			_, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "dup-1"}, scan)
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
			}
			codes[i] = code
		})
	}
	wg.Wait()
	accepted := 0
	for _, c := range codes {
		if c == http.StatusAccepted {
			accepted++
		} else if c != http.StatusOK {
			t.Errorf("concurrent submit answered %d", c)
		}
	}
	if accepted != 1 {
		t.Errorf("%d submissions answered 202, want exactly 1 (codes %v)", accepted, codes)
	}
	if st := h.waitTerminal("dup-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}

	// After completion: the same scan is answered from the finished exam.
	st, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "dup-1"}, scan)
	if err != nil || code != http.StatusOK || st.State != lifecycle.Completed {
		t.Fatalf("resend after completion: %d %v %+v", code, err, st)
	}
	// Another scan under the same exam ID is a conflict and stores nothing.
	if _, code, _ = h.device.Submit(ctx, intake.Meta{ExamID: "dup-1"}, other); code != http.StatusConflict {
		t.Errorf("other scan under a taken exam ID answered %d, want 409", code)
	}

	if n := h.executions("dup-1"); n != 1 {
		t.Errorf("%d workflow executions for the exam, want 1", n)
	}
	if n := h.stageRuns("dup-1", exam.Render); n != 1 {
		t.Errorf("report rendered %d times, want 1", n)
	}
	keys, err := h.store.List(ctx, h.objects("dup-1"))
	if err != nil {
		t.Fatal(err)
	}
	scans := 0
	for _, k := range keys {
		if strings.Contains(k, "/scan-") {
			scans++
		}
	}
	if scans != 1 {
		t.Errorf("scan objects %v, want exactly the accepted one", keys)
	}
}

func TestBadSubmissionsAreRefusedAndLeaveNothing(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	_, scan := phantomDICOM(t, small(21))
	corrupt := append([]byte(nil), scan[:len(scan)/2]...)

	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		kind   string
	}{
		{"no token", func() *http.Request { return h.rawSubmit("", "bad-1", scan) }, 401, "unauthenticated"},
		{"clinician may not submit", func() *http.Request { return h.rawSubmit(h.sys.Secrets.Clinician, "bad-2", scan) }, 403, "forbidden"},
		{"not multipart", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/v1/exams", strings.NewReader("{}"))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Device)
			return r
		}, 415, "unsupported-media"},
		{"bad exam id", func() *http.Request { return h.rawSubmit(h.sys.Secrets.Device, "../x", scan) }, 400, "invalid-meta"},
		{"truncated scan", func() *http.Request { return h.rawSubmit(h.sys.Secrets.Device, "bad-3", corrupt) }, 422, "invalid-volume"},
		{"not DICOM", func() *http.Request { return h.rawSubmit(h.sys.Secrets.Device, "bad-4", []byte("hello")) }, 422, "invalid-volume"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(c.req())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p problems.Problem
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status || p.Type != "urn:octflow:problem:"+c.kind ||
				resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("got %d %s (%s), want %d %s", resp.StatusCode, p.Type, resp.Header.Get("Content-Type"), c.status, c.kind)
			}
		})
	}
	keys, err := h.store.List(ctx, "exams/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("refused submissions left objects: %v", keys)
	}
	for _, id := range []string{"bad-1", "bad-2", "bad-3", "bad-4"} {
		if n := h.executions(id); n != 0 {
			t.Errorf("refused exam %s started %d workflows", id, n)
		}
	}
}

func (h *harness) rawSubmit(token, examID string, scan []byte) *http.Request {
	req, body := api.Multipart(intake.Meta{ExamID: examID}, scan)
	r, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/v1/exams", body)
	r.Header.Set("Content-Type", req)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// TestExamCompletesAfterTheStackRestartsMidStage stops everything (the
// Temporal server, S3, the workers and the node) while a stage runs, with
// no drain, and starts it again: the stage, whose worker never answered,
// is handed back by its node as the node starts again (its note in the
// data dir) and the exam completes with one report.
func TestExamCompletesAfterTheStackRestartsMidStage(t *testing.T) {
	hung := make(chan struct{})
	defer close(hung)
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.StopTimeout = time.Millisecond // no drain: the stage is cut off, as in a crash
		c.WorkerInterceptors = withFaults(func(ctx context.Context, node string, stage exam.Stage) error {
			if isExam(ctx, "restart-1") && stage == exam.Layers && contract.TryOf(activity.GetInfo(ctx).ActivityID) == 1 {
				// The first attempt starts work, then never answers, even
				// when cancelled.
				activity.RecordHeartbeat(ctx, contract.Heartbeat{Node: node, Stage: stage})
				<-hung
			}
			return nil
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, small(31))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "restart-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	// EXECUTING: the server has the attempt's heartbeat, so its retry
	// can name the node (CLAIMED could be seen just before it lands).
	mid := h.waitFor("restart-1", time.Minute, func(s *api.ExamStatus) bool {
		return s.State == lifecycle.Executing && s.Stage == exam.Layers
	})
	t.Logf("stopping the stack while %s is %s on %s", mid.Stage, mid.State, mid.Node)
	h.stop()
	h.start()
	final := h.waitTerminal("restart-1")
	if final.State != lifecycle.Completed {
		t.Fatalf("after restart the exam ended %s: %+v", final.State, final.LastFailure)
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/restart-1/events", http.StatusOK, &events)
	retry := firstEntry(events, lifecycle.RetryWait, exam.Layers)
	if retry == nil || retry.Info["failureType"] != contract.ErrTypeNodeLost || retry.Info["node"] != mid.Node {
		t.Errorf("no retry of layers handed back by %s in the timeline: %+v", mid.Node, events)
	}
	if n := h.stageAttempts("restart-1", exam.Layers); n != 2 {
		t.Errorf("layers ran %d attempts, want the cut-off one and its retry", n)
	}
	if n := h.executions("restart-1"); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if n := h.stageRuns("restart-1", exam.Render); n != 1 {
		t.Errorf("report rendered %d times, want 1", n)
	}
}

func TestRetriedStageShowsFailureRetryWaitAndNodeInTheTimeline(t *testing.T) {
	var mu sync.Mutex
	failed := false
	h := newHarness(t, 2, func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			mu.Lock()
			defer mu.Unlock()
			if stage == exam.Layers && !failed {
				failed = true
				return errors.New("simulated CUDA out of memory")
			}
			return nil
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, small(41))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "retry-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("retry-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s: %+v", st.State, st.LastFailure)
	}

	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/retry-1/events", http.StatusOK, &events)
	var retry, rerun *lifecycle.Entry
	for i, e := range events {
		if e.Stage == exam.Layers && e.To == lifecycle.RetryWait {
			retry = &events[i]
		}
		if e.Stage == exam.Layers && e.To == lifecycle.Executing && e.Info["attempt"] == float64(2) {
			rerun = &events[i]
		}
	}
	if retry == nil || retry.Info["failure"] != "simulated CUDA out of memory" {
		t.Fatalf("no RETRY_WAIT with the failure in the timeline: %+v", events)
	}
	if node, _ := retry.Info["node"].(string); !strings.HasPrefix(node, "sim-gpu-node-") || retry.Actor != node {
		t.Errorf("RETRY_WAIT does not name the node the attempt failed on: %+v", retry)
	}
	if rerun == nil || !strings.HasPrefix(rerun.Actor, "sim-gpu-node-") || rerun.Info["node"] != rerun.Actor {
		t.Errorf("retry attempt without its node: %+v", rerun)
	}
	if last := events[len(events)-1]; last.To != lifecycle.Completed {
		t.Errorf("timeline ends in %s", last.To)
	}
	// Devices submit exams; the timeline is for clinicians and admins.
	h.getJSON(h.sys.Secrets.Device, "/v1/exams/retry-1/events", http.StatusForbidden, nil)
}

func TestAStageThatKeepsFailingSpendsOnlyItsOwnAttempts(t *testing.T) {
	var mu sync.Mutex
	faults := 0
	h := newHarness(t, 1, func(c *devsystem.Config) {
		// Room for three attempts lost with their node, which must not
		// serve the stage's own failures.
		c.Policy.MaxAttempts, c.Policy.LostAttempts = 2, 3
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			if stage != exam.Lesions {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			faults++
			return errors.New("simulated CUDA out of memory")
		})
	})
	_, scan := phantomDICOM(t, tiny(43))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "fail-2"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	st := h.waitTerminal("fail-2")
	if st.State != lifecycle.Dead || st.Stage != exam.Lesions || st.LastFailure == nil ||
		st.LastFailure.Message != "simulated CUDA out of memory" {
		t.Fatalf("exam ended %s at %s (%+v), want DEAD at lesions with the stage's failure", st.State, st.Stage, st.LastFailure)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := h.stageAttempts("fail-2", exam.Lesions); faults != 2 || n != 2 {
		t.Errorf("the stage failed %d times in %d attempts, want 2 in 2", faults, n)
	}
}

// pdfText extracts a PDF's text (reporttest.PDFText).
func pdfText(t *testing.T, pdf []byte) string { return reporttest.PDFText(t, pdf) }

// waitMetric polls GET /metrics until a sample of name with all the
// given labels has a positive value (the SDK reports every second).
func (h *harness) waitMetric(name string, labels ...string) string {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(h.sys.App.MetricsURL())
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for line, v := range metricSamples(b, name, labels...) {
				if v > 0 {
					return line
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Fatalf("no positive sample of %s%v in /metrics", name, labels)
	return ""
}

// metricSamples are the samples, line by line, of the metric name whose
// labels include every one of labels, in a /metrics page (lines whose
// value does not parse are left out).
func metricSamples(page []byte, name string, labels ...string) map[string]float64 {
	samples := map[string]float64{}
lines:
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			samples[line] = v
		}
	}
	return samples
}

// call sends a request with token, checks the status and decodes a JSON
// answer into v (when v is not nil).
func (h *harness) call(method, token, path string, body io.Reader, status int, v any) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.sys.App.APIURL()+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		var p problems.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		h.t.Fatalf("%s %s: %d (%s), want %d", method, path, resp.StatusCode, p.Detail, status)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			h.t.Fatal(err)
		}
	}
}

// getJSON GETs path with token, checks the status and decodes the body.
func (h *harness) getJSON(token, path string, status int, v any) {
	h.t.Helper()
	h.call(http.MethodGet, token, path, nil, status, v)
}

// syncBuffer is a bytes.Buffer many goroutines may log to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
