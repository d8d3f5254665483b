package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"octflow/activities"
	"octflow/exam"
)

// ReviewUpdate is the Temporal Update that carries a clinician's decision.
const ReviewUpdate = "review"

// maxReminders bounds the reminder pushes for an urgent exam.
const maxReminders = 5

// ErrReviewRefused marks a decision the exam cannot take now.
var ErrReviewRefused = errors.New("review refused")

// registerReview installs the review update. Its validator enforces the
// rules: only once the report exists, only while the review window is
// open, and after a final decision (approve, reject) only amendments.
func (r *examRun) registerReview(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, ReviewUpdate,
		func(ctx workflow.Context, in exam.ReviewInput) (exam.ReviewStatus, error) {
			p := r.progress
			p.Reviews = append(p.Reviews, exam.Review{At: workflow.Now(ctx), Decision: in.Decision, Note: in.Note, By: in.By})
			switch in.Decision {
			case exam.Approve:
				p.Review = exam.ReviewApproved
			case exam.Reject:
				p.Review = exam.ReviewRejected
			case exam.Amend:
				p.Review = exam.ReviewAmended
			}
			workflow.GetLogger(ctx).Info("review recorded", "decision", in.Decision, "status", p.Review)
			return p.Review, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in exam.ReviewInput) error {
			p := r.progress
			switch {
			case p.State != exam.Completed:
				return fmt.Errorf("%w: the report is not ready (exam is %s)", ErrReviewRefused, p.State)
			case r.reviewClosed:
				return fmt.Errorf("%w: the review window has closed", ErrReviewRefused)
			case in.Decision != exam.Approve && in.Decision != exam.Reject && in.Decision != exam.Amend:
				return fmt.Errorf("%w: unknown decision %q", ErrReviewRefused, in.Decision)
			case p.Review != exam.ReviewPending && in.Decision != exam.Amend:
				return fmt.Errorf("%w: the report is already %s; only amend is accepted", ErrReviewRefused, p.Review)
			}
			return nil
		}},
	)
}

// awaitReview keeps the exam open for the clinician's review until the
// review window closes, reminding the workstation about an urgent exam
// while no decision has come.
func (r *examRun) awaitReview(ctx workflow.Context) {
	pol := r.in.Policy
	r.progress.Review = exam.ReviewPending
	deadline := workflow.Now(ctx).Add(pol.ReviewWindow)
	decided := func() bool { return r.progress.Review != exam.ReviewPending }
	urgent := r.in.Submission.Priority == exam.Urgent && r.in.Submission.CallbackURL != ""
	for reminders := 0; urgent && reminders < maxReminders; reminders++ {
		wait := min(pol.ReviewReminder, deadline.Sub(workflow.Now(ctx)))
		if wait <= 0 {
			break
		}
		if ok, _ := workflow.AwaitWithTimeout(ctx, wait, decided); ok {
			break
		}
		if deadline.Sub(workflow.Now(ctx)) <= 0 {
			break
		}
		var out activities.StageOutput
		err := workflow.ExecuteActivity(stageContext(ctx, exam.Notify, pol, r.in.Submission.Priority, 0),
			exam.Notify.ActivityName(), activities.StageInput{Exam: r.in.Submission, Reminder: reminders + 1, Summary: &r.progress.Summary}).Get(ctx, &out)
		if err != nil {
			workflow.GetLogger(ctx).Warn("review reminder not delivered", "error", failureMessage(err))
		}
	}
	if rest := deadline.Sub(workflow.Now(ctx)); rest > 0 {
		_, _ = workflow.AwaitWithTimeout(ctx, rest, func() bool { return false })
	}
	r.reviewClosed = true
	if r.progress.Review == exam.ReviewPending {
		r.progress.Review = exam.ReviewExpired
	}
	// Let a decision that arrived at the last moment finish.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}
