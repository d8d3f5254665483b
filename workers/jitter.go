package workers

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
)

// RetryJitter is a worker interceptor that spreads the retries of failed
// stages. Temporal's own backoff is deterministic, so stages that fail
// together (a batch on a node that ran out of memory) would all come back
// together and knock the node over again. RetryJitter gives each
// retryable failure a NextRetryDelay drawn with full jitter from
// [0, min(cap, base·2^(attempt-1))], where base and cap are the stage's
// RetryPolicy InitialInterval and MaximumInterval, so the workflow's
// policy stays the one source of truth.
//
// Timeouts never reach an interceptor (the server detects them), so
// their retries keep Temporal's unjittered backoff; GPU slots bound how
// many of them a node takes at once.
type RetryJitter struct {
	interceptor.WorkerInterceptorBase
	// Node names this worker; it is attached to each failure (as
	// FailureDetails) so the exam's timeline can say where it failed.
	Node string
	// Uniform returns a number in [0, 1); default math/rand/v2.Float64.
	Uniform func() float64
}

// InterceptActivity wraps every activity of the worker.
func (j *RetryJitter) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &jitterInbound{root: j}
	i.Next = next
	return i
}

type jitterInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root *RetryJitter
}

func (i *jitterInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := i.Next.ExecuteActivity(ctx, in)
	if err != nil && ctx.Err() == nil {
		err = i.root.withDelay(activity.GetInfo(ctx), err)
	}
	return res, err
}

// withDelay returns err with a jittered NextRetryDelay when Temporal will
// retry it, and err unchanged when it will not.
func (j *RetryJitter) withDelay(info activity.Info, err error) error {
	pol := info.RetryPolicy
	if pol == nil || (pol.MaximumAttempts > 0 && info.Attempt >= pol.MaximumAttempts) {
		return err
	}
	msg, errType := err.Error(), contract.ErrTypeStageFailed
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if app.NonRetryable() || slices.Contains(pol.NonRetryableErrorTypes, app.Type()) || app.NextRetryDelay() > 0 {
			return err
		}
		msg, errType = app.Message(), app.Type()
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	uniform := j.Uniform
	if uniform == nil {
		uniform = rand.Float64
	}
	delay := JitteredDelay(pol.InitialInterval, pol.MaximumInterval, info.Attempt, uniform())
	return temporal.NewApplicationErrorWithOptions(msg, errType, temporal.ApplicationErrorOptions{
		Cause:          err,
		NextRetryDelay: delay,
		Details:        []any{contract.FailureDetails{Node: j.Node}},
	})
}

// JitteredDelay is the full-jitter delay after failed attempt n (1-based):
// u·min(cap, base·2^(n-1)) for u in [0, 1), at least 1 ms because Temporal
// reads a zero delay as "not set".
func JitteredDelay(base, cap time.Duration, attempt int32, u float64) time.Duration {
	ceiling := float64(base) * math.Pow(2, float64(max(attempt, 1)-1))
	if cap > 0 {
		ceiling = math.Min(ceiling, float64(cap))
	}
	return max(time.Duration(u*ceiling), time.Millisecond)
}
