package e2e

// GPU nodes on the real embedded server: the fleet view, a failing node
// tripping its breaker, and an operator's reset.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// stageLog records which node started which stage, and when.
type stageLog struct {
	mu      sync.Mutex
	entries []stageStart
}

type stageStart struct {
	at   time.Time
	node string
}

func (l *stageLog) add(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, stageStart{time.Now(), node})
}

func (l *stageLog) count(node string, after time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.node == node && e.at.After(after) {
			n++
		}
	}
	return n
}

func (h *harness) nodes() map[string]api.NodeView {
	h.t.Helper()
	var views []api.NodeView
	h.getJSON(h.sys.Secrets.Admin, "/v1/nodes", http.StatusOK, &views)
	out := map[string]api.NodeView{}
	for _, v := range views {
		out[v.NodeID] = v
	}
	return out
}

func (h *harness) waitNode(node string, cond func(api.NodeView) bool) api.NodeView {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if v, ok := h.nodes()[node]; ok && cond(v) {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Fatalf("node %s: condition not met; fleet %+v", node, h.nodes())
	return api.NodeView{}
}

func TestFailingNodeTripsItsBreakerAndAnAdminResetBringsItBack(t *testing.T) {
	var starts stageLog
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.Policy.MaxAttempts = 5 // the bad node fails at most 3 before it trips
		c.WorkerInterceptors = withFaults(func(ctx context.Context, node string, stage exam.Stage) error {
			if !shipped().GPU(stage) {
				return nil
			}
			starts.add(node)
			if node == "gpu-bad" {
				return errors.New("simulated ECC error")
			}
			return nil
		})
	})
	breaker := gpuworker.BreakerConfig{MinSamples: 3, FailureRate: 0.5, Cooldown: time.Hour}
	h.startParts(false,
		gpuworker.Config{NodeID: "gpu-bad", Breaker: breaker},
		gpuworker.Config{NodeID: "gpu-good", Breaker: breaker})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(101))
	for i := range 8 {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: fmt.Sprintf("fleet-%d", i)}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit: %d %v", code, err)
		}
	}
	for i := range 8 {
		if st := h.waitTerminal(fmt.Sprintf("fleet-%d", i)); st.State != lifecycle.Completed {
			t.Fatalf("exam %d ended %s: %+v", i, st.State, st.LastFailure)
		}
	}
	bad := h.waitNode("gpu-bad", func(v api.NodeView) bool { return v.Breaker.State == exam.BreakerOpen })
	good := h.nodes()["gpu-good"]
	if good.Status != "up" || good.Breaker.State != exam.BreakerClosed || len(good.GPUs) != 1 || !good.GPUs[0].Healthy {
		t.Errorf("good node %+v", good)
	}
	openedAt := *bad.Breaker.OpenedAt
	// A slot reserved before the trip may still deliver one stage.
	if n := starts.count("gpu-bad", openedAt); n > 1 {
		t.Errorf("the bad node started %d stages after its breaker opened", n)
	}
	if starts.count("gpu-good", time.Time{}) < 8*4 {
		t.Errorf("the good node ran %d stages, want at least all 32", starts.count("gpu-good", time.Time{}))
	}

	// An operator resets the breaker; the node takes work again.
	var reset api.BreakerReset
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/nodes/gpu-bad/breaker/reset", nil, http.StatusAccepted, &reset)
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/nodes/gpu-nowhere/breaker/reset", nil, http.StatusNotFound, nil)
	h.call(http.MethodPost, h.sys.Secrets.Clinician, "/v1/nodes/gpu-bad/breaker/reset", nil, http.StatusForbidden, nil)
	h.waitNode("gpu-bad", func(v api.NodeView) bool {
		return v.ResetsApplied == reset.ResetGeneration && v.Breaker.State == exam.BreakerClosed
	})
	resetAt := time.Now()
	for i := 8; i < 12; i++ {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: fmt.Sprintf("fleet-%d", i)}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit: %d %v", code, err)
		}
	}
	for i := 8; i < 12; i++ {
		h.waitTerminal(fmt.Sprintf("fleet-%d", i))
	}
	if starts.count("gpu-bad", resetAt) == 0 {
		t.Error("after the reset the node took no stage")
	}
}
