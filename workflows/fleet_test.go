package workflows

import (
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"octflow/exam"
)

func TestFleetKeepsTheLatestReportAndCountsBreakerResets(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(FleetWorkflow)
	report := func(node string, inFlight int) exam.NodeReport {
		return exam.NodeReport{NodeID: node, InFlight: inFlight, Interval: time.Second,
			Breaker: exam.BreakerStatus{State: exam.BreakerOpen}}
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(NodeReportSignal, report("gpu-b", 1)) }, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(NodeReportSignal, report("gpu-a", 0)) }, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(NodeReportSignal, report("gpu-b", 2)) }, 3*time.Second)
	var rejected, accepted error
	var gen int
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(ResetBreakerUpdate, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, "gpu-unknown")
		env.UpdateWorkflow(ResetBreakerUpdate, "u2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) { gen, _ = v.(int) },
		}, "gpu-b")
	}, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(FleetQuery)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []FleetNode
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
	env.ExecuteWorkflow(FleetWorkflow, FleetState{})
	if rejected == nil {
		t.Error("a reset for an unknown node was accepted")
	}
	if accepted != nil || gen != 1 {
		t.Errorf("reset for gpu-b: %v, generation %d", accepted, gen)
	}
}
