package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
)

// ErrAttemptsSpent is in the cause of a stage's failure that spent the
// last of its attempts: the failure is final for Temporal, and still the
// stage's own (a node's breaker counts it).
var ErrAttemptsSpent = errors.New("the stage's attempts are spent")

// priorBeat is the last heartbeat before this attempt of the stage, sent
// by an earlier attempt that failed or was lost with its node; nil for a
// first attempt or one whose predecessors said nothing.
func priorBeat(ctx context.Context) *contract.Heartbeat {
	if !activity.HasHeartbeatDetails(ctx) {
		return nil
	}
	var prev contract.Heartbeat
	if activity.GetHeartbeatDetails(ctx, &prev) != nil || prev.Node == "" {
		return nil
	}
	return &prev
}

// failed counts a failed attempt of the stage: it adds one to the
// stage's failures and sends them in a heartbeat, which the SDK delivers
// before it reports the failure, so the next attempt carries the count
// on. An attempt lost with its node never gets here and adds nothing.
// The attempt that spends the last of maxFailures fails for good, with
// its error's message and type; maxFailures 0 leaves the limit to
// Temporal's retry policy. A final error, or an attempt whose context
// ended (cancelled, timed out), is returned as it is.
func (b *stageBeat) failed(ctx context.Context, err error, maxFailures int32) error {
	if err == nil || ctx.Err() != nil || final(ctx, err) {
		return err
	}
	b.mu.Lock()
	b.beat.Failures++
	failures := b.beat.Failures
	b.mu.Unlock()
	b.send(ctx, true)
	if maxFailures <= 0 || failures < maxFailures {
		return err
	}
	return LastAttemptFailed(err, b.get().Node)
}

// LastAttemptFailed is err as the final failure of a stage that spent its
// last attempt on node: non-retryable, with err's message and type (a
// plain error's: StageFailed) and ErrAttemptsSpent in its cause.
func LastAttemptFailed(err error, node string) error {
	msg, errType := err.Error(), contract.ErrTypeStageFailed
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		msg, errType = app.Message(), cmp.Or(app.Type(), errType)
	}
	return temporal.NewApplicationErrorWithOptions(msg, errType, temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Cause:        fmt.Errorf("%w: %w", ErrAttemptsSpent, err),
		Details:      []any{contract.FailureDetails{Node: node}},
	})
}

// final reports whether Temporal will not retry err whatever the
// attempt: a non-retryable error, or one of a type the stage's retry
// policy names.
func final(ctx context.Context, err error) bool {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return false
	}
	if app.NonRetryable() {
		return true
	}
	pol := activity.GetInfo(ctx).RetryPolicy
	return pol != nil && slices.Contains(pol.NonRetryableErrorTypes, app.Type())
}
