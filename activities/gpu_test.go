package activities

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
)

func TestAGatedStageHoldsItsGPUOnlyWhileItComputes(t *testing.T) {
	for _, gated := range []bool{true, false} {
		var mu sync.Mutex
		var steps []string
		step := func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
		a := &Activities{Node: "gpu-test", Faults: func(context.Context, string, exam.Stage) error { step("fault"); return nil }}
		gate := GPUGate(func(context.Context, exam.Stage) (int, func(), error) {
			step("bind")
			return 3, func() { step("release") }, nil
		})
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
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
		want := []string{"fault", "load", "compute", "store"}
		if gated {
			want = []string{"load", "bind", "fault", "compute", "release", "store"}
		}
		if !slices.Equal(steps, want) {
			t.Errorf("gated %v: steps %v, want %v", gated, steps, want)
		}
	}
}
