package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// maxReminders bounds the reminder pushes for an urgent exam.
const maxReminders = 5

// ErrReviewRefused marks a decision the exam cannot take now.
var ErrReviewRefused = errors.New("review refused")

// ReviewWorkflow holds the clinician's review of one exam's report: it
// takes decisions through ReviewUpdate for the review window, reminds the
// workstation of an urgent exam nobody has decided on, and ends when the
// window closes. It reminds through the notify stage's activity
// (contract.NotifyWorkstation), whatever pipeline the exam ran, so a
// change of the pipeline never replays against week-old reviews. A
// reminder and a write of review.json are retried by the workflow, one
// try at a time, as the pipeline retries its stages (retries). The
// pipeline starts it once the report is stored, as a child it abandons
// (startReview), and it outlives the pipeline.
func ReviewWorkflow(ctx workflow.Context, in contract.ReviewStart) (contract.ReviewState, error) {
	b := newReviewBook(in.Submission, in.Policy, in.Summary)
	b.archiving = workflow.NewMutex(ctx)
	if err := workflow.SetQueryHandler(ctx, contract.ReviewQuery, func() (contract.ReviewState, error) { return b.state(), nil }); err != nil {
		return contract.ReviewState{}, fmt.Errorf("register query: %w", err)
	}
	b.closesAt = in.ReportAt.Add(in.Policy.ReviewWindow)
	if err := b.register(ctx); err != nil {
		return contract.ReviewState{}, fmt.Errorf("register review: %w", err)
	}
	b.await(ctx)
	// The final review.json must exist: retried until the store answers.
	if err := b.archiveTo(ctx, true); err != nil {
		return b.state(), err
	}
	return b.state(), nil
}

// reviewBook is a review in progress: the rules for a decision, the
// decisions so far, the reminders and the window.
type reviewBook struct {
	sub       exam.Submission
	pol       exam.Policy
	summary   exam.Summary
	status    exam.ReviewStatus
	reviews   []exam.Review
	reminders int
	closesAt  time.Time
	closed    bool
	// pushes and archives count the run's tries of the notify and the
	// archive activity, which name them.
	pushes   int32
	archives int
	// archiving makes the writes of the exam's review.json, one for
	// every decision and one at the close, go one at a time, each with
	// the review as it stands then, so the last one written holds every
	// decision.
	archiving workflow.Mutex
}

func newReviewBook(sub exam.Submission, pol exam.Policy, summary exam.Summary) *reviewBook {
	return &reviewBook{sub: sub, pol: pol, summary: summary, status: exam.ReviewPending, reviews: []exam.Review{}}
}

func (b *reviewBook) state() contract.ReviewState {
	return contract.ReviewState{Status: b.status, Reviews: b.reviews, ClosesAt: b.closesAt, Reminders: b.reminders}
}

// register installs the review update. Its validator holds the rules:
// only while the window is open, and after a final decision (approve,
// reject) only amendments.
func (b *reviewBook) register(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, contract.ReviewUpdate,
		func(ctx workflow.Context, req contract.ReviewRequest) (exam.ReviewStatus, error) {
			b.reviews = append(b.reviews, exam.Review{At: workflow.Now(ctx), Decision: req.Decision, Note: req.Note, By: req.By})
			b.status = b.status.After(req.Decision)
			workflow.GetLogger(ctx).Info("review recorded", "decision", req.Decision, "status", b.status)
			// The decision stands in the workflow either way; if the store
			// cannot take it now, the archive at the window's close will.
			if err := b.archiving.Lock(ctx); err != nil {
				return b.status, err
			}
			err := b.archiveTo(ctx, false)
			b.archiving.Unlock()
			if err != nil {
				workflow.GetLogger(ctx).Warn("review not archived yet", "error", failureMessage(err))
			}
			return b.status, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.ReviewRequest) error {
			return b.refuse(req, workflow.Now(ctx))
		}},
	)
}

// Retries of the review's writes to review.json: a decision's write is
// tried up to archiveTries times, the final one (the window has closed)
// until the store takes it, for up to archiveFinalFor, each after a
// full-jitter wait under a ceiling doubling from archiveBackoffBase to
// archiveBackoffCap (archiveFinalCap for the final one, so that a day's
// outage costs the review's history a few hundred tries, not thousands).
const (
	archiveTries       = 5
	archiveBackoffBase = time.Second
	archiveBackoffCap  = time.Minute
	archiveFinalCap    = 10 * time.Minute
	archiveFinalFor    = 24 * time.Hour
	// archiveTimeout bounds one write.
	archiveTimeout = time.Minute
)

// archiveTo writes the review as it stands to the exam's review.json,
// each try under its own activity ID (archive-<n>, counted over the
// run). The last write, when the window has closed, is retried until
// the store takes it.
func (b *reviewBook) archiveTo(ctx workflow.Context, final bool) error {
	writes := retries{key: "archive", base: archiveBackoffBase, limit: archiveBackoffCap, floor: time.Millisecond,
		attempts: archiveTries, retryable: mayPass}
	opts := workflow.ActivityOptions{TaskQueue: exam.CPUQueue, StartToCloseTimeout: archiveTimeout}
	if final {
		writes.key, writes.limit, writes.attempts = "archive-final", archiveFinalCap, 0
		writes.deadline = workflow.Now(ctx).Add(archiveFinalFor)
		// A write that waits that long for a worker is given up too.
		opts.ScheduleToCloseTimeout = archiveFinalFor
	}
	return writes.run(ctx, func(int) error {
		b.archives++
		opts.ActivityID = "archive-" + strconv.Itoa(b.archives)
		return workflow.ExecuteActivity(oneTry(ctx, opts), contract.ArchiveReview, contract.ReviewArchive{
			Exam: b.sub.Ref(), Status: b.status, Reviews: b.reviews, ClosesAt: b.closesAt, Closed: final,
		}).Get(ctx, nil)
	})
}

// refuse says why a decision cannot be taken at now, or nil.
func (b *reviewBook) refuse(req contract.ReviewRequest, now time.Time) error {
	switch {
	case b.closed || !now.Before(b.closesAt):
		return fmt.Errorf("%w: the review window has closed", ErrReviewRefused)
	case req.Decision != exam.Approve && req.Decision != exam.Reject && req.Decision != exam.Amend:
		return fmt.Errorf("%w: unknown decision %q", ErrReviewRefused, req.Decision)
	case b.status != exam.ReviewPending && req.Decision != exam.Amend:
		return fmt.Errorf("%w: the report is already %s; only amend is accepted", ErrReviewRefused, b.status)
	}
	return nil
}

// await keeps the review open until the window closes, reminding the
// workstation about an urgent exam while no decision has come.
func (b *reviewBook) await(ctx workflow.Context) {
	pol := b.pol
	decided := func() bool { return b.status != exam.ReviewPending }
	urgent := b.sub.Priority == exam.Urgent && b.sub.CallbackURL != ""
	for ; urgent && pol.ReviewReminder > 0 && b.reminders < maxReminders; b.reminders++ {
		wait := min(pol.ReviewReminder, b.closesAt.Sub(workflow.Now(ctx)))
		if wait <= 0 {
			break
		}
		if ok, _ := workflow.AwaitWithTimeout(ctx, wait, decided); ok {
			break
		}
		if b.closesAt.Sub(workflow.Now(ctx)) <= 0 {
			break
		}
		if err := b.remind(ctx, b.reminders+1); err != nil {
			workflow.GetLogger(ctx).Warn("review reminder not delivered", "error", failureMessage(err))
		}
	}
	if rest := b.closesAt.Sub(workflow.Now(ctx)); rest > 0 {
		_, _ = workflow.AwaitWithTimeout(ctx, rest, func() bool { return false })
	}
	b.closed = true
	if b.status == exam.ReviewPending {
		b.status = exam.ReviewExpired
	}
	// Let a decision that arrived at the last moment finish.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// remind pushes the reminder-th report-ready event again, through the
// notify stage's activity, retried as the pipeline retries its stages
// (the policy's attempts, retry base and cap) while the window is open
// and nobody has decided. Each try is a try of the notify activity in the review's run
// (notify-<n>, counted over the run).
func (b *reviewBook) remind(ctx workflow.Context, reminder int) error {
	pol := b.pol
	pushes := retries{key: "reminder-" + strconv.Itoa(reminder), base: pol.RetryBase, limit: pol.RetryCap, floor: time.Millisecond,
		attempts: int(pol.MaxAttempts), deadline: b.closesAt,
		retryable: func(err error) bool { return mayPass(err) && b.status == exam.ReviewPending }}
	return pushes.run(ctx, func(int) error {
		b.pushes++
		actx := stageContext(ctx, exam.Notify, pol, exam.CPUQueue, b.sub.Campus, b.sub.Priority, 0, b.pushes)
		var out contract.StageOutput
		return workflow.ExecuteActivity(actx, contract.NotifyWorkstation,
			contract.NotifyInput{Exam: b.sub, Reminder: reminder, Summary: b.summary}).Get(ctx, &out)
	})
}

// startReview starts the exam's review of the report the report stage
// made, with its summary and its time (afterReport; a report stage that
// did not say when, the time the pipeline learned of it).
func (p *pipeline) startReview(ctx workflow.Context, report contract.StageOutput) workflow.ChildWorkflowFuture {
	start := contract.ReviewStart{Submission: p.in.Submission, Policy: p.in.Policy, ReportAt: workflow.Now(ctx)}
	if report.Summary != nil {
		start.Summary = *report.Summary
	}
	if report.ReportAt != nil {
		start.ReportAt = *report.ReportAt
	}
	cctx := workflow.WithChildOptions(ctx, contract.ReviewStartOptions(p.in.Submission, p.in.Policy).Child())
	return workflow.ExecuteChildWorkflow(cctx, contract.ReviewWorkflow, start)
}
