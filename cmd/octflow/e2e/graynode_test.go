package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"octflow/api"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/lifecycle"
)

// throttle holds a process to share of the CPU by stopping and continuing
// it (SIGSTOP/SIGCONT) every 100 ms: it stays alive, its heartbeats and
// reports go on, only slower. The returned func releases it.
func throttle(t *testing.T, p *childProcess, share float64) (release func()) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := time.Duration(share * float64(100*time.Millisecond))
	wg.Go(func() {
		for {
			_ = p.cmd.Process.Signal(syscall.SIGSTOP)
			select {
			case <-stop:
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				return
			case <-time.After(100*time.Millisecond - run):
			}
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			time.Sleep(run)
		}
	})
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

// progress is the exam's own record of its attempts.
func (h *harness) progress(examID string) contract.Progress {
	h.t.Helper()
	v, err := h.sys.App.Client().QueryWorkflow(context.Background(), h.examWF(examID), "", contract.ProgressQuery)
	if err != nil {
		h.t.Fatalf("progress of %s: %v", examID, err)
	}
	var p contract.Progress
	if err := v.Get(&p); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// markNode is an admin's POST /v1/nodes/{id}/health.
func (h *harness) markNode(node, state string) api.NodeHealthView {
	h.t.Helper()
	var v api.NodeHealthView
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/nodes/"+node+"/health", strings.NewReader(`{"state":"`+state+`"}`),
		http.StatusOK, &v)
	return v
}

// A GPU node that is alive, heartbeating and never failing, but held to a
// tenth of a core, is judged degraded by the fleet against the healthy
// node: it takes no new stage, the stages it holds past their deadline
// run again on the healthy node, every exam completes once, within five
// times the latency of one exam alone, and the node is healthy again once
// released. An operator's marks (degraded, then healthy) are honoured.
func TestASlowNodeIsDegradedItsStagesRunElsewhereAndItComesBackWhenReleased(t *testing.T) {
	h := newHarness(t, 0)
	h.spawnNode("gpu-fast", 10*time.Second)
	slow := h.spawnNode("gpu-slow", 10*time.Second)
	probed := func(v api.NodeView) bool { return v.Pace != nil && v.Pace.Probes >= 3 }
	h.waitNode("gpu-fast", probed)
	h.waitNode("gpu-slow", probed)

	// The yardstick: one exam alone on the healthy node, the other node
	// marked degraded by an operator (it takes nothing).
	if v := h.markNode("gpu-slow", contract.Degraded); v.State != contract.Degraded || !v.Held || v.By == "" {
		t.Fatalf("operator's mark: %+v", v)
	}
	h.waitNode("gpu-slow", func(v api.NodeView) bool { return v.Health.State == contract.Degraded })
	if g := samples(h.scrape()["octflow_node_degraded"]); g["node=gpu-slow"] != 1 || g["node=gpu-fast"] != 0 {
		t.Errorf("octflow_node_degraded = %v, want gpu-slow 1 and gpu-fast 0", g)
	}
	// The node reads its mark at its next report (every second here).
	time.Sleep(2 * time.Second)
	// Full-width B-scans: one exam alone takes a few seconds here.
	submit := func(id string, seed uint64) time.Time {
		_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: seed, Frames: 13, Rows: 496, Cols: 512})
		at := time.Now()
		if _, code, err := h.device.Submit(context.Background(), api.SubmitMeta{ExamID: id, Priority: "normal"}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		return at
	}
	start := submit("gray-alone", 500)
	if st := h.waitTerminal("gray-alone"); st.State != lifecycle.Completed {
		t.Fatalf("the yardstick exam ended %s", st.State)
	}
	alone := time.Since(start)
	for _, a := range h.progress("gray-alone").Attempts {
		if shipped().GPU(a.Stage) && a.Node != "gpu-fast" {
			t.Errorf("a node marked degraded ran %s: %+v", a.Stage, a)
		}
	}
	if v := h.markNode("gpu-slow", contract.Healthy); v.State != contract.Healthy || v.Held {
		t.Fatalf("operator's healthy mark: %+v", v)
	}
	t.Logf("one exam alone on the healthy node: %s", alone.Round(100*time.Millisecond))

	// Now a stream of exams arrives, one per latency of an exam alone: as
	// many as the healthy node could take by itself. Once the slow node
	// holds a stage, it is held to a tenth of a core.
	const stream = 6
	submitted := map[string]time.Time{}
	var (
		release   func()
		throttled time.Time
	)
	for i := range stream {
		id := fmt.Sprintf("gray-%d", i)
		submitted[id] = submit(id, uint64(510+i))
		for next := time.Now().Add(alone); time.Now().Before(next); time.Sleep(50 * time.Millisecond) {
			if release == nil {
				if v := h.nodes()["gpu-slow"]; v.Pace != nil && v.Pace.Running > 0 {
					release, throttled = throttle(t, slow, 0.1), time.Now()
				}
			}
		}
	}
	if release == nil {
		t.Fatal("the slow node took no stage of six exams")
	}
	v := h.waitNode("gpu-slow", func(v api.NodeView) bool { return v.Health.State == contract.Degraded })
	judged := v.Health.Since.Sub(throttled)
	if judged > 75*time.Second || v.Health.By != "fleet" || v.Health.Held {
		t.Errorf("degraded after %s (%+v); want the fleet's judgement within about a minute", judged, v.Health)
	}
	t.Logf("gpu-slow degraded %s after it was throttled: %s", judged.Round(100*time.Millisecond), v.Health.Reason)

	hedged, onSlow := 0, 0
	for id, at := range submitted {
		st := h.waitTerminal(id)
		took := st.UpdatedAt.Sub(at)
		if st.State != lifecycle.Completed {
			t.Errorf("%s ended %s", id, st.State)
			continue
		}
		attempts := h.progress(id).Attempts
		if took > 5*alone {
			var tries []string
			for _, a := range attempts {
				tries = append(tries, fmt.Sprintf("%s/%d %s on %s %s–%s", a.Stage, a.Try, a.Outcome, a.Node,
					a.ScheduledAt.Sub(at).Round(100*time.Millisecond), a.EndedAt.Sub(at).Round(100*time.Millisecond)))
			}
			t.Errorf("%s took %s, more than five times one exam alone (%s):\n%s", id, took.Round(100*time.Millisecond),
				alone.Round(100*time.Millisecond), strings.Join(tries, "\n"))
		}
		if n := h.stageRuns(id, exam.Render); n != 1 {
			t.Errorf("%s: the report stage completed %d times, want once", id, n)
		}
		// The timeline a clinician reads: every move legal, the report
		// run once.
		var tl []lifecycle.Entry
		if err := h.clin.Get(context.Background(), "/v1/exams/"+id+"/events", &tl); err != nil {
			t.Fatal(err)
		}
		reports := 0
		for i, e := range tl {
			if i > 0 {
				if err := lifecycle.CheckMove(e.From, e.To); err != nil {
					t.Errorf("%s: timeline entry %d: %v", id, i, err)
				}
			}
			if e.Stage == exam.Render && e.To == lifecycle.Executing {
				reports++
			}
		}
		if reports != 1 {
			t.Errorf("%s: the timeline runs the report %d times, want once", id, reports)
		}
		for _, a := range attempts {
			if a.Hedge != "" {
				hedged++
			}
			if a.Node == "gpu-slow" {
				onSlow++
			}
		}
		t.Logf("%s: %s", id, took.Round(100*time.Millisecond))
	}
	t.Logf("%d stage tries hedged, %d attempts on the slow node", hedged, onSlow)
	if hedged == 0 {
		t.Error("no stage was hedged, though the slow node held one when it was throttled")
	}

	// Released, it runs at normal speed again and the fleet says so.
	release()
	released := time.Now()
	v = h.waitNode("gpu-slow", func(v api.NodeView) bool { return v.Health.State == contract.Healthy })
	t.Logf("gpu-slow healthy %s after its release: %s", time.Since(released).Round(100*time.Millisecond), v.Health.Reason)
	if v.Health.By != "fleet" {
		t.Errorf("healthy again by %q, want the fleet's judgement", v.Health.By)
	}
}
