package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"octflow/api"
	"octflow/api/intake"
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

// try is one try of a stage as an exam's history holds it: its stage
// and try (its activity ID), the queue it was scheduled on, the node that
// ran it (the worker that started it; for a try cancelled before its end
// was written, the node a hedge signal named as holding it), how it
// ended ("done", "failed", "timed out", "cancelled": the workflow asked
// for its cancellation; "" in flight), when it was scheduled and ended,
// and whether it was a hedge (scheduled while another try of its stage
// was in flight).
type try struct {
	Stage       exam.Stage
	Try         int32
	Queue, Node string
	Ended       string
	At, EndedAt time.Time
	Hedge       bool
}

// tries is every try of every stage in the exam's latest run, in the
// order they were scheduled, from its history (what the exam's timeline
// is folded from).
func (h *harness) tries(examID string) []try {
	h.t.Helper()
	return triesOf(h.t, h.sys.App.Client(), h.sys.App.Converters(), h.examWF(examID))
}

// triesOf is tries for the pipeline workflow of any exam, read through c
// with conv.
func triesOf(t *testing.T, c client.Client, conv lifecycle.Converters, workflowID string) []try {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*try
	byEvent := map[int64]*try{}  // scheduled event ID → try
	held := map[string]string{}  // activity ID → the node a hedge signal named
	open := map[exam.Stage]int{} // tries of each stage in flight
	end := func(id int64, how string, at time.Time, node string) {
		if tr := byEvent[id]; tr != nil && (tr.Ended == "" || tr.Ended == "cancelled") {
			if tr.Ended == "" {
				open[tr.Stage]--
			}
			tr.EndedAt, tr.Node = at, cmp.Or(node, tr.Node)
			if tr.Ended == "" {
				tr.Ended = how
			}
		}
	}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		at := ev.GetEventTime().AsTime()
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			a := ev.GetActivityTaskScheduledEventAttributes()
			stage, n, ok := contract.ParseActivityID(a.GetActivityId())
			if !ok {
				continue
			}
			tr := &try{Stage: stage, Try: n, Queue: a.GetTaskQueue().GetName(), At: at, Hedge: open[stage] > 0}
			open[stage]++
			out, byEvent[ev.GetEventId()] = append(out, tr), tr
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			a := ev.GetActivityTaskStartedEventAttributes()
			if tr := byEvent[a.GetScheduledEventId()]; tr != nil {
				tr.Node = a.GetIdentity()
			}
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			a := ev.GetActivityTaskCompletedEventAttributes()
			end(a.GetScheduledEventId(), "done", at, a.GetIdentity())
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			a := ev.GetActivityTaskFailedEventAttributes()
			end(a.GetScheduledEventId(), "failed", at, a.GetIdentity())
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			end(ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), "timed out", at, "")
		case ev.GetActivityTaskCanceledEventAttributes() != nil:
			end(ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), "cancelled", at, "")
		case ev.GetActivityTaskCancelRequestedEventAttributes() != nil:
			if tr := byEvent[ev.GetActivityTaskCancelRequestedEventAttributes().GetScheduledEventId()]; tr != nil && tr.Ended == "" {
				open[tr.Stage]--
				tr.Ended, tr.EndedAt = "cancelled", at
			}
		case ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == contract.HedgeSignal:
			var hedge contract.Hedge
			if err := conv.Data.FromPayloads(ev.GetWorkflowExecutionSignaledEventAttributes().GetInput(), &hedge); err != nil {
				t.Fatal(err)
			}
			held[hedge.ActivityID] = hedge.Node
		}
	}
	tries := make([]try, len(out))
	for i, tr := range out {
		if tr.Node == "" {
			tr.Node = held[contract.ActivityID(tr.Stage, tr.Try)]
		}
		tries[i] = *tr
	}
	return tries
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
		if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: id, Priority: "normal"}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		return at
	}
	start := submit("gray-alone", 500)
	if st := h.waitTerminal("gray-alone"); st.State != lifecycle.Completed {
		t.Fatalf("the yardstick exam ended %s", st.State)
	}
	alone := time.Since(start)
	for _, a := range h.tries("gray-alone") {
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
		attempts := h.tries(id)
		if took > 5*alone {
			var tries []string
			for _, a := range attempts {
				tries = append(tries, fmt.Sprintf("%s/%d %s on %s %s–%s", a.Stage, a.Try, a.Ended, a.Node,
					a.At.Sub(at).Round(100*time.Millisecond), a.EndedAt.Sub(at).Round(100*time.Millisecond)))
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
			if a.Hedge {
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
