package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
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
// (startReview), and it outlives the pipeline. When an admin's rerun
// supersedes the report, the rerun's pipeline signals the review
// (contract.ReviewSupersedeSignal, with the new report's ReviewStart):
// it takes no more decisions, closes as superseded, archives its
// decisions under the superseded report's run too, and continues as new
// as the review of the new report, under the same ID (supersedeReview).
func ReviewWorkflow(ctx workflow.Context, in contract.ReviewStart) (contract.ReviewState, error) {
	b := newReviewBook(in.Submission, in.Policy, in.Summary)
	b.archiving = workflow.NewMutex(ctx)
	b.reportRun = in.ReportRun
	if b.reportRun == "" && workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		b.reportRun = workflow.GetInfo(ctx).ParentWorkflowExecution.RunID
	}
	if err := workflow.SetQueryHandler(ctx, contract.ReviewQuery, func() (contract.ReviewState, error) { return b.state(), nil }); err != nil {
		return contract.ReviewState{}, fmt.Errorf("register query: %w", err)
	}
	b.closesAt = in.ReportAt.Add(in.Policy.ReviewWindow)
	if err := b.register(ctx); err != nil {
		return contract.ReviewState{}, fmt.Errorf("register review: %w", err)
	}
	supersedes := workflow.GetSignalChannel(ctx, contract.ReviewSupersedeSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var next contract.ReviewStart
		supersedes.Receive(ctx, &next)
		b.next = &next
	})
	b.await(ctx)
	// The final review.json must exist: retried until the store answers.
	if err := b.archiveTo(ctx, true); err != nil {
		return b.state(), err
	}
	if b.next == nil {
		// Superseded while the window's close was being archived: that
		// archive is kept under the report's run as well.
		var next contract.ReviewStart
		if !supersedes.ReceiveAsync(&next) {
			return b.state(), nil
		}
		b.next = &next
		if err := b.archiveTo(ctx, true); err != nil {
			return b.state(), err
		}
	}
	workflow.GetLogger(ctx).Info("review superseded; it goes on as the new report's", "status", b.status)
	return b.state(), workflow.NewContinueAsNewError(ctx, contract.ReviewWorkflow, *b.next)
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
	// reportRun is the run whose report is reviewed ("" if unknown).
	reportRun string
	// next is the superseding report's review, once its run signalled
	// it: the review takes no more decisions, closes as superseded and
	// continues as next.
	next *contract.ReviewStart
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
		archive := contract.ReviewArchive{Exam: b.sub.Ref(), Status: b.status, Reviews: b.reviews, ClosesAt: b.closesAt, Closed: final,
			ReportRun: b.reportRun}
		if b.next != nil {
			archive.SupersededBy = b.next.ReportRun
		}
		return workflow.ExecuteActivity(oneTry(ctx, opts), contract.ArchiveReview, archive).Get(ctx, nil)
	})
}

// refuse says why a decision cannot be taken at now, or nil.
func (b *reviewBook) refuse(req contract.ReviewRequest, now time.Time) error {
	switch {
	case b.next != nil:
		return fmt.Errorf("%w: the report was superseded by an admin's rerun; review the new report", ErrReviewRefused)
	case b.closed || !now.Before(b.closesAt):
		return fmt.Errorf("%w: the review window has closed", ErrReviewRefused)
	case req.Decision != exam.Approve && req.Decision != exam.Reject && req.Decision != exam.Amend:
		return fmt.Errorf("%w: unknown decision %q", ErrReviewRefused, req.Decision)
	case b.status != exam.ReviewPending && req.Decision != exam.Amend:
		return fmt.Errorf("%w: the report is already %s; only amend is accepted", ErrReviewRefused, b.status)
	}
	return nil
}

// await keeps the review open until the window closes or the report is
// superseded, reminding the workstation about an urgent exam while no
// decision has come.
func (b *reviewBook) await(ctx workflow.Context) {
	pol := b.pol
	superseded := func() bool { return b.next != nil }
	decided := func() bool { return b.status != exam.ReviewPending || superseded() }
	urgent := b.sub.Priority == exam.Urgent && b.sub.CallbackURL != ""
	for ; urgent && pol.ReviewReminder > 0 && b.reminders < maxReminders; b.reminders++ {
		wait := min(pol.ReviewReminder, b.closesAt.Sub(workflow.Now(ctx)))
		if wait <= 0 {
			break
		}
		if ok, _ := workflow.AwaitWithTimeout(ctx, wait, decided); ok {
			break
		}
		if b.closesAt.Sub(workflow.Now(ctx)) <= 0 || superseded() {
			break
		}
		if err := b.remind(ctx, b.reminders+1); err != nil {
			workflow.GetLogger(ctx).Warn("review reminder not delivered", "error", failureMessage(err))
		}
	}
	if rest := b.closesAt.Sub(workflow.Now(ctx)); rest > 0 && !superseded() {
		_, _ = workflow.AwaitWithTimeout(ctx, rest, superseded)
	}
	b.closed = true
	switch {
	case superseded():
		b.status = exam.ReviewSuperseded
	case b.status == exam.ReviewPending:
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
		retryable: func(err error) bool { return mayPass(err) && b.status == exam.ReviewPending && b.next == nil }}
	return pushes.run(ctx, func(int) error {
		b.pushes++
		actx := stageContext(ctx, exam.Notify, pol, exam.CPUQueue, b.sub.Campus, b.sub.Priority, 0, b.pushes)
		var out contract.StageOutput
		return workflow.ExecuteActivity(actx, contract.NotifyWorkstation,
			contract.NotifyInput{Exam: b.sub, Reminder: reminder, Summary: b.summary}).Get(ctx, &out)
	})
}

// reviewStart is the review of the report the report stage made, with
// its summary and its time (a report stage that did not say when, the
// time the pipeline learned of it), and the run that made it.
func (p *pipeline) reviewStart(ctx workflow.Context, report contract.StageOutput) contract.ReviewStart {
	start := contract.ReviewStart{Submission: p.in.Submission, Policy: p.in.Policy, ReportAt: workflow.Now(ctx),
		ReportRun: workflow.GetInfo(ctx).WorkflowExecution.RunID}
	if p.in.Rerun.Superseding() {
		start.Supersedes = p.in.Rerun.Supersedes
	}
	if report.Summary != nil {
		start.Summary = *report.Summary
	}
	if report.ReportAt != nil {
		start.ReportAt = *report.ReportAt
	}
	return start
}

// startReview starts the exam's review (afterReport); for a superseding
// run, though an earlier review of the exam has closed.
func (p *pipeline) startReview(ctx workflow.Context, start contract.ReviewStart, superseding bool) workflow.ChildWorkflowFuture {
	opts := contract.ReviewStartOptions(p.in.Submission, p.in.Policy)
	if superseding {
		opts = opts.Superseding()
	}
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts.Child()), contract.ReviewWorkflow, start)
}

// supersedeTries bounds the rounds of supersedeReview.
const supersedeTries = 3

// supersedeReview hands a superseding run's report to the exam's review:
// the open review (of the superseded report) takes it by signal, closes
// as superseded and continues as the new report's, under the same ID;
// with no review open (its window closed) a new one starts for the new
// report. Should a start find a review open again (it was closing when
// the signal came), the signal is sent again, a few rounds at most: the
// exam keeps one review, of the report that stands.
func (p *pipeline) supersedeReview(ctx workflow.Context, start contract.ReviewStart) {
	id := contract.ReviewWorkflowID(p.in.Submission.Ref())
	for range supersedeTries {
		err := workflow.SignalExternalWorkflow(ctx, id, "", contract.ReviewSupersedeSignal, start).Get(ctx, nil)
		if err == nil {
			workflow.GetLogger(ctx).Info("the exam's open review goes on with the superseding report")
			return
		}
		err = p.startReview(ctx, start, true).GetChildWorkflowExecution().Get(ctx, nil)
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if !errors.As(err, &started) {
			if err != nil {
				workflow.GetLogger(ctx).Warn("review not started", "error", err)
			}
			return
		}
	}
	workflow.GetLogger(ctx).Error("the superseding report's review neither reached the open review nor started")
}
