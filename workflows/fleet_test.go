package workflows

import (
	"errors"
	"slices"
	"testing"
	"time"

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
