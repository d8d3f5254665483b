package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
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
// whole burst took. It works at any burst size: a start or a wait that
// the loaded engine does not answer in time is asked again (a start that
// did happen is found by its workflow ID), and the runs are waited for
// one after the other, not by one long poll each at once.
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
	id := func(i int) string { return fmt.Sprintf("bench-bare-%s-%05d", tag, i) }
	start := time.Now()
	jobs := make(chan int)
	errs := make(chan error, count)
	var wg sync.WaitGroup
	for range Uploaders {
		wg.Go(func() {
			for i := range jobs {
				errs <- patiently(ctx, func() error {
					_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id(i), TaskQueue: bareWorkflowQueue,
						WorkflowExecutionErrorWhenAlreadyStarted: true}, bareWorkflow, stages)
					var started *serviceerror.WorkflowExecutionAlreadyStarted
					if errors.As(err, &started) {
						return nil // an earlier try that timed out had started it
					}
					return err
				})
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
			return 0, fmt.Errorf("start a bare workflow: %w", err)
		}
	}
	for i := range count {
		if err := patiently(ctx, func() error { return tc.GetWorkflow(ctx, id(i), "").Get(ctx, nil) }); err != nil {
			return 0, fmt.Errorf("bare workflow %s: %w", id(i), err)
		}
	}
	return time.Since(start), nil
}

// patiently calls fn until it returns anything but a call of its own that
// timed out or found the engine unavailable, or ctx ends.
func patiently(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		var unavailable *serviceerror.Unavailable
		var deadline *serviceerror.DeadlineExceeded
		if err == nil || ctx.Err() != nil ||
			!(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &unavailable)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
