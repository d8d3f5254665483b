package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"octflow/contract"
	"octflow/exam"
)

func reviewStart(priority exam.Priority, window, reminder time.Duration) contract.ReviewStart {
	in := testInput()
	in.Submission.Priority = priority
	in.Policy.ReviewWindow, in.Policy.ReviewReminder = window, reminder
	return contract.ReviewStart{Submission: in.Submission, Policy: in.Policy, Summary: exam.Summary{CentralSubfieldThicknessUm: ptr(250.0)},
		ReportAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func TestReviewAcceptsOneFinalDecisionThenOnlyAmendments(t *testing.T) {
	env, rec := newEnv(t, nil)
	in := reviewStart(exam.Normal, time.Hour, 0)
	env.SetStartTime(in.ReportAt)
	outcomes := map[string]error{}
	review := func(id string, d exam.Decision) {
		env.UpdateWorkflow(contract.ReviewUpdate, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { outcomes[id] = err }, OnComplete: func(any, error) {},
		}, contract.ReviewRequest{Decision: d, Note: id, By: "dr test"})
	}
	env.RegisterDelayedCallback(func() {
		review("approve", exam.Approve)
		review("approve-again", exam.Approve)
		review("reject-after-approve", exam.Reject)
		review("amend", exam.Amend)
	}, time.Minute)
	env.ExecuteWorkflow(ReviewWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for id, refused := range map[string]bool{"approve": false, "approve-again": true, "reject-after-approve": true, "amend": false} {
		if got := outcomes[id] != nil; got != refused {
			t.Errorf("%s: refused = %v (%v), want %v", id, got, outcomes[id], refused)
		}
	}
	var res contract.ReviewState
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != exam.ReviewAmended || len(res.Reviews) != 2 || res.Reviews[1].Decision != exam.Amend || res.Reviews[0].By != "dr test" {
		t.Errorf("result = %s %+v", res.Status, res.Reviews)
	}
	// Each accepted decision, and the close, reached review.json.
	var written []string
	for _, a := range rec.archives {
		written = append(written, fmt.Sprintf("%s/%d/%v", a.Status, len(a.Reviews), a.Closed))
	}
	if want := "approved/1/false amended/2/false amended/2/true"; strings.Join(written, " ") != want {
		t.Errorf("archived %v, want %s", written, want)
	}
}

func TestUrgentExamAwaitingReviewIsRemindedUntilTheWindowCloses(t *testing.T) {
	cases := []struct {
		name      string
		priority  exam.Priority
		reminders int
	}{
		{"urgent: reminded at 20 and 40 min", exam.Urgent, 2},
		{"normal: never reminded", exam.Normal, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, rec := newEnv(t, nil)
			in := reviewStart(c.priority, time.Hour, 20*time.Minute)
			env.SetStartTime(in.ReportAt)
			env.ExecuteWorkflow(ReviewWorkflow, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != c.reminders {
				t.Errorf("%d reminder pushes (%v), want %d", len(rec.calls), rec.calls, c.reminders)
			}
			var res contract.ReviewState
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Status != exam.ReviewExpired || res.Reminders != c.reminders {
				t.Errorf("result = %+v, want expired after %d reminders", res, c.reminders)
			}
		})
	}
}

func TestADecisionStopsTheReminders(t *testing.T) {
	env, rec := newEnv(t, nil)
	in := reviewStart(exam.Urgent, time.Hour, 20*time.Minute)
	env.SetStartTime(in.ReportAt)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.ReviewUpdate, "approve", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("approve refused: %v", err) }, OnComplete: func(any, error) {},
		}, contract.ReviewRequest{Decision: exam.Approve, By: "dr test"})
	}, 30*time.Minute)
	env.ExecuteWorkflow(ReviewWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 1 {
		t.Errorf("%d reminders, want only the one at 20 min before the decision at 30 min", len(rec.calls))
	}
}

func TestReviewRulesRefuseADecisionTheExamCannotTake(t *testing.T) {
	closes := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		status exam.ReviewStatus
		at     time.Time
		d      exam.Decision
		ok     bool
	}{
		{"approve within the window", exam.ReviewPending, closes.Add(-time.Minute), exam.Approve, true},
		{"approve after the window", exam.ReviewPending, closes.Add(time.Second), exam.Approve, false},
		{"amend as the window closes", exam.ReviewApproved, closes, exam.Amend, false},
		{"second final decision", exam.ReviewApproved, closes.Add(-time.Hour), exam.Reject, false},
		{"amend after a final decision", exam.ReviewRejected, closes.Add(-time.Hour), exam.Amend, true},
		{"unknown decision", exam.ReviewPending, closes.Add(-time.Hour), "maybe", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newReviewBook(exam.Submission{}, exam.DefaultPolicy(), exam.Summary{})
			b.status, b.closesAt = c.status, closes
			err := b.refuse(contract.ReviewRequest{Decision: c.d}, c.at)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrReviewRefused)) {
				t.Errorf("refuse = %v, want ok %v", err, c.ok)
			}
		})
	}
}
