// Package workflows holds octflow's Temporal workflows: ExamWorkflow, the
// pipeline of one exam; ReviewWorkflow, the clinician's review that
// outlives it; FleetWorkflow, what the GPU nodes last reported; and
// InboxWorkflow, a campus's report-ready events. Workflow code here is
// deterministic: time, randomness and I/O come only from the SDK or from
// activities. Names, inputs and outputs are in contract/.
package workflows

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// Search attribute keys the workflows keep current.
var (
	stateAttr = temporal.NewSearchAttributeKeyKeyword(exam.AttrState)
	stageAttr = temporal.NewSearchAttributeKeyKeyword(exam.AttrStage)
)

// Backoff of a stage rescheduled because a backing service was
// unreachable: doubling from infraBackoffBase up to infraBackoffCap, each
// delay drawn from its upper half so exams that failed together come
// back apart.
const (
	infraBackoffBase = 2 * time.Second
	infraBackoffCap  = time.Minute
)

// ExamWorkflow is one exam's pipeline: denoise → layers → lesions →
// measure on GPU nodes, then report and notify on CPU workers. Stages
// exchange object keys, never volume bytes. A GPU stage that waits too
// long in its bucket is promoted one bucket up (aging); a stage that
// cannot reach the object store is rescheduled after a backoff without
// spending its attempts. A stage that fails for good (invalid input, a
// panic, out of attempts) makes the exam DEAD with the reason; a failed
// notification does not, because the report exists. The report stage
// opens the exam's ReviewWorkflow once the report is stored, and the
// pipeline ends after the notification, so a pipeline change never has
// to replay against week-old reviews.
func ExamWorkflow(ctx workflow.Context, in contract.ExamInput) (contract.ExamResult, error) {
	p := &pipeline{in: in, progress: contract.Progress{State: string(lifecycle.Created), StagesDone: []exam.Stage{},
		EffectivePriority: in.Submission.Priority}}
	if err := workflow.SetQueryHandler(ctx, contract.ProgressQuery, p.query); err != nil {
		return contract.ExamResult{}, fmt.Errorf("register query: %w", err)
	}
	p.watchUrgentSLA(ctx)

	result := contract.ExamResult{ExamID: in.Submission.ExamID}
	for _, stage := range exam.Pipeline {
		out, err := p.stage(ctx, stage)
		if err != nil && stage == exam.Notify {
			p.progress.NotifyError = failureMessage(err)
			workflow.GetLogger(ctx).Warn("report-ready push failed; the report stands", "error", p.progress.NotifyError)
			break
		}
		if err != nil {
			p.move(ctx, lifecycle.Dead, stage)
			return contract.ExamResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("stage %s failed: %s", stage, failureMessage(err)), failureType(err), err)
		}
		p.progress.StagesDone = append(p.progress.StagesDone, stage)
		if out.Summary != nil {
			result.Summary = *out.Summary
			p.progress.Summary = result.Summary
		}
		p.progress.Notified = p.progress.Notified || out.Delivered
	}
	result.Report = contract.ReportKeys{JSONKey: exam.ReportJSONKey(in.Submission.Ref()), PDFKey: exam.ReportPDFKey(in.Submission.Ref())}
	// The review is its own workflow and outlives this one; the report
	// stage opened it, so a decision finds it once the exam is COMPLETED.
	p.move(ctx, lifecycle.Completed, "")
	return result, nil
}

// pipeline is the state of one ExamWorkflow run.
type pipeline struct {
	in       contract.ExamInput
	progress contract.Progress
	// node is the task queue of the GPU node that ran the exam's latest
	// GPU stage and holds its output ("": none, or it did not take the
	// next stage in time).
	node string
}

// query answers ProgressQuery.
func (p *pipeline) query() (contract.Progress, error) {
	return p.progress, nil
}

// move records a state change the workflow makes itself, after checking
// it against lifecycle's table, and mirrors a new state into the search
// attributes (ExamStage there is the stage at which the exam entered its
// state: the failed stage of a DEAD exam; the API has the current one).
// The moves only the server sees (CLAIMED, EXECUTING, a retry's
// RETRY_WAIT) are folded from history by lifecycle.
func (p *pipeline) move(ctx workflow.Context, to lifecycle.State, stage exam.Stage) {
	from := lifecycle.State(p.progress.State)
	if err := lifecycle.CheckMove(from, to); err != nil {
		// Counted and logged, never applied: the exam keeps a state that
		// its history can explain.
		p.progress.IllegalMoves++
		workflow.GetMetricsHandler(ctx).Counter("octflow_illegal_transitions_total").Inc(1)
		workflow.GetLogger(ctx).Error("illegal transition rejected", "from", from, "to", to, "stage", stage)
		return
	}
	p.progress.Transitions = append(p.progress.Transitions, contract.Transition{At: workflow.Now(ctx), From: string(from), To: string(to), Stage: stage})
	p.progress.State, p.progress.Stage = string(to), stage
	// The search attributes change only with the state: each upsert is a
	// write to the visibility store.
	if from == to {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, stateAttr.ValueSet(string(to)), stageAttr.ValueSet(string(stage)))
}

// stage runs one stage to its end. A GPU stage is scheduled in the exam's
// current bucket with a schedule-to-start timeout equal to that bucket's
// aging threshold; when it expires, the stage is scheduled again one
// bucket up. A stage that could not reach a backing service is
// scheduled again after a backoff, for at most the policy's
// InfraRetryFor.
func (p *pipeline) stage(ctx workflow.Context, stage exam.Stage) (contract.StageOutput, error) {
	p.move(ctx, lifecycle.Queued, stage)
	var infraWaited time.Duration
	for infraTries := 1; ; {
		bucket := p.progress.EffectivePriority
		queue, wait := stage.Queue(), p.in.Policy.AgingAfter(bucket)
		pinned := stage.NeedsGPU() && p.node != "" && p.in.Policy.NodeAffinityWait > 0
		if pinned {
			queue, wait = p.node, p.in.Policy.NodeAffinityWait
		}
		var out contract.StageOutput
		in := contract.StageInput{Exam: p.in.Submission, Summary: &p.progress.Summary}
		if p.in.Policy.LostAttempts > 0 {
			in.MaxFailures = p.in.Policy.MaxAttempts
		}
		if stage == exam.Render {
			// The report stage opens the exam's review once the report
			// is stored.
			in.Review = &contract.ReviewStart{Submission: p.in.Submission, Policy: p.in.Policy}
		}
		err := workflow.ExecuteActivity(stageContext(ctx, stage, p.in.Policy, queue, bucket, wait), stage.ActivityName(),
			in).Get(ctx, &out)
		if err == nil && out.NodeQueue != "" {
			p.node = out.NodeQueue
		}
		switch {
		case isScheduleToStartTimeout(err) && pinned:
			// The node is gone, draining or too busy: any node in the
			// bucket may take the stage, reading its input from the store.
			workflow.GetLogger(ctx).Info("node did not take the stage in time; back to the shared queue",
				"stage", stage, "queue", queue, "waited", wait)
			p.node = ""
			p.move(ctx, lifecycle.Queued, stage)
		case isScheduleToStartTimeout(err):
			p.promote(ctx, stage, bucket, wait)
		case isInfrastructure(err) && infraWaited < p.in.Policy.InfraRetryFor:
			delay := infraBackoff(workflow.GetInfo(ctx).WorkflowExecution.RunID, stage, infraTries)
			workflow.GetLogger(ctx).Warn("stage could not reach a backing service; rescheduling",
				"stage", stage, "error", failureMessage(err), "after", delay, "waitedSoFar", infraWaited)
			p.move(ctx, lifecycle.RetryWait, stage)
			if err := workflow.Sleep(ctx, delay); err != nil {
				return out, err
			}
			infraWaited += delay
			infraTries++
			p.move(ctx, lifecycle.Queued, stage)
		default:
			return out, err
		}
	}
}

// infraBackoff is the wait before rescheduling a stage for the n-th time
// after infrastructure failures. Its jitter is drawn from the run ID, so
// it is the same on every replay and different for every exam.
func infraBackoff(runID string, stage exam.Stage, n int) time.Duration {
	ceiling := min(infraBackoffCap, infraBackoffBase<<min(n-1, 10))
	h := fnv.New64a()
	h.Write([]byte(runID + "/" + string(stage) + "/" + strconv.Itoa(n)))
	u := float64(h.Sum64()%1_000_000) / 1_000_000
	return ceiling/2 + time.Duration(u*float64(ceiling/2))
}

func (p *pipeline) promote(ctx workflow.Context, stage exam.Stage, from exam.Priority, waited time.Duration) {
	to := from.Up()
	p.progress.EffectivePriority = to
	p.progress.Promotions = append(p.progress.Promotions, contract.Promotion{At: workflow.Now(ctx), Stage: stage, From: from, To: to, Waited: waited})
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"from": string(from), "to": string(to)}).
		Counter("octflow_promotions_total").Inc(1)
	workflow.GetLogger(ctx).Info("stage promoted after aging", "stage", stage, "from", from, "to", to, "waited", waited)
	p.move(ctx, lifecycle.Queued, stage)
}

// watchUrgentSLA logs and counts an urgent exam that has no report within
// the SLA. It only watches; the exam goes on.
func (p *pipeline) watchUrgentSLA(ctx workflow.Context) {
	if p.in.Submission.Priority != exam.Urgent || p.in.Policy.UrgentSLA <= 0 {
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := workflow.NewTimer(ctx, p.in.Policy.UrgentSLA).Get(ctx, nil); err != nil {
			return
		}
		if !lifecycle.State(p.progress.State).Terminal() {
			p.progress.SLABreached = true
			workflow.GetMetricsHandler(ctx).Counter("octflow_urgent_sla_breaches_total").Inc(1)
			workflow.GetLogger(ctx).Warn("urgent exam breached its SLA", "sla", p.in.Policy.UrgentSLA,
				"state", p.progress.State, "stage", p.progress.Stage)
		}
	})
}

// stageContext sets the activity options of one stage: its task queue,
// timeouts, retry policy, its bucket's fair share and how long it may
// wait to start (its bucket's aging, or the wait for its node; 0: no
// limit).
func stageContext(ctx workflow.Context, stage exam.Stage, pol exam.Policy, queue string, bucket exam.Priority, wait time.Duration) workflow.Context {
	final := []string{contract.ErrTypeInvalidVolume, contract.ErrTypeStagePanic, contract.ErrTypeReportExists}
	if pol.InfraRetryFor > 0 {
		// The workflow reschedules these itself, without spending attempts.
		final = append(final, contract.ErrTypeInfrastructure)
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    pol.StageTimeout,
		HeartbeatTimeout:       pol.HeartbeatTimeout,
		// A stage fails for good once its own failures spent
		// MaxAttempts (StageInput.MaxFailures); LostAttempts more are
		// for attempts lost with their node.
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        pol.RetryBase,
			BackoffCoefficient:     2,
			MaximumInterval:        pol.RetryCap,
			MaximumAttempts:        pol.MaxAttempts + pol.LostAttempts,
			NonRetryableErrorTypes: final,
		},
		Priority: contract.TaskPriority(pol, bucket),
	})
}

func isScheduleToStartTimeout(err error) bool {
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

func isInfrastructure(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == contract.ErrTypeInfrastructure
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
	return contract.ErrTypeStageFailed
}
