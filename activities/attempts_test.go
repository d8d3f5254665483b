package activities

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

func TestOnlyAStagesOwnFailuresSpendItsAttempts(t *testing.T) {
	oom := errors.New("CUDA out of memory")
	invalid := temporal.NewNonRetryableApplicationError("not a volume", contract.ErrTypeInvalidVolume, nil)
	cases := []struct {
		name         string
		prev         *contract.Heartbeat // the last heartbeat before this attempt
		maxFailures  int32
		err          error // what the stage's body returns
		wantFailures int32 // in the attempt's last heartbeat
		wantFinal    bool
	}{
		{"first attempt fails", nil, 3, oom, 1, false},
		{"third failure spends the last attempt", &contract.Heartbeat{Node: "gpu-a", Failures: 2}, 3, oom, 3, true},
		// The attempt before was lost with its node: its heartbeat said
		// one failure before it, and it added none.
		{"a lost attempt spent nothing", &contract.Heartbeat{Node: "gpu-a", Failures: 1}, 3, oom, 2, false},
		{"one failure allowed, none before", &contract.Heartbeat{Node: "gpu-a"}, 1, oom, 1, true},
		{"no budget of its own: Temporal's alone", &contract.Heartbeat{Node: "gpu-a", Failures: 5}, 0, oom, 6, false},
		{"a final error is not counted", &contract.Heartbeat{Node: "gpu-a", Failures: 1}, 3, invalid, 1, true},
		{"success", &contract.Heartbeat{Node: "gpu-a", Failures: 2}, 3, nil, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Activities{Node: "gpu-b"}
			env, beat := attemptEnv(t, c.prev)
			env.RegisterActivityWithOptions(func(ctx context.Context) (contract.StageOutput, error) {
				var out contract.StageOutput
				return out, a.run(ctx, exam.Layers, c.maxFailures, &out, func(context.Context) error { return c.err })
			}, activity.RegisterOptions{Name: "Stage"})
			_, err := env.ExecuteActivity("Stage")
			if (err != nil) != (c.err != nil) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if beat.Failures != c.wantFailures || beat.Node != "gpu-b" {
				t.Errorf("last heartbeat %+v, want %d failures from gpu-b", beat, c.wantFailures)
			}
			if err == nil {
				return
			}
			var app *temporal.ApplicationError
			final := errors.As(err, &app) && app.NonRetryable()
			if final != c.wantFinal {
				t.Errorf("error %v: final %v, want %v", err, final, c.wantFinal)
			}
			want := c.err.Error()
			if errors.As(c.err, &app) {
				want = app.Message()
			}
			if errors.As(err, &app); app.Message() != want {
				t.Errorf("error %q lost the stage's message %q", app.Message(), want)
			}
		})
	}
}
