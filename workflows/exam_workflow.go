// Package workflows holds ExamWorkflow, the durable pipeline of one exam,
// and the state bookkeeping it does as it goes. Workflow code here is
// deterministic: time, randomness and I/O come only from the SDK or from
// activities.
package workflows

import (
	"errors"
	"fmt"
	"time"

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
// status: the domain state it last entered and the stages done.
type Progress struct {
	State        exam.State   `json:"state"`
	Stage        exam.Stage   `json:"stage,omitempty"`
	StagesDone   []exam.Stage `json:"stagesDone"`
	Notified     bool         `json:"notified"`
	NotifyError  string       `json:"notifyError,omitempty"`
	IllegalMoves int          `json:"illegalMoves"`
	Transitions  []Transition `json:"transitions,omitempty"`
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
// keys, never volume bytes. A stage that fails for good (invalid input,
// or out of attempts) makes the exam DEAD with the reason; a failed
// notification does not, because the report already exists.
func ExamWorkflow(ctx workflow.Context, in exam.Input) (exam.Result, error) {
	in.Policy = in.Policy.WithDefaults()
	sub := in.Submission
	p := &Progress{State: exam.Created, StagesDone: []exam.Stage{}}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) { return *p, nil }); err != nil {
		return exam.Result{}, fmt.Errorf("register query: %w", err)
	}
	move := func(to exam.State, stage exam.Stage) {
		if err := exam.CheckMove(p.State, to); err != nil {
			// Counted and logged, never applied: the exam keeps a state
			// that its history can explain.
			p.IllegalMoves++
			workflow.GetLogger(ctx).Error("illegal transition rejected", "from", p.State, "to", to, "stage", stage)
			return
		}
		p.Transitions = append(p.Transitions, Transition{At: workflow.Now(ctx), From: p.State, To: to, Stage: stage})
		p.State, p.Stage = to, stage
		_ = workflow.UpsertTypedSearchAttributes(ctx, stateAttr.ValueSet(string(to)), stageAttr.ValueSet(string(stage)))
	}

	result := exam.Result{ExamID: sub.ExamID}
	for _, stage := range exam.Pipeline {
		move(exam.Queued, stage)
		var out activities.StageOutput
		err := workflow.ExecuteActivity(stageContext(ctx, stage, in), stage.ActivityName(),
			activities.StageInput{Exam: sub}).Get(ctx, &out)
		if err != nil && stage == exam.Notify {
			p.NotifyError = failureMessage(err)
			workflow.GetLogger(ctx).Warn("report-ready push failed; the report stands", "error", p.NotifyError)
			break
		}
		if err != nil {
			move(exam.Dead, stage)
			return exam.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("stage %s failed: %s", stage, failureMessage(err)), failureType(err), err)
		}
		p.StagesDone = append(p.StagesDone, stage)
		if out.Summary != nil {
			result.Summary = *out.Summary
		}
		p.Notified = p.Notified || out.Delivered
	}
	result.Report = exam.Report{JSONKey: exam.ReportJSONKey(sub.ExamID), PDFKey: exam.ReportPDFKey(sub.ExamID)}
	move(exam.Completed, "")
	return result, nil
}

// stageContext sets the activity options of one stage: its task queue,
// timeouts, retry policy and fair share of the GPU queue.
func stageContext(ctx workflow.Context, stage exam.Stage, in exam.Input) workflow.Context {
	pol := in.Policy
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           stage.Queue(),
		StartToCloseTimeout: pol.StageTimeout,
		HeartbeatTimeout:    pol.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        pol.RetryBase,
			BackoffCoefficient:     2,
			MaximumInterval:        pol.RetryCap,
			MaximumAttempts:        pol.MaxAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidVolume},
		},
		Priority: temporal.Priority{
			FairnessKey:    string(in.Submission.Priority),
			FairnessWeight: pol.Weight(in.Submission.Priority),
		},
	})
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
