package e2e

// What must never take the system down or lose an exam: a stage that
// panics, an object store that goes away mid-burst, an exam that died
// and is run again, a setting that makes no sense.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"

	"go.temporal.io/sdk/temporal"

	"octflow/api"
	"octflow/api/intake"
	"octflow/config"
	"octflow/contract"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

func TestAPanickingStageLeavesItsNodeUpAndOnlyItsExamDead(t *testing.T) {
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			if isExam(ctx, "panic-1") && stage == exam.Layers {
				var frames []int
				_ = frames[7] // a bug that only this exam's input reaches
			}
			return nil
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(161))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "panic-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	dead := h.waitTerminal("panic-1")
	if dead.State != lifecycle.Dead || dead.Stage != exam.Layers || dead.LastFailure == nil ||
		dead.LastFailure.Type != contract.ErrTypeStagePanic || !strings.Contains(dead.LastFailure.Message, "layers panicked: runtime error: index out of range") {
		t.Fatalf("status = %+v (failure %+v), want DEAD at layers with the panic", dead, dead.LastFailure)
	}
	if n := h.stageAttempts("panic-1", exam.Layers); n != 1 {
		t.Errorf("the panicking stage ran %d attempts, want 1: the next node would panic the same way", n)
	}
	// The same node, still up, takes the next exam to its report.
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "after-panic-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("after-panic-1"); st.State != lifecycle.Completed {
		t.Fatalf("the next exam ended %s: %+v", st.State, st.LastFailure)
	}
	// The node judged panic-1's denoise and the next exam's four stages,
	// not the panic: it follows the exam, and would on any node.
	v := h.waitNode("sim-gpu-node-1", func(v api.NodeView) bool { return v.Breaker.Samples >= 5 })
	if v.Status != "up" || v.Breaker.State != exam.BreakerClosed || v.Breaker.Samples != 5 || v.Breaker.FailureRate != 0 {
		t.Errorf("node after the panic: %+v; want up, its breaker closed, 5 stages judged, none failed", v)
	}
}

func TestAnObjectStoreOutageMidBurstCompletesEveryExamAndOpensNoBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("a one-minute outage")
	}
	const exams = 12
	outage := time.Minute
	h := newHarness(t, 0, func(c *devsystem.Config) { c.APIOnly = true })
	// The workers and GPU nodes reach S3 through a proxy the test cuts.
	proxy := newTCPProxy(t, h.sys.StackConfig.S3.Endpoint)
	via := h.sys.StackConfig
	via.S3.Endpoint = proxy.addr
	stageStarted := make(chan struct{}, 1000)
	h.cfg.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
		stageStarted <- struct{}{}
		// Simulated GPU time, so the burst is still running when S3 goes.
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	h.startPartsVia(via, true, gpuworker.Config{NodeID: "gpu-outage-a", GPUs: gpuworker.NewSimulatedInventory(gpuworker.SimulatedGPUs{Count: 2})},
		gpuworker.Config{NodeID: "gpu-outage-b", GPUs: gpuworker.NewSimulatedInventory(gpuworker.SimulatedGPUs{Count: 2})})
	ctx := context.Background()
	for i := range exams {
		_, scan := phantomDICOM(t, tiny(uint64(170+i)))
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: fmt.Sprintf("outage-%02d", i)}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %d: %d %v", i, code, err)
		}
	}
	for range 6 { // the burst is under way
		<-stageStarted
	}
	proxy.cut()
	t.Logf("S3 unreachable from workers and nodes for %s", outage)
	time.Sleep(outage)
	proxy.restore()

	var waited int
	for i := range exams {
		id := fmt.Sprintf("outage-%02d", i)
		st := h.waitFor(id, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
		if st.State != lifecycle.Completed {
			t.Errorf("%s ended %s: %+v", id, st.State, st.LastFailure)
		}
		var events []lifecycle.Entry
		h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/"+id+"/events", http.StatusOK, &events)
		for _, e := range events {
			if e.To == lifecycle.RetryWait && e.Info["failureType"] == contract.ErrTypeInfrastructure {
				waited++
				break
			}
		}
	}
	if waited == 0 {
		t.Error("no exam waited out the outage: the stages never noticed it")
	}
	t.Logf("%d of %d exams waited out the outage in RETRY_WAIT", waited, exams)
	for id, v := range h.nodes() {
		if v.Breaker.State != exam.BreakerClosed || v.Breaker.Trips != 0 {
			t.Errorf("node %s breaker after the outage: %+v; an unreachable store is not the node's fault", id, v.Breaker)
		}
	}
}

func TestAnAdminRerunsADeadExamUnderTheSameID(t *testing.T) {
	var mu sync.Mutex
	broken := true // the first run meets a fault an operator then fixes
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			mu.Lock()
			defer mu.Unlock()
			if isExam(ctx, "rerun-1") && stage == exam.Lesions && broken {
				// Not the node's fault: its breaker stays closed.
				return temporal.NewNonRetryableApplicationError("model server returned garbage", "ModelFailed", nil)
			}
			return nil
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(181))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "rerun-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("rerun-1"); st.State != lifecycle.Dead || st.Stage != exam.Lesions {
		t.Fatalf("first run ended %s at %s, want DEAD at lesions", st.State, st.Stage)
	}
	admin, clin := h.sys.Secrets.Admin, h.sys.Secrets.Clinician
	// Only admins rerun, and only dead exams; a resend does not rerun.
	h.call(http.MethodPost, clin, "/v1/exams/rerun-1/rerun?campus="+h.sys.Secrets.Campus, nil, http.StatusForbidden, nil)
	if st, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "rerun-1"}, scan); err != nil || code != http.StatusOK || st.State != lifecycle.Dead {
		t.Fatalf("resend of a dead exam: %d %v %+v, want 200 DEAD", code, err, st)
	}
	mu.Lock()
	broken = false
	mu.Unlock()
	var st api.ExamStatus
	h.call(http.MethodPost, admin, "/v1/exams/rerun-1/rerun?campus="+h.sys.Secrets.Campus, nil, http.StatusAccepted, &st)
	final := h.waitTerminal("rerun-1")
	if final.State != lifecycle.Completed || final.Runs != 2 || final.Report == nil {
		t.Fatalf("after the rerun: %+v, want COMPLETED in a second run with a report", final)
	}
	h.call(http.MethodPost, admin, "/v1/exams/rerun-1/rerun?campus="+h.sys.Secrets.Campus, nil, http.StatusConflict, nil)

	var events []lifecycle.Entry
	h.getJSON(clin, "/v1/exams/rerun-1/events", http.StatusOK, &events)
	var path []string
	for _, e := range events {
		if e.To == lifecycle.Created || e.To == lifecycle.Dead || e.To == lifecycle.Completed {
			path = append(path, fmt.Sprintf("%s→%s by %s", e.From, e.To, e.Actor))
		}
	}
	want := []string{"→CREATED by demo device", "EXECUTING→DEAD by workflow", "DEAD→CREATED by demo admin", "EXECUTING→COMPLETED by workflow"}
	if strings.Join(path, ", ") != strings.Join(want, ", ") {
		t.Errorf("timeline of both runs: %v, want %v", path, want)
	}
	if n := h.executions("rerun-1"); n != 2 {
		t.Errorf("%d runs in Temporal, want 2", n)
	}
}

func TestABadSettingStopsTheProcessNamingItsVariable(t *testing.T) {
	cases := []struct {
		command string
		env     []string
		want    string
	}{
		{"api", []string{"OCTFLOW_RETRY_BASE=5min", "OCTFLOW_TOKENS_FILE=/dev/null", "OCTFLOW_PSEUDONYM_KEY=0123456789abcdef"}, `OCTFLOW_RETRY_BASE="5min": not a duration`},
		{"worker", []string{"OCTFLOW_DRAIN_TIMEOUT=forever"}, "OCTFLOW_DRAIN_TIMEOUT"},
		{"gpuworker", []string{"OCTFLOW_GPUS=two"}, "OCTFLOW_GPUS"},
		{"gpuworker", []string{"OCTFLOW_SIM_FAILURE_RATE=1.5"}, "OCTFLOW_SIM_FAILURE_RATE"},
		{"dev", []string{"OCTFLOW_BUCKET_WEIGHTS=60/40"}, "OCTFLOW_BUCKET_WEIGHTS"},
		{"dev", []string{"OCTFLOW_CAMPUS_WEIGHTS=north=20"}, "OCTFLOW_CAMPUS_WEIGHTS"},
	}
	for _, c := range cases {
		t.Run(c.command+" "+c.want, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(append(os.Environ(), c.env...), "OCTFLOW_TEST_AS_MAIN="+c.command)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("octflow %s with %v: %v, want a non-zero exit", c.command, c.env, err)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("octflow %s said %q, want it to name %q", c.command, out, c.want)
			}
		})
	}
}

// stageAttempts counts the tries of a stage that a node took in the
// exam's latest run: each try is an activity of its own.
func (h *harness) stageAttempts(examID string, stage exam.Stage) int32 {
	h.t.Helper()
	var n int32
	h.stageEvents(examID, stage, func(ev *historypb.HistoryEvent) bool {
		if ev.GetActivityTaskStartedEventAttributes() != nil {
			n++
		}
		return true
	})
	return n
}

// startPartsVia starts workers and/or GPU nodes that reach the stack as
// stack says.
func (h *harness) startPartsVia(stack config.Stack, workers bool, nodes ...gpuworker.Config) {
	h.t.Helper()
	saved := h.sys.StackConfig
	h.sys.StackConfig = stack
	defer func() { h.sys.StackConfig = saved }()
	h.startParts(workers, nodes...)
}

// tcpProxy forwards connections to a target until it is cut: then every
// connection is dropped and new ones are refused, as when a service or
// the network to it goes down.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.listen("127.0.0.1:0")
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut drops every connection and stops listening.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// restore listens again on the same address.
func (p *tcpProxy) restore() { p.listen(p.addr) }
