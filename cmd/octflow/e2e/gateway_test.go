package e2e

// The gateway against hostile and unlucky clients: hostile files, slow
// uploads, a start whose outcome is unknown, a lost scan, the scan
// sweep.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/gpuworker"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom/hostile"
)

// TestHostileFilesAreRefusedAndTheGatewayStaysSmall sends each hostile
// file to a real `octflow dev` process and reads the process's peak
// memory afterwards.
func TestHostileFilesAreRefusedAndTheGatewayStaysSmall(t *testing.T) {
	dev := startDev(t, 0)
	cmd, base, secrets := dev.cmd, dev.base, dev.secrets
	before := peakRSS(t, cmd.Process.Pid)
	device := &api.Client{Base: base, Token: secrets.Device}
	for _, f := range hostile.Files() {
		_, code, err := device.Submit(context.Background(), intake.Meta{ExamID: "hostile-" + f.Name}, f.Data)
		if code != http.StatusUnprocessableEntity || err == nil || !strings.Contains(err.Error(), "not a valid OCT volume") {
			t.Errorf("%s (%s): %d %v, want 422 invalid-volume", f.Name, f.Attack, code, err)
		}
	}
	after := peakRSS(t, cmd.Process.Pid)
	t.Logf("gateway peak memory: %d MiB before the hostile files, %d MiB after", before>>20, after>>20)
	if after > 1<<30 {
		t.Errorf("the gateway's peak memory reached %d MiB, want under 1 GiB", after>>20)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the gateway died: %v", err)
	}
}

// peakRSS is a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestSlowUploadsDoNotBlockOtherDevices has one device hold uploads open
// that send nothing: they take no validation slot, the device's next
// upload is refused (429), another device's exam goes through at once,
// and the silent uploads are cut off after the idle time (408).
func TestSlowUploadsDoNotBlockOtherDevices(t *testing.T) {
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.Uploads = intake.Limits{Validating: 1, PerDevice: 2, Pace: intake.UploadPace{Idle: 3 * time.Second}}
	})
	slow := h.sys.Secrets.Devices[1] // the second campus's device
	var stalled []*stalledUpload
	for range 2 {
		stalled = append(stalled, h.stallUpload(slow.Token))
	}
	_, scan := phantomDICOM(t, tiny(191))
	other := &api.Client{Base: h.sys.App.APIURL(), Token: slow.Token}
	if _, code, _ := other.Submit(context.Background(), intake.Meta{ExamID: "slow-3"}, scan); code != http.StatusTooManyRequests {
		t.Errorf("the slow device's third upload: %d, want 429", code)
	}
	start := time.Now()
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "fast-1"}, scan); code != http.StatusAccepted {
		t.Fatalf("another device's upload while two stall: %d %v", code, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("another device waited %s behind the stalled uploads", took)
	}
	for _, s := range stalled {
		if code := s.wait(t); code != http.StatusRequestTimeout {
			t.Errorf("a silent upload ended %d, want 408 after the idle time", code)
		}
	}
	if st := h.waitTerminal("fast-1"); st.State != lifecycle.Completed {
		t.Errorf("fast-1 ended %s", st.State)
	}
}

type stalledUpload struct{ done chan int }

// stallUpload opens an upload that sends its headers and a little of its
// body, then nothing.
func (h *harness) stallUpload(token string) *stalledUpload {
	h.t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/v1/exams", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	s := &stalledUpload{done: make(chan int, 1)}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.done <- 0
			return
		}
		resp.Body.Close()
		s.done <- resp.StatusCode
	}()
	part, _ := mw.CreateFormFile("scan", "scan.dcm")
	part.Write([]byte("DICM"))
	h.t.Cleanup(func() { pw.Close() })
	time.Sleep(200 * time.Millisecond) // the gateway has taken it
	return s
}

func (s *stalledUpload) wait(t *testing.T) int {
	select {
	case code := <-s.done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("a silent upload was never cut off")
		return 0
	}
}

// flakyStart injects a fault into the starts of exam workflows (a client
// interceptor, as a tracing one would be): the exam named fails once
// after its workflow started (a timeout that came after Temporal acted),
// and the one named fails once before (Temporal never heard).
type flakyStart struct {
	interceptor.ClientInterceptorBase
	failAfter, failBefore string
	fired                 atomic.Int32
}

func (f *flakyStart) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &flakyStartCalls{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, f: f}
}

type flakyStartCalls struct {
	interceptor.ClientOutboundInterceptorBase
	f *flakyStart
}

// ref is the reference of the demo campus's exam examID.
func (f *flakyStart) ref(examID string) string {
	return intake.NewPseudonymizer([]byte(testPseudonymKey)).Exam(devsystem.FirstCampus, examID)
}

func (c *flakyStartCalls) ExecuteWorkflow(ctx context.Context, in *interceptor.ClientExecuteWorkflowInput) (client.WorkflowRun, error) {
	f, id := c.f, in.Options.ID
	if in.WorkflowType != contract.ExamWorkflow {
		return c.Next.ExecuteWorkflow(ctx, in)
	}
	switch {
	case strings.HasSuffix(id, "/"+f.ref(f.failBefore)) && f.fired.CompareAndSwap(0, 1):
		return nil, context.DeadlineExceeded
	case strings.HasSuffix(id, "/"+f.ref(f.failAfter)) && f.fired.CompareAndSwap(1, 2):
		if _, err := c.Next.ExecuteWorkflow(ctx, in); err != nil {
			return nil, err
		}
		return nil, context.DeadlineExceeded
	}
	return c.Next.ExecuteWorkflow(ctx, in)
}

func TestAStartWithAnUnknownOutcomeLosesNoScan(t *testing.T) {
	flaky := &flakyStart{failBefore: "unknown-1", failAfter: "unknown-2"}
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.ClientInterceptors = []interceptor.ClientInterceptor{flaky}
	})
	ctx := context.Background()
	_, scan1 := phantomDICOM(t, tiny(201))
	_, scan2 := phantomDICOM(t, tiny(202))
	// Temporal never heard of it: 503, the scan stays, and the resend
	// runs the exam on it.
	if _, code, _ := h.device.Submit(ctx, intake.Meta{ExamID: "unknown-1"}, scan1); code != http.StatusServiceUnavailable {
		t.Fatalf("a failed start answered %d, want 503", code)
	}
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "unknown-1"}, scan1); code != http.StatusAccepted {
		t.Fatalf("the resend: %d %v", code, err)
	}
	// The start failed after Temporal created the workflow: the gateway
	// looks, finds it, and answers as for any new exam.
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "unknown-2"}, scan2); code != http.StatusAccepted {
		t.Fatalf("a start that timed out after it worked: %d %v", code, err)
	}
	for _, id := range []string{"unknown-1", "unknown-2"} {
		if st := h.waitTerminal(id); st.State != lifecycle.Completed {
			t.Errorf("%s ended %s: %+v", id, st.State, st.LastFailure)
		}
		if n := h.executions(id); n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
}

func TestAResendStoresAMissingScanAgain(t *testing.T) {
	h := newHarness(t, 0, func(c *devsystem.Config) { c.APIOnly = true })
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(211))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "lost-1"}, scan); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	keys, err := h.store.List(ctx, h.objects("lost-1")+"scan-")
	if err != nil || len(keys) != 1 {
		t.Fatalf("stored scan: %v %v", keys, err)
	}
	if err := h.store.Delete(ctx, keys[0]); err != nil { // the scan is lost
		t.Fatal(err)
	}
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "lost-1"}, scan); code != http.StatusOK {
		t.Fatalf("resend: %d %v", code, err)
	}
	if ok, err := h.store.Exists(ctx, keys[0]); !ok || err != nil {
		t.Fatalf("the resend did not store the scan again: %v %v", ok, err)
	}
	h.startParts(true, gpuworkerConfig("gpu-lost"))
	if st := h.waitTerminal("lost-1"); st.State != lifecycle.Completed {
		t.Errorf("exam ended %s: %+v", st.State, st.LastFailure)
	}
}

func gpuworkerConfig(id string) gpuworker.Config { return gpuworker.Config{NodeID: id} }
