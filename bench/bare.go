package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The bare engine's queues: workflow tasks and activities apart, as in
// octflow, so neither gains from eager activity dispatch.
const (
	bareWorkflowQueue = "octflow-bench-bare"
	bareActivityQueue = "octflow-bench-bare-activities"
	bareWorkflow      = "BareWorkflow"
	bareActivity      = "BareActivity"
)

// BareWorkflow runs n no-op activities one after the other: the
// engine's cost of an exam with n stages and nothing else.
func BareWorkflow(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: bareActivityQueue, StartToCloseTimeout: time.Minute,
	})
	for range n {
		if err := workflow.ExecuteActivity(ctx, bareActivity).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func noop(context.Context) error { return nil }

// runBare runs count bare workflows of stages no-op activities each on
// the engine tc talks to, with workers tuned as octflow's (opts), started
// by Uploaders goroutines as the exams were, and returns how long the
// whole burst took.
func runBare(ctx context.Context, tc client.Client, opts worker.Options, count, stages int, tag string) (time.Duration, error) {
	wf := worker.New(tc, bareWorkflowQueue, opts)
	wf.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: bareWorkflow})
	acts := worker.New(tc, bareActivityQueue, worker.Options{DisableEagerActivities: true})
	acts.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: bareActivity})
	for _, w := range []worker.Worker{wf, acts} {
		if err := w.Start(); err != nil {
			return 0, fmt.Errorf("bare engine worker: %w", err)
		}
		defer w.Stop()
	}
	start := time.Now()
	jobs := make(chan int)
	errs := make(chan error, count)
	var wg sync.WaitGroup
	for range Uploaders {
		wg.Go(func() {
			for i := range jobs {
				run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: fmt.Sprintf("bench-bare-%s-%05d", tag, i), TaskQueue: bareWorkflowQueue,
				}, bareWorkflow, stages)
				if err == nil {
					// Waited for below, all at once.
					go func() { errs <- run.Get(ctx, nil) }()
					continue
				}
				errs <- err
			}
		})
	}
	for i := range count {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for range count {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("bare workflow: %w", err)
		}
	}
	return time.Since(start), nil
}
