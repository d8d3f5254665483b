package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// A workflow's own activity is tried one attempt at a time, each try
// under its own ID with no retry at Temporal's level, and tried again
// after a full-jitter wait until a try succeeds, its failure is final,
// the attempts are spent or the deadline is reached.
func TestRetriesTryOneAttemptAtATimeWithinTheirBounds(t *testing.T) {
	const base, limit = time.Second, 4 * time.Second
	fail := errors.New("the store did not answer")
	refused := temporal.NewNonRetryableApplicationError("refused", "Refused", nil)
	for _, c := range []struct {
		name     string
		answers  []error // one per try; every try after them succeeds
		attempts int
		deadline time.Duration // after the first try's start
		bounded  bool          // whether there is a deadline
		tries    int
		wantErr  bool
	}{
		{"the first try succeeds", nil, 5, 0, false, 1, false},
		{"two failures, then a success", []error{fail, fail}, 5, 0, false, 3, false},
		{"the attempts are spent", []error{fail, fail, fail, fail}, 3, 0, false, 3, true},
		{"a refusal is final", []error{fail, refused, fail}, 5, 0, false, 2, true},
		{"a deadline at the start (no time to retry): one try", []error{fail}, 0, 0, true, 1, true},
		{"no bound but the deadline", slices.Repeat([]error{fail}, 50), 0, 20 * time.Second, true, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			answers := c.answers
			var ids []string
			var at []time.Time
			env.RegisterActivityWithOptions(func(ctx context.Context, n int) error {
				info := activity.GetInfo(ctx)
				if info.Attempt != 1 {
					t.Errorf("try %d is Temporal's attempt %d: Temporal retried it", n, info.Attempt)
				}
				ids, at = append(ids, info.ActivityID), append(at, env.Now())
				if len(answers) > 0 {
					err := answers[0]
					answers = answers[1:]
					return err
				}
				return nil
			}, activity.RegisterOptions{Name: "Try"})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				r := retries{key: "try", base: base, limit: limit, floor: time.Millisecond, attempts: c.attempts, retryable: mayPass}
				if c.bounded {
					r.deadline = workflow.Now(ctx).Add(c.deadline)
				}
				return r.run(ctx, func(n int) error {
					return workflow.ExecuteActivity(oneTry(ctx, workflow.ActivityOptions{ActivityID: "try-" + strconv.Itoa(n),
						StartToCloseTimeout: time.Minute}), "Try", n).Get(ctx, nil)
				})
			}, workflow.RegisterOptions{Name: "retried"})
			env.ExecuteWorkflow("retried")
			if err := env.GetWorkflowError(); (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want an error %v", err, c.wantErr)
			}
			if c.tries > 0 && len(ids) != c.tries {
				t.Errorf("%d tries (%v), want %d", len(ids), ids, c.tries)
			}
			for i, id := range ids {
				if id != fmt.Sprintf("try-%d", i+1) {
					t.Errorf("try %d ran as %q", i+1, id)
				}
			}
			for i := 1; i < len(at); i++ {
				if gap, ceiling := at[i].Sub(at[i-1]), min(limit, base<<(i-1)); gap < time.Millisecond || gap > ceiling {
					t.Errorf("try %d came %s after the one before, want within [1ms, %s]", i+1, gap, ceiling)
				}
			}
			if c.deadline > time.Second {
				// Tried until the deadline, not past it: the last try
				// began within one wait of it.
				if spent := at[len(at)-1].Sub(at[0]); spent < c.deadline || spent > c.deadline+limit {
					t.Errorf("gave up after %s of tries, want the %s deadline reached first", spent, c.deadline)
				}
			}
		})
	}
}

// What a workflow's own activity may try again: what a stage may (its
// own failure, a lost worker, an unreachable store), not a refusal.
func TestMayPass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("connection reset"), true},
		{temporal.NewApplicationError("workstation answered 503", ""), true},
		{temporal.NewApplicationError("unavailable", contract.ErrTypeInfrastructure), true},
		{temporal.NewNonRetryableApplicationError("refused", "CallbackRejected", nil), false},
		{temporal.NewCanceledError(), false},
	} {
		if got := mayPass(c.err); got != c.want {
			t.Errorf("mayPass(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A reminder the workstation does not take is pushed again, each push a
// try of the notify activity of its own, until one is taken; one it
// refuses is not, and a decision stops them.
func TestAReminderIsRetriedAsAStageIsUntilTakenRefusedOrDecided(t *testing.T) {
	down := func() error { return errors.New("workstation answered 503") }
	refused := temporal.NewNonRetryableApplicationError("workstation refused the event: 410", "CallbackRejected", nil)
	for _, c := range []struct {
		name     string
		answers  []error       // the pushes' answers, in order; then taken
		decideAt time.Duration // 0: nobody decides
		ids      []string      // the notify tries
	}{
		{"taken at once", nil, 0, []string{"notify-1", "notify-2"}},
		{"down once: pushed again", []error{down()}, 0, []string{"notify-1", "notify-2", "notify-3"}},
		{"down past the policy's attempts: the next reminder still goes", []error{down(), down(), down(), down()}, 0,
			[]string{"notify-1", "notify-2", "notify-3", "notify-4", "notify-5"}},
		{"refused: not pushed again", []error{refused}, 0, []string{"notify-1", "notify-2"}},
		{"a decision stops the retries", []error{down(), down()}, 20*time.Minute + time.Millisecond, []string{"notify-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			rec.failNext[exam.Notify] = c.answers
			in := reviewStart(exam.Urgent, time.Hour, 20*time.Minute)
			in.Policy.RetryBase, in.Policy.RetryCap = 5*time.Minute, 5*time.Minute
			env.SetStartTime(in.ReportAt)
			if c.decideAt > 0 {
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow(contract.ReviewUpdate, "approve", &testsuite.TestUpdateCallback{
						OnAccept: func() {}, OnReject: func(err error) { t.Errorf("approve refused: %v", err) }, OnComplete: func(any, error) {},
					}, contract.ReviewRequest{Decision: exam.Approve, By: "dr test"})
				}, c.decideAt)
			}
			env.ExecuteWorkflow(ReviewWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got := rec.activityIDs[exam.Notify]; !slices.Equal(got, c.ids) {
				t.Errorf("pushes %v, want %v", got, c.ids)
			}
			for _, opts := range rec.notifyOptions {
				if opts.RetryPolicy == nil || opts.RetryPolicy.MaximumAttempts != 1 {
					t.Errorf("a push scheduled with %+v: Temporal must not retry it", opts.RetryPolicy)
				}
			}
		})
	}
}

// A write of review.json the store does not take is tried again: a
// decision's up to archiveTries times, the final one until it is taken.
func TestAReviewsArchiveIsRetriedUntilTheStoreTakesIt(t *testing.T) {
	down := func() error {
		return temporal.NewApplicationError("unavailable: the store did not answer", contract.ErrTypeInfrastructure)
	}
	env, rec := newEnv(t, nil)
	// The decision's write fails on every try; the final one on its first
	// ten.
	rec.archiveFail = slices.Repeat([]error{down()}, archiveTries+10)
	in := reviewStart(exam.Normal, time.Hour, 0)
	env.SetStartTime(in.ReportAt)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.ReviewUpdate, "approve", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("approve refused: %v", err) }, OnComplete: func(any, error) {},
		}, contract.ReviewRequest{Decision: exam.Approve, By: "dr test"})
	}, time.Minute)
	env.ExecuteWorkflow(ReviewWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range archiveTries + 11 {
		want = append(want, "archive-"+strconv.Itoa(i+1))
	}
	if !slices.Equal(rec.archiveIDs, want) {
		t.Errorf("writes %v, want %v", rec.archiveIDs, want)
	}
	if n := len(rec.archives); n != 1 || !rec.archives[0].Closed || rec.archives[0].Status != exam.ReviewApproved {
		t.Errorf("review.json written %+v, want the final write with the decision", rec.archives)
	}
}
