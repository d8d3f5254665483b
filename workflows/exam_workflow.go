// Package workflows holds ExamWorkflow, the durable pipeline of one exam,
// and the state bookkeeping it does as it goes. Workflow code here is
// deterministic: time, randomness and I/O come only from the SDK or from
// activities.
package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/activities"
	"octflow/exam"
)

// ExamWorkflowName is the registered workflow type.
const ExamWorkflowName = "ExamWorkflow"

// ProgressQuery returns the exam's Progress.
const ProgressQuery = "progress"

// Progress is what the workflow knows about itself beyond Temporal's
// status: the domain state it last entered, the stages done, promotions.
type Progress struct {
	State             exam.State    `json:"state"`
	Stage             exam.Stage    `json:"stage,omitempty"`
	EffectivePriority exam.Priority `json:"effectivePriority"`
	StagesDone        []exam.Stage  `json:"stagesDone"`
	Promotions        []Promotion   `json:"promotions,omitempty"`
	Notified          bool          `json:"notified"`
	NotifyError       string        `json:"notifyError,omitempty"`
	SLABreached       bool          `json:"slaBreached,omitempty"`
	Summary           exam.Summary  `json:"summary"`
	// Review is empty until the report exists, then pending until a
	// clinician decides; Reviews lists every decision and amendment.
	Review       exam.ReviewStatus `json:"review,omitempty"`
	Reviews      []exam.Review     `json:"reviews,omitempty"`
	IllegalMoves int               `json:"illegalMoves"`
	Transitions  []Transition      `json:"transitions,omitempty"`
}

// Transition is one domain state change made by the workflow.
type Transition struct {
	At    time.Time  `json:"at"`
	From  exam.State `json:"from"`
	To    exam.State `json:"to"`
	Stage exam.Stage `json:"stage,omitempty"`
}

// Search attribute keys the workflow keeps current.
var (
	stateAttr = temporal.NewSearchAttributeKeyKeyword(exam.AttrState)
	stageAttr = temporal.NewSearchAttributeKeyKeyword(exam.AttrStage)
)

// ExamWorkflow runs one exam: denoise → layers → lesions → measure on GPU
// nodes, then report and notify on CPU workers. Stages exchange object
// keys, never volume bytes. A GPU stage that waits too long in its
// bucket is promoted one bucket up (aging). A stage that fails for good
// (invalid input, or out of attempts) makes the exam DEAD with the
// reason; a failed notification does not, because the report exists.
// Once the report exists the exam is COMPLETED and the workflow stays
// open for the clinician's review (see awaitReview).
func ExamWorkflow(ctx workflow.Context, in exam.Input) (exam.Result, error) {
	run := newExamRun(in)
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) { return *run.progress, nil }); err != nil {
		return exam.Result{}, fmt.Errorf("register query: %w", err)
	}
	if err := run.registerReview(ctx); err != nil {
		return exam.Result{}, fmt.Errorf("register review: %w", err)
	}
	// Exams started before the SLA watch existed replay without it.
	if workflow.GetVersion(ctx, "urgent-sla-watch", workflow.DefaultVersion, 1) == 1 {
		run.watchUrgentSLA(ctx)
	}

	result := exam.Result{ExamID: in.Submission.ExamID}
	for _, stage := range exam.Pipeline {
		out, err := run.stage(ctx, stage)
		if err != nil && stage == exam.Notify {
			run.progress.NotifyError = failureMessage(err)
			workflow.GetLogger(ctx).Warn("report-ready push failed; the report stands", "error", run.progress.NotifyError)
			break
		}
		if err != nil {
			run.move(ctx, exam.Dead, stage)
			return exam.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("stage %s failed: %s", stage, failureMessage(err)), failureType(err), err)
		}
		run.progress.StagesDone = append(run.progress.StagesDone, stage)
		if out.Summary != nil {
			result.Summary = *out.Summary
			run.progress.Summary = result.Summary
		}
		run.progress.Notified = run.progress.Notified || out.Delivered
	}
	result.Report = exam.Report{JSONKey: exam.ReportJSONKey(in.Submission.ExamID), PDFKey: exam.ReportPDFKey(in.Submission.ExamID)}
	run.move(ctx, exam.Completed, "")
	// Exams started before the review loop existed end here on replay.
	if workflow.GetVersion(ctx, "review-loop", workflow.DefaultVersion, 1) == 1 {
		run.awaitReview(ctx)
		result.Review, result.Reviews = run.progress.Review, run.progress.Reviews
	}
	return result, nil
}

// examRun is the state of one ExamWorkflow execution.
type examRun struct {
	in           exam.Input
	progress     *Progress
	reviewClosed bool
}

func newExamRun(in exam.Input) *examRun {
	in.Policy = in.Policy.WithDefaults()
	return &examRun{in: in, progress: &Progress{
		State: exam.Created, StagesDone: []exam.Stage{}, EffectivePriority: in.Submission.Priority,
	}}
}

// move records a domain state change after checking it against the
// transition table, and mirrors it into the search attributes.
func (r *examRun) move(ctx workflow.Context, to exam.State, stage exam.Stage) {
	p := r.progress
	if err := exam.CheckMove(p.State, to); err != nil {
		// Counted and logged, never applied: the exam keeps a state that
		// its history can explain.
		p.IllegalMoves++
		workflow.GetMetricsHandler(ctx).Counter("octflow_illegal_transitions_total").Inc(1)
		workflow.GetLogger(ctx).Error("illegal transition rejected", "from", p.State, "to", to, "stage", stage)
		return
	}
	p.Transitions = append(p.Transitions, Transition{At: workflow.Now(ctx), From: p.State, To: to, Stage: stage})
	p.State, p.Stage = to, stage
	_ = workflow.UpsertTypedSearchAttributes(ctx, stateAttr.ValueSet(string(to)), stageAttr.ValueSet(string(stage)))
}

// stage runs one stage to its end. A GPU stage is scheduled in the exam's
// current bucket with a schedule-to-start timeout equal to that bucket's
// aging threshold; when it expires, the stage is scheduled again one
// bucket up.
func (r *examRun) stage(ctx workflow.Context, stage exam.Stage) (activities.StageOutput, error) {
	r.move(ctx, exam.Queued, stage)
	for {
		bucket := r.progress.EffectivePriority
		var aging time.Duration
		if stage.NeedsGPU() {
			aging = r.in.Policy.AgingAfter(bucket)
		}
		var out activities.StageOutput
		err := workflow.ExecuteActivity(stageContext(ctx, stage, r.in.Policy, bucket, aging), stage.ActivityName(),
			activities.StageInput{Exam: r.in.Submission, Summary: &r.progress.Summary}).Get(ctx, &out)
		if !isScheduleToStartTimeout(err) {
			return out, err
		}
		r.promote(ctx, stage, bucket, aging)
	}
}

// Promotion records a stage moved one bucket up after waiting too long.
type Promotion struct {
	At     time.Time     `json:"at"`
	Stage  exam.Stage    `json:"stage"`
	From   exam.Priority `json:"from"`
	To     exam.Priority `json:"to"`
	Waited time.Duration `json:"waited"`
}

func (r *examRun) promote(ctx workflow.Context, stage exam.Stage, from exam.Priority, waited time.Duration) {
	to := from.Up()
	r.progress.EffectivePriority = to
	r.progress.Promotions = append(r.progress.Promotions, Promotion{At: workflow.Now(ctx), Stage: stage, From: from, To: to, Waited: waited})
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"from": string(from), "to": string(to)}).
		Counter("octflow_promotions_total").Inc(1)
	workflow.GetLogger(ctx).Info("stage promoted after aging", "stage", stage, "from", from, "to", to, "waited", waited)
	r.move(ctx, exam.Queued, stage)
}

// watchUrgentSLA logs and counts an urgent exam that has no report within
// the SLA. It only watches; the exam goes on.
func (r *examRun) watchUrgentSLA(ctx workflow.Context) {
	if r.in.Submission.Priority != exam.Urgent || r.in.Policy.UrgentSLA <= 0 {
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := workflow.NewTimer(ctx, r.in.Policy.UrgentSLA).Get(ctx, nil); err != nil {
			return
		}
		if !r.progress.State.Terminal() {
			r.progress.SLABreached = true
			workflow.GetMetricsHandler(ctx).Counter("octflow_urgent_sla_breaches_total").Inc(1)
			workflow.GetLogger(ctx).Warn("urgent exam breached its SLA", "sla", r.in.Policy.UrgentSLA,
				"state", r.progress.State, "stage", r.progress.Stage)
		}
	})
}

// stageContext sets the activity options of one stage: its task queue,
// timeouts, retry policy, its bucket's fair share of the GPU queue and,
// for a bucket that ages, the schedule-to-start timeout.
func stageContext(ctx workflow.Context, stage exam.Stage, pol exam.Policy, bucket exam.Priority, aging time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              stage.Queue(),
		ScheduleToStartTimeout: aging,
		StartToCloseTimeout:    pol.StageTimeout,
		HeartbeatTimeout:       pol.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        pol.RetryBase,
			BackoffCoefficient:     2,
			MaximumInterval:        pol.RetryCap,
			MaximumAttempts:        pol.MaxAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidVolume},
		},
		Priority: temporal.Priority{
			FairnessKey:    string(bucket),
			FairnessWeight: pol.Weight(bucket),
		},
	})
}

func isScheduleToStartTimeout(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// failureMessage digs the root cause out of Temporal's error wrapping.
func failureMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out: " + timeout.TimeoutType().String()
	}
	return err.Error()
}

func failureType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return "StageFailed"
}
