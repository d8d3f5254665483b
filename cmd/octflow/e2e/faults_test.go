package e2e

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"octflow/activities"
	"octflow/exam"
)

// faultFunc may fail, hold or panic a stage where a GPU driver or a
// model would: a GPU stage once it holds its GPU and before its start is
// reported (so a stage held there shows as CLAIMED), any other stage as
// it is taken. node is the worker or GPU node running it.
type faultFunc func(ctx context.Context, node string, stage exam.Stage) error

// withFaults injects fn into every stage the system's workers and nodes
// run, through their activity interceptors: production code carries no
// fault hook.
func withFaults(fn faultFunc) func(identity string) []interceptor.WorkerInterceptor {
	return func(identity string) []interceptor.WorkerInterceptor {
		return []interceptor.WorkerInterceptor{&faultInterceptor{node: identity, fn: fn}}
	}
}

type faultInterceptor struct {
	interceptor.WorkerInterceptorBase
	node string
	fn   faultFunc
}

func (f *faultInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &faultActivity{node: f.node, fn: f.fn}
	a.Next = next
	return a
}

type faultActivity struct {
	interceptor.ActivityInboundInterceptorBase
	node string
	fn   faultFunc
}

// ExecuteActivity runs the fault as a GPU stage's gate grants it its GPU
// (the node's own interceptor, which comes first, put the gate in ctx),
// or before any other stage.
func (f *faultActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	stage := stageOfActivity(activity.GetInfo(ctx).ActivityType.Name)
	if stage == "" {
		return f.Next.ExecuteActivity(ctx, in)
	}
	gate, gated := activities.GPUGateFrom(ctx)
	if !gated || !shipped().GPU(stage) {
		if err := f.fn(ctx, f.node, stage); err != nil {
			return nil, err
		}
		return f.Next.ExecuteActivity(ctx, in)
	}
	ctx = activities.WithGPUGate(ctx, func(ctx context.Context, s exam.Stage) (gpu int, release func(), err error) {
		if gpu, release, err = gate(ctx, s); err != nil {
			return gpu, release, err
		}
		defer func() {
			if p := recover(); p != nil {
				release()
				panic(p)
			}
		}()
		if err := f.fn(exam.WithGPU(ctx, gpu), f.node, s); err != nil {
			release()
			return 0, nil, err
		}
		return gpu, release, nil
	})
	return f.Next.ExecuteActivity(ctx, in)
}
