package workers

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

func TestJitteredDelayStaysInsideTheExponentialWindow(t *testing.T) {
	base, cap := 5*time.Minute, 30*time.Minute
	cases := []struct {
		attempt int32
		u       float64
		want    time.Duration
	}{
		{1, 0.5, 150 * time.Second},    // window 5 min
		{2, 0.5, 5 * time.Minute},      // window 10 min
		{3, 0.999, 1199 * time.Second}, // window 20 min
		{5, 0.5, 15 * time.Minute},     // window capped at 30 min
		{1, 0, time.Millisecond},       // never zero: zero means "not set"
	}
	for _, c := range cases {
		got := JitteredDelay(base, cap, c.attempt, c.u)
		if d := got - c.want; d > time.Second || d < -time.Second {
			t.Errorf("attempt %d, u %.3f: delay %s, want %s", c.attempt, c.u, got, c.want)
		}
	}
}

func TestRetryJitterSpreadsSimultaneousFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	j := &RetryJitter{Uniform: rng.Float64}
	info := activity.Info{Attempt: 1, RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: 10 * time.Second, MaximumInterval: time.Minute, MaximumAttempts: 3}}
	const n = 300
	perSecond := map[int]int{}
	for range n {
		err := j.withDelay(info, errors.New("CUDA out of memory"))
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.NextRetryDelay() <= 0 || app.NextRetryDelay() >= 10*time.Second {
			t.Fatalf("delay %v outside [0, 10s)", app.NextRetryDelay())
		}
		perSecond[int(app.NextRetryDelay()/time.Second)]++
	}
	// Uniform over 10 one-second windows: 30 expected in each; lockstep
	// would put all 300 in one. Allow a generous binomial margin.
	for s, k := range perSecond {
		if k > 55 {
			t.Errorf("%d of %d retries fall in second %d", k, n, s)
		}
	}
}

func TestRetryJitterLeavesFinalFailuresAlone(t *testing.T) {
	j := &RetryJitter{Uniform: func() float64 { return 0.5 }}
	pol := &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3, NonRetryableErrorTypes: []string{"InvalidVolume"}}
	cases := []struct {
		name string
		info activity.Info
		err  error
	}{
		{"last attempt", activity.Info{Attempt: 3, RetryPolicy: pol}, errors.New("boom")},
		{"non-retryable error", activity.Info{Attempt: 1, RetryPolicy: pol}, temporal.NewNonRetryableApplicationError("bad", "X", nil)},
		{"non-retryable type", activity.Info{Attempt: 1, RetryPolicy: pol}, temporal.NewApplicationError("bad scan", "InvalidVolume")},
		{"no retry policy", activity.Info{Attempt: 1}, errors.New("boom")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := j.withDelay(c.info, c.err); got != c.err {
				t.Errorf("error rewritten to %v", got)
			}
		})
	}
}
