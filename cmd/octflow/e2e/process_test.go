package e2e

// GPU nodes as real OS processes: this test binary re-executes itself as
// `octflow gpuworker` (see TestMain), joined to the in-process stack the
// way a separate node joins `octflow dev`: through OCTFLOW_* variables.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"

	"octflow/api"
	"octflow/api/intake"
	"octflow/cmd/octflow/internal/cli"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// TestMain runs the octflow command (cli.Main) instead of the tests when
// asked to act as it, with os.Args as the command's own would be.
func TestMain(m *testing.M) {
	if args := os.Getenv("OCTFLOW_TEST_AS_MAIN"); args != "" {
		os.Args = append([]string{"octflow"}, strings.Fields(args)...)
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// childProcess is an octflow command (this test binary run as the
// command, see TestMain) in its own OS process.
type childProcess struct {
	id   string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startProcess runs `octflow <args>` with env added to this process's
// environment (see startCommand).
func startProcess(t *testing.T, id string, env []string, args string) *childProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), "OCTFLOW_TEST_AS_MAIN="+args)
	return startCommand(t, id, cmd)
}

// startCommand starts cmd with its output in a log file that a failing
// test prints; the test's cleanup kills it.
func startCommand(t *testing.T, id string, cmd *exec.Cmd) *childProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &childProcess{id: id, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", id, tail(b, 20000))
		}
	})
	return p
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// spawnNode starts a GPU node process joined to the harness's stack, its
// environment with env added.
func (h *harness) spawnNode(id string, drain time.Duration, env ...string) *childProcess {
	h.t.Helper()
	p := startProcess(h.t, id, append(append(h.sys.NodeEnv(),
		"OCTFLOW_DRAIN_TIMEOUT="+drain.String(),
		"OCTFLOW_REPORT_EVERY=1s",
	), env...), "gpuworker --node-id "+id)
	h.waitNode(id, func(v api.NodeView) bool { return v.Status == "up" })
	return p
}

// runningOn waits until the exam's stage runs on one of the nodes and
// returns that node.
func (h *harness) runningOn(examID string, nodes ...*childProcess) (*childProcess, *api.ExamStatus) {
	h.t.Helper()
	st := h.waitFor(examID, time.Minute, func(s *api.ExamStatus) bool {
		return s.State == lifecycle.Executing && shipped().GPU(s.Stage)
	})
	for _, n := range nodes {
		if n.id == st.Node {
			return n, st
		}
	}
	h.t.Fatalf("exam runs on %q, not on a spawned node", st.Node)
	return nil, nil
}

// killAndComplete kills a node outright during the exam's stage, waits
// for the exam to complete with exactly one report and returns its
// timeline.
func (h *harness) killAndComplete(node *childProcess, examID string, stage exam.Stage) []lifecycle.Entry {
	h.t.Helper()
	if err := node.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	h.t.Logf("killed %s (-9) during %s", node.id, stage)
	final := h.waitTerminal(examID)
	if final.State != lifecycle.Completed {
		h.t.Fatalf("exam ended %s: %+v", final.State, final.LastFailure)
	}
	if n := h.stageRuns(examID, exam.Render); n != 1 {
		h.t.Errorf("report rendered %d times, want exactly 1", n)
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/"+examID+"/events", http.StatusOK, &events)
	return events
}

func TestKilledNodesStageIsRetriedOnTheOtherNodeWithoutSpendingAnAttempt(t *testing.T) {
	// No attempt to spare for a failure of the stage's own: the attempt
	// lost with the node must not be counted as one.
	h := newHarness(t, 0, func(c *devsystem.Config) { c.Policy.MaxAttempts, c.Policy.LostAttempts = 1, 1 })
	a, b := h.spawnNode("gpu-proc-a", 30*time.Second), h.spawnNode("gpu-proc-b", 30*time.Second)
	ctx := context.Background()
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 111}) // full size: stages last long enough to be caught
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "kill-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	victim, st := h.runningOn("kill-1", a, b)
	survivor := map[string]*childProcess{a.id: b, b.id: a}[victim.id]
	events := h.killAndComplete(victim, "kill-1", st.Stage)
	var lost, retried bool
	for _, e := range events {
		if e.Stage == st.Stage && e.To == lifecycle.RetryWait && e.Info["node"] == victim.id {
			lost = true
		}
		if e.Stage == st.Stage && e.To == lifecycle.Executing && e.Actor == survivor.id {
			retried = true
		}
	}
	if !lost || !retried {
		t.Errorf("timeline does not show %s lost on %s and rerun on %s: %+v", st.Stage, victim.id, survivor.id, events)
	}
	h.waitNode(victim.id, func(v api.NodeView) bool { return v.Status == "down" })
}

func TestAKilledNodeHandsBackItsStageWhenItStartsAgain(t *testing.T) {
	// The heartbeat and stage timeouts lie beyond the test: only the
	// hand-back can move the lost stage on. No attempt to spare for a
	// failure of the stage's own: the handed-back one must not count.
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.Policy.HeartbeatTimeout, c.Policy.StageTimeout = 5*time.Minute, 10*time.Minute
		c.Policy.MaxAttempts, c.Policy.LostAttempts = 1, 1
	})
	takes := "OCTFLOW_NODE_TAKES_DIR=" + filepath.Join(t.TempDir(), "takes")
	node := h.spawnNode("gpu-back", 30*time.Second, takes)
	ctx := context.Background()
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 113}) // full size: stages last long enough to be caught
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "back-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	_, st := h.runningOn("back-1", node)
	if err := node.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-node.done
	node.done <- nil // for the cleanup
	killed := time.Now()
	t.Logf("killed %s (-9) during %s; starting it again", node.id, st.Stage)
	h.spawnNode("gpu-back", 30*time.Second, takes)

	final := h.waitTerminal("back-1")
	if final.State != lifecycle.Completed {
		t.Fatalf("exam ended %s: %+v", final.State, final.LastFailure)
	}
	if n := h.stageRuns("back-1", exam.Render); n != 1 {
		t.Errorf("report rendered %d times, want exactly 1", n)
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/back-1/events", http.StatusOK, &events)
	var handedBack *lifecycle.Entry
	for i, e := range events {
		if e.Stage == st.Stage && e.To == lifecycle.RetryWait {
			handedBack = &events[i]
		}
	}
	if handedBack == nil || handedBack.Info["failureType"] != contract.ErrTypeNodeLost || handedBack.Info["node"] != node.id {
		t.Fatalf("timeline does not show %s handed back by %s: %+v", st.Stage, node.id, events)
	}
	if after := handedBack.At.Sub(killed); after > time.Minute {
		t.Errorf("the lost %s was retried %s after the kill, as if by its heartbeat timeout", st.Stage, after)
	}
	// The history keeps the lost try: where and when the node had
	// taken it.
	var lostTry *historypb.HistoryEvent
	h.stageEvents("back-1", st.Stage, func(ev *historypb.HistoryEvent) bool {
		if ev.GetActivityTaskStartedEventAttributes() != nil {
			lostTry = ev
			return false
		}
		return true
	})
	if lostTry == nil || lostTry.GetActivityTaskStartedEventAttributes().GetIdentity() != node.id || !lostTry.GetEventTime().AsTime().Before(killed) {
		t.Errorf("the lost try of %s is recorded as %+v, want %s's take before the kill", st.Stage, lostTry, node.id)
	}
}

func TestSIGTERMLetsTheRunningStageFinishAndExitsZero(t *testing.T) {
	h := newHarness(t, 0)
	drain := 30 * time.Second
	a, b := h.spawnNode("gpu-term-a", drain), h.spawnNode("gpu-term-b", drain)
	ctx := context.Background()
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 121})
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "term-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	node, st := h.runningOn("term-1", a, b)
	sent := time.Now()
	if err := node.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-node.done:
		if err != nil {
			t.Errorf("%s exited with %v, want status 0", node.id, err)
		}
		t.Logf("%s drained %s and exited after %s", node.id, st.Stage, time.Since(sent).Round(time.Millisecond))
	case <-time.After(drain + 5*time.Second):
		t.Fatalf("%s still running %s after SIGTERM", node.id, drain)
	}
	node.done <- nil // for the cleanup

	final := h.waitTerminal("term-1")
	if final.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", final.State)
	}
	// The drain is real only if the stage was still running when the
	// signal came, and finished after it.
	if done := h.stageCompletedAt("term-1", st.Stage); !done.After(sent) {
		t.Errorf("%s completed at %s, before SIGTERM at %s: nothing was drained", st.Stage, done, sent)
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/term-1/events", http.StatusOK, &events)
	ranOnDrainingNode := false
	for _, e := range events {
		if e.To == lifecycle.RetryWait {
			t.Errorf("a drained stage was recorded as failed: %+v", e)
		}
		if e.Stage == st.Stage && e.To == lifecycle.Executing && e.Actor == node.id && fmt.Sprint(e.Info["attempt"]) == "1" {
			ranOnDrainingNode = true
		}
	}
	if !ranOnDrainingNode {
		t.Errorf("%s did not complete on %s in its first attempt: %+v", st.Stage, node.id, events)
	}
}

// stageCompletedAt is when the server recorded the stage's completion in
// the exam's latest run.
func (h *harness) stageCompletedAt(examID string, stage exam.Stage) time.Time {
	h.t.Helper()
	var at time.Time
	h.stageEvents(examID, stage, func(ev *historypb.HistoryEvent) bool {
		if ev.GetActivityTaskCompletedEventAttributes() != nil {
			at = ev.GetEventTime().AsTime()
			return false
		}
		return true
	})
	if at.IsZero() {
		h.t.Fatalf("%s never completed %s", examID, stage)
	}
	return at
}

func TestAnExamPinnedToAKilledNodeCompletesOnAnotherNode(t *testing.T) {
	h := newHarness(t, 0)
	// Only a runs at first, so the exam's first stage runs there and its
	// later stages are sent to a's own queue.
	a := h.spawnNode("gpu-pin-a", 30*time.Second)
	ctx := context.Background()
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 112})
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "pin-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	// A stage shows CLAIMED until its first heartbeat reaches the engine
	// (a quiet first second), EXECUTING after: either is a running stage.
	// Layers may end within its quiet second, so a is stopped (SIGSTOP) as
	// soon as it holds layers: the exam then cannot move past a's stages
	// (layers, or the lesions stage pinned to a if layers ended just
	// before the stop) until b takes them over.
	h.waitFor("pin-1", 2*time.Minute, func(s *api.ExamStatus) bool {
		return s.Stage == exam.Layers && (s.State == lifecycle.Claimed || s.State == lifecycle.Executing) && s.Node == a.id
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := h.spawnNode("gpu-pin-b", 30*time.Second)
	events := h.killAndComplete(a, "pin-1", exam.Layers)
	// The stage a held or was sent: queued on a's queue, then on the
	// shared one, and run on b.
	onNodeQueue, fellBack, ranOnB := map[exam.Stage]bool{}, map[exam.Stage]bool{}, map[exam.Stage]bool{}
	for _, e := range events {
		switch {
		case e.To == lifecycle.Queued && e.Info["queue"] == exam.NodeQueue(a.id):
			onNodeQueue[e.Stage] = true
		case e.To == lifecycle.Queued && e.Info["queue"] == exam.GPUQueue && onNodeQueue[e.Stage]:
			fellBack[e.Stage] = true
		case e.To == lifecycle.Executing && e.Actor == b.id && fellBack[e.Stage]:
			ranOnB[e.Stage] = true
		}
	}
	if !onNodeQueue[exam.Layers] || len(ranOnB) == 0 {
		t.Errorf("timeline does not show layers pinned to %s (%v) and a stage of a's queue back on %s (%v) and run on %s (%v): %+v",
			a.id, onNodeQueue, exam.GPUQueue, fellBack, b.id, ranOnB, events)
	}
}
