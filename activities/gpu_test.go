package activities

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
)

func TestAGatedStageHoldsItsGPUOnlyWhileItComputes(t *testing.T) {
	for _, gated := range []bool{true, false} {
		var mu sync.Mutex
		var steps []string
		step := func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
		a := &Activities{Node: "gpu-test", Faults: func(context.Context, string, exam.Stage) error { step("fault"); return nil },
			SimulatedCompute: func(context.Context, string, exam.Stage) error { step("simulated GPU time"); return nil }}
		gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) {
			step("bind")
			return 3, func() { step("release") }, nil
		})
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		var beats []contract.Heartbeat
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
			var hb contract.Heartbeat
			if err := details.Get(&hb); err != nil {
				t.Errorf("heartbeat: %v", err)
			}
			mu.Lock()
			beats = append(beats, hb)
			mu.Unlock()
			if hb.StartedAt != nil && len(beats) == 1 {
				step("started")
			}
		})
		env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
			if gated {
				ctx = WithGPUGate(ctx, gate)
			}
			var out contract.StageOutput
			return out, a.run(ctx, exam.Layers, &out, func(ctx context.Context) error {
				step("load")
				if err := a.onGPU(ctx, exam.Layers, func(ctx context.Context) error {
					if gpu, ok := exam.GPUFrom(ctx); gated && (!ok || gpu != 3) {
						t.Errorf("compute sees GPU %d (%v), want 3", gpu, ok)
					}
					step("compute")
					return nil
				}); err != nil {
					return err
				}
				step("store")
				return nil
			})
		}, activity.RegisterOptions{Name: "Stage"})
		if _, err := env.ExecuteActivity("Stage"); err != nil {
			t.Fatal(err)
		}
		// The simulated GPU time is part of the computation: it comes
		// once the GPU is held and the stage's start is reported.
		want := []string{"fault", "started", "load", "simulated GPU time", "compute", "store"}
		if gated {
			want = []string{"load", "bind", "fault", "started", "simulated GPU time", "compute", "release", "store"}
		}
		if !slices.Equal(steps, want) {
			t.Errorf("gated %v: steps %v, want %v", gated, steps, want)
		}
		for _, hb := range beats {
			if hb.TakenAt == nil || hb.TakenAt.IsZero() {
				t.Errorf("gated %v: heartbeat %+v does not say when the node took the attempt", gated, hb)
			}
		}
	}
}
