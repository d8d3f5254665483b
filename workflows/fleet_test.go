package workflows

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

func TestFleetKeepsTheLatestReportAndCountsBreakerResets(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(FleetWorkflow)
	report := func(node string, inFlight int) contract.NodeReport {
		return contract.NodeReport{NodeID: node, InFlight: inFlight, Interval: time.Second,
			Breaker: exam.BreakerStatus{State: exam.BreakerOpen}}
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.NodeReportSignal, report("gpu-b", 1)) }, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.NodeReportSignal, report("gpu-a", 0)) }, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.NodeReportSignal, report("gpu-b", 2)) }, 3*time.Second)
	var rejected, accepted error
	var gen int
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.ResetBreakerUpdate, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, "gpu-unknown")
		env.UpdateWorkflow(contract.ResetBreakerUpdate, "u2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) { gen, _ = v.(int) },
		}, "gpu-b")
	}, 4*time.Second)
	queried := false
	env.RegisterDelayedCallback(func() {
		queried = true
		v, err := env.QueryWorkflow(contract.FleetQuery)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []contract.FleetNode
		if err := v.Get(&nodes); err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Report.NodeID != "gpu-a" || nodes[1].Report.InFlight != 2 {
			t.Errorf("fleet = %+v, want gpu-a and gpu-b with its latest report", nodes)
		}
		if nodes[1].ResetGeneration != 1 {
			t.Errorf("gpu-b reset generation %d, want 1", nodes[1].ResetGeneration)
		}
		env.CancelWorkflow()
	}, 5*time.Second)
	env.ExecuteWorkflow(FleetWorkflow, contract.FleetState{})
	if !queried {
		t.Fatal("the fleet was never queried: the workflow ended before the checks ran")
	}
	if rejected == nil {
		t.Error("a reset for an unknown node was accepted")
	}
	if accepted != nil || gen != 1 {
		t.Errorf("reset for gpu-b: %v, generation %d", accepted, gen)
	}
}

// TestLongRunningWorkflowsContinueAsNewWithTheirState drives the fleet and
// an inbox until Temporal suggests continuing as new: each must hand its
// whole state to the next run (nodes with their reset generations; events
// in order, a republished one kept once, the sequence going on).
func TestLongRunningWorkflowsContinueAsNewWithTheirState(t *testing.T) {
	t.Run("fleet", func(t *testing.T) {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		report := func(node string) contract.NodeReport { return contract.NodeReport{NodeID: node, Interval: time.Second} }
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.NodeReportSignal, report("gpu-a")) }, time.Second)
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(contract.ResetBreakerUpdate, "u1", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Error(err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
			}, "gpu-a")
		}, 2*time.Second)
		env.RegisterDelayedCallback(func() {
			env.SetContinueAsNewSuggested(true)
			env.SignalWorkflow(contract.NodeReportSignal, report("gpu-b"))
		}, 3*time.Second)
		env.ExecuteWorkflow(FleetWorkflow, contract.FleetState{})
		var next contract.FleetState
		continuedWith(t, env.GetWorkflowError(), &next)
		if len(next.Nodes) != 2 || next.Nodes["gpu-a"].ResetGeneration != 1 || next.Nodes["gpu-b"] == nil {
			t.Errorf("next run's state = %+v, want gpu-a (reset once) and gpu-b", next.Nodes)
		}
	})
	t.Run("inbox", func(t *testing.T) {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		event := func(id string) contract.ReportReadyEvent { return contract.ReportReadyEvent{ExamID: id} }
		env.RegisterDelayedCallback(func() {
			for _, id := range []string{"e1", "e2", "e1", "e3"} { // e1 published twice
				env.SignalWorkflow(contract.InboxEventSignal, event(id))
			}
		}, time.Second)
		env.RegisterDelayedCallback(func() {
			env.SetContinueAsNewSuggested(true)
			env.SignalWorkflow(contract.InboxEventSignal, event("e4"))
		}, 2*time.Second)
		env.ExecuteWorkflow(InboxWorkflow, contract.InboxState{Campus: "north"})
		var next contract.InboxState
		continuedWith(t, env.GetWorkflowError(), &next)
		var got []string
		for i, e := range next.Events {
			got = append(got, e.ExamID)
			if e.Seq != int64(i+1) {
				t.Errorf("event %s has seq %d, want %d", e.ExamID, e.Seq, i+1)
			}
		}
		if !slices.Equal(got, []string{"e1", "e2", "e3", "e4"}) || next.Next != 5 || next.Campus != "north" {
			t.Errorf("next run's state = campus %q, events %v, next seq %d", next.Campus, got, next.Next)
		}
	})
}

// continuedWith requires err to be a continue-as-new and decodes the next
// run's input into state.
func continuedWith(t *testing.T, err error, state any) {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, state); err != nil {
		t.Fatal(err)
	}
}

// TestTheFleetForgetsNodesThatLeft: a node that drained is gone two of its
// intervals after its last report; one that went silent without draining
// stays (down) until NodeRetention; one that keeps reporting stays; a
// forgotten node that reports again is back.
func TestTheFleetForgetsNodesThatLeft(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	report := func(node string, draining bool) contract.NodeReport {
		return contract.NodeReport{NodeID: node, Interval: 10 * time.Second, Draining: draining}
	}
	signal := func(r contract.NodeReport) func() {
		return func() { env.SignalWorkflow(contract.NodeReportSignal, r) }
	}
	nodes := func() []string {
		v, err := env.QueryWorkflow(contract.FleetQuery)
		if err != nil {
			t.Fatal(err)
		}
		var fleet []contract.FleetNode
		if err := v.Get(&fleet); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range fleet {
			ids = append(ids, n.Report.NodeID)
		}
		return ids
	}
	want := func(at time.Duration, ids ...string) {
		env.RegisterDelayedCallback(func() {
			if got := nodes(); !slices.Equal(got, ids) {
				t.Errorf("after %v: fleet %v, want %v", at, got, ids)
			}
		}, at)
	}
	// gpu-0 reports through the first minute and again just before
	// NodeRetention runs out for gpu-1, killed after 21 s; gpu-2 drains
	// at 30 s. (The test environment takes only so many callbacks.)
	for _, at := range []time.Duration{time.Second, 11 * time.Second, 21 * time.Second, 31 * time.Second,
		41 * time.Second, 51 * time.Second, NodeRetention} {
		env.RegisterDelayedCallback(signal(report("gpu-0", false)), at)
	}
	for _, at := range []time.Duration{time.Second, 11 * time.Second, 21 * time.Second} {
		env.RegisterDelayedCallback(signal(report("gpu-1", false)), at)
		env.RegisterDelayedCallback(signal(report("gpu-2", false)), at)
	}
	env.RegisterDelayedCallback(signal(report("gpu-2", true)), 30*time.Second)
	want(35*time.Second, "gpu-0", "gpu-1", "gpu-2")
	want(45*time.Second, "gpu-0", "gpu-1", "gpu-2")
	want(55*time.Second, "gpu-0", "gpu-1") // drained: gone 20 s after its last report
	want(NodeRetention, "gpu-0", "gpu-1")
	want(NodeRetention+25*time.Second, "gpu-0") // silent past the retention
	env.RegisterDelayedCallback(signal(report("gpu-1", false)), NodeRetention+30*time.Second)
	want(NodeRetention+35*time.Second, "gpu-0", "gpu-1")
	env.RegisterDelayedCallback(env.CancelWorkflow, NodeRetention+time.Hour)
	env.ExecuteWorkflow(FleetWorkflow, contract.FleetState{HistoryLimit: 1 << 30})
	if err := env.GetWorkflowError(); err == nil || !temporal.IsCanceledError(err) {
		t.Fatalf("fleet ended with %v, want canceled at the test's end", err)
	}
}

// The fleet judges each report: a node far slower than its peer is
// degraded, the exam of a stage it holds past its deadline is asked to
// hedge it on the peer, once; an operator's marks hold and clear.
func TestTheFleetDegradesASlowNodeHedgesItsStagesAndTakesOperatorMarks(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	metrics := newCounters()
	metrics.mustBeMade(t, shipped())
	suite.SetMetricsHandler(metrics)
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(FleetWorkflow)
	var hedges []contract.Hedge
	env.OnSignalExternalWorkflow(mock.Anything, "exam/north/E1", "run-1", contract.HedgeSignal, mock.Anything).
		Return(func(_, _, _, _ string, arg any) error {
			hedges = append(hedges, arg.(contract.Hedge))
			return nil
		})
	report := func(node string, probeMs float64, running ...contract.RunningStage) contract.NodeReport {
		return contract.NodeReport{NodeID: node, Interval: time.Second,
			Pace: &contract.NodePace{Model: "L4", ProbeMs: probeMs, Probes: 5, Running: running}}
	}
	var held contract.RunningStage
	for i := range 4 {
		at := time.Duration(i+1) * time.Second
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(contract.NodeReportSignal, report("gpu-fast", 30))
			held = contract.RunningStage{WorkflowID: "exam/north/E1", RunID: "run-1", ActivityID: "denoise-1", Stage: exam.Denoise,
				Bucket: exam.Urgent, Held: at}
			env.SignalWorkflow(contract.NodeReportSignal, report("gpu-slow", 300, held))
		}, at)
	}
	nodes := func() map[string]contract.FleetNode {
		v, err := env.QueryWorkflow(contract.FleetQuery)
		if err != nil {
			t.Fatal(err)
		}
		var list []contract.FleetNode
		if err := v.Get(&list); err != nil {
			t.Fatal(err)
		}
		out := map[string]contract.FleetNode{}
		for _, n := range list {
			out[n.Report.NodeID] = n
		}
		return out
	}
	type marked struct {
		health   contract.NodeHealth
		rejected error
	}
	marks := map[string]*marked{}
	mark := func(node, state string) {
		m := &marked{}
		marks[node+" "+state] = m
		env.UpdateWorkflow(contract.MarkNodeUpdate, "mark-"+node+"-"+state, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { m.rejected = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) { m.health, _ = v.(contract.NodeHealth) },
		}, contract.NodeMark{NodeID: node, State: state, By: "ops"})
	}
	checked := false
	env.RegisterDelayedCallback(func() {
		slow := nodes()["gpu-slow"]
		if slow.Health.State != contract.Degraded || slow.Health.By != "fleet" || !strings.HasPrefix(slow.Health.Reason, "probe 300 ms") {
			t.Errorf("gpu-slow %+v, want degraded by the fleet for its probe", slow.Health)
		}
		if nodes()["gpu-fast"].Health.State != contract.Healthy {
			t.Errorf("gpu-fast %+v, want healthy", nodes()["gpu-fast"].Health)
		}
		if len(hedges) != 1 || hedges[0].ActivityID != "denoise-1" || hedges[0].Node != "gpu-slow" ||
			hedges[0].Queue != exam.NodeQueue("gpu-fast") {
			t.Errorf("hedges %+v, want denoise-1 once, to gpu-fast", hedges)
		}
		// What the node reads of the fleet: its own health, no stage.
		for node, want := range map[string]contract.NodeState{
			"gpu-slow": {Known: true, Health: contract.Degraded, Reason: slow.Health.Reason, By: "fleet"},
			"gpu-gone": {},
		} {
			v, err := env.QueryWorkflow(contract.NodeStateQuery, node)
			if err != nil {
				t.Fatal(err)
			}
			var got contract.NodeState
			if err := v.Get(&got); err != nil || got != want {
				t.Errorf("node-state of %s = %+v (%v), want %+v", node, got, err, want)
			}
		}
		mark("gpu-gone", contract.Degraded)
		mark("gpu-fast", "sideways")
		mark("gpu-fast", contract.Degraded)
		mark("gpu-slow", contract.Healthy)
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		checked = true
		ns := nodes()
		if h := ns["gpu-fast"].Health; h.State != contract.Degraded || !h.Held || h.By != "ops" {
			t.Errorf("gpu-fast after its mark: %+v", h)
		}
		if h := ns["gpu-slow"].Health; h.State != contract.Healthy || h.Held {
			t.Errorf("gpu-slow after its mark: %+v", h)
		}
		env.CancelWorkflow()
	}, 6*time.Second)
	env.ExecuteWorkflow(FleetWorkflow, contract.FleetState{})
	if !checked {
		t.Fatal("the fleet ended before the checks ran")
	}
	for _, refused := range []string{"gpu-gone degraded", "gpu-fast sideways"} {
		if marks[refused].rejected == nil {
			t.Errorf("mark %q was accepted", refused)
		}
	}
	if m := marks["gpu-fast degraded"]; m.rejected != nil || m.health.State != contract.Degraded || !m.health.Held || m.health.By != "ops" {
		t.Errorf("mark gpu-fast degraded answered %+v", m)
	}
}
