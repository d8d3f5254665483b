package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// retries is how a workflow retries an activity of its own that is no
// pipeline stage (the export's send, the review's reminder and its
// archive), the way the pipeline retries a stage (decision 17): each try
// is an activity of its own with one attempt at Temporal's level
// (oneTry), the workflow decides whether a failed try is tried again,
// and it waits before the next one a full-jitter delay drawn from the
// run ID (fullJitter): the same on every replay, different for every
// run, so runs that failed together do not come back together.
type retries struct {
	// key names the activity in the delays' draw.
	key string
	// The wait after the n-th failed try is drawn below min(limit,
	// base·2^(n-1)), and is at least floor.
	base, limit, floor time.Duration
	// attempts bounds the tries (0: no bound).
	attempts int
	// deadline is when the workflow's clock stops a failed try from
	// being tried again (zero: never).
	deadline time.Time
	// retryable says whether a failed try may succeed if tried again.
	retryable func(error) bool
}

// run calls try with 1, 2, … until a try succeeds or its failure is
// final (not retryable, the attempts spent, or the deadline reached),
// waiting before each retry; a failure retryable before the wait and
// not after it (the workflow's state changed meanwhile) is final too.
// It returns the last try's error (nil: a try succeeded).
func (r retries) run(ctx workflow.Context, try func(n int) error) error {
	runID := workflow.GetInfo(ctx).WorkflowExecution.RunID
	for n := 1; ; n++ {
		err := try(n)
		if err == nil {
			return nil
		}
		if !r.retryable(err) || r.attempts > 0 && n >= r.attempts || !r.deadline.IsZero() && !workflow.Now(ctx).Before(r.deadline) {
			return err
		}
		delay := fullJitter(runID, r.key, n, r.base, r.limit, r.floor)
		workflow.GetLogger(ctx).Warn("try failed; retrying", "activity", r.key, "try", n, "error", failureMessage(err), "after", delay)
		if err := workflow.Sleep(ctx, delay); err != nil {
			return err
		}
		if !r.retryable(err) {
			return err
		}
	}
}

// oneTry is ctx with opts for one try of an activity: Temporal retries
// nothing, the workflow decides what follows (retries).
func oneTry(ctx workflow.Context, opts workflow.ActivityOptions) workflow.Context {
	opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
	return workflow.WithActivityOptions(ctx, opts)
}

// mayPass reports whether a try that ended with err may succeed if tried
// again, as the pipeline judges a stage's try (contract.Classify): its
// own failure, a lost worker or an unreachable backing service may pass;
// a refusal (a non-retryable error, a cancellation, a try out of its
// whole time) may not.
func mayPass(err error) bool {
	switch contract.Classify(err, false, true) {
	case contract.Failed, contract.Lost, contract.Unreachable:
		return true
	}
	return false
}
