// Package workflows holds octflow's Temporal workflows: ExamWorkflow, the
// pipeline of one exam over the stages it is registered with (Register);
// ReviewWorkflow, the clinician's review that outlives it;
// ExportWorkflow, the sending of an exam's results to its campus's PACS;
// FleetWorkflow, what the GPU nodes last reported; InboxWorkflow, a
// campus's report-ready events; and ScanSweepWorkflow, the removal of
// stored scans no exam took. Workflow code here is
// deterministic: time, randomness and I/O come only from the SDK or from
// activities. Names, inputs and outputs are in contract/.
package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

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

// ExamWorkflow is the workflow of one exam's pipeline through stages, in
// their order (the workers register it over activities.Pipeline:
// denoise → layers → lesions → measure on GPU nodes, then report and
// notify on CPU workers). Stages
// exchange object keys, never volume bytes. A GPU stage that waits too
// long in its bucket is promoted one bucket up (aging); a stage that
// cannot reach the object store is rescheduled after a backoff without
// spending its attempts. A stage that fails for good (invalid input, a
// panic, out of attempts) makes the exam DEAD with the reason; a failed
// notification does not, because the report exists. Once the report
// is stored the pipeline starts the exam's ReviewWorkflow (and its
// ExportWorkflow) as children it does not wait for, and it ends after
// the notification, so a pipeline change never has to replay against
// week-old reviews.
func ExamWorkflow(stages exam.Pipeline) func(workflow.Context, contract.ExamInput) (contract.ExamResult, error) {
	return func(ctx workflow.Context, in contract.ExamInput) (contract.ExamResult, error) {
		return runPipeline(ctx, stages, in)
	}
}

// runPipeline runs the exam in through stages, in their order.
func runPipeline(ctx workflow.Context, stages exam.Pipeline, in contract.ExamInput) (contract.ExamResult, error) {
	p := &pipeline{in: in, state: lifecycle.Created, bucket: in.Submission.Priority, algorithms: map[exam.Stage]string{}}
	p.watchUrgentSLA(ctx)

	result := contract.ExamResult{ExamID: in.Submission.ExamID}
	for _, spec := range stages {
		stage := spec.Stage
		out, err := p.stage(ctx, spec)
		if err != nil && stage == exam.Notify {
			result.NotifyFailure = p.last
			workflow.GetLogger(ctx).Warn("report-ready push failed; the report stands", "error", failureMessage(err))
			break
		}
		if err != nil {
			p.move(ctx, lifecycle.Dead, stage)
			return contract.ExamResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("stage %s failed: %s", stage, failureMessage(err)), failureType(err), err)
		}
		if out.Summary != nil {
			p.summary = *out.Summary
		}
		if out.Algorithm != "" {
			p.algorithms[stage] = out.Algorithm
		}
		if stage == exam.Render {
			p.afterReport(ctx, out)
		}
	}
	result.Summary = p.summary
	result.Report = contract.ReportKeys{JSONKey: exam.ReportJSONKey(in.Submission.Ref()), PDFKey: exam.ReportPDFKey(in.Submission.Ref())}
	p.move(ctx, lifecycle.Completed, "")
	return result, nil
}

// afterReport starts what the report's existence starts, each a
// workflow of its own that outlives the pipeline (a child it abandons):
// the exam's review, with the report's summary and time, and, for a
// campus with a PACS, the export of its results. The pipeline waits for
// their starts, not for them: a workstation told of the report finds
// its review open, and the report-ready push waits for no PACS. A
// workflow another run of the exam started already is left as it is:
// an exam has one review, and results delivered once are not sent
// again. A run that superseded an earlier run's report (an admin's,
// contract.Rerun.Supersedes) hands its report to the exam's open review
// instead, which closes as superseded and goes on as the new report's
// (supersedeReview), and exports its results though the earlier ones
// were delivered: they name and reject the earlier ones.
func (p *pipeline) afterReport(ctx workflow.Context, report contract.StageOutput) {
	type start struct {
		name   string
		future workflow.ChildWorkflowFuture
	}
	superseding := p.in.Rerun.Superseding()
	var starts []start
	if superseding {
		p.supersedeReview(ctx, p.reviewStart(ctx, report))
	} else {
		starts = append(starts, start{contract.ReviewWorkflow, p.startReview(ctx, p.reviewStart(ctx, report), false)})
	}
	if p.in.Export {
		starts = append(starts, start{contract.ExportWorkflow, p.startExport(ctx, superseding)})
	}
	for _, s := range starts {
		err := s.future.GetChildWorkflowExecution().Get(ctx, nil)
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		switch {
		case errors.As(err, &started):
			workflow.GetLogger(ctx).Info("another run of the exam started it already", "workflow", s.name)
		case err != nil:
			workflow.GetLogger(ctx).Warn("not started", "workflow", s.name, "error", err)
		}
	}
}

// pipeline is the state of one ExamWorkflow run. What it says of the
// exam is in its history, where the exam's status and timeline read it
// (lifecycle): its state in the search attributes it upserts, each
// retried try's record in the timer of the wait after it, a failed
// notification in its result, a DEAD exam's cause in its failure.
type pipeline struct {
	in contract.ExamInput
	// state is the exam's state as the workflow last moved it, and
	// atStage the stage it moved it at.
	state   lifecycle.State
	atStage exam.Stage
	// bucket is the bucket the exam's stages are scheduled in: the
	// submitted one, or above it once aging promoted a stage.
	bucket exam.Priority
	// summary is the exam's headline result as the stages said it.
	summary exam.Summary
	// last is the latest attempt the workflow recorded (nil: none yet).
	last *contract.Attempt
	// node is the task queue of the GPU node that ran the exam's latest
	// GPU stage and holds its output ("": none, or it did not take the
	// next stage in time).
	node string
	// algorithms name what computed each stage done so far, as its
	// output said: the report records them.
	algorithms map[exam.Stage]string
}

// input is what a try of the stage spec is given, as it states
// (spec.Input): the exam, and for a stage taking a report's or a
// notification's input what the stages before it said (the summary, the
// algorithms), which the pipeline passes on rather than have a stage
// work it out again.
func (p *pipeline) input(spec exam.StageSpec) any {
	switch spec.Input {
	case exam.ReportInput:
		return contract.ReportInput{Exam: p.in.Submission, Summary: p.summary, Algorithms: p.algorithms, Rerun: p.in.Rerun}
	case exam.NotifyInput:
		return contract.NotifyInput{Exam: p.in.Submission, Summary: p.summary}
	}
	return contract.StageInput{Exam: p.in.Submission}
}

// move records a state change the workflow makes itself, after checking
// it against lifecycle's table, and mirrors a new state into the search
// attributes (ExamWorkflowStage there is the stage at which the exam entered its
// state: the failed stage of a DEAD exam; the API has the current one).
// The moves only the server sees (CLAIMED, EXECUTING, a retry's
// RETRY_WAIT) are folded from history by lifecycle.
func (p *pipeline) move(ctx workflow.Context, to lifecycle.State, stage exam.Stage) {
	from := p.state
	if err := lifecycle.CheckMove(from, to); err != nil {
		// Counted and logged, never applied: the exam keeps a state that
		// its history can explain.
		workflow.GetMetricsHandler(ctx).Counter(IllegalTransitionsCounter).Inc(1)
		workflow.GetLogger(ctx).Error("illegal transition rejected", "from", from, "to", to, "stage", stage)
		return
	}
	p.state, p.atStage = to, stage
	// The search attributes change only with the state: each upsert is a
	// write to the visibility store.
	if from == to {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, stateAttr.ValueSet(string(to)), stageAttr.ValueSet(string(stage)))
}

// stage runs one stage to its end, one attempt at a time, and records
// each attempt with its outcome (contract.Attempt). A GPU stage is
// scheduled in the exam's current bucket with a schedule-to-start
// timeout equal to that bucket's aging threshold; when it expires, the
// stage is scheduled again one bucket up. A stage that failed by its own
// error, or was lost with its node, is scheduled again after a jittered
// backoff while the policy's attempts last; one that could not reach a
// backing service, after its own backoff for at most the policy's
// InfraRetryFor, without spending attempts.
func (p *pipeline) stage(ctx workflow.Context, spec exam.StageSpec) (contract.StageOutput, error) {
	stage := spec.Stage
	p.move(ctx, lifecycle.Queued, stage)
	var failed, lost, try int32
	var infraTries int
	var infraWaited time.Duration
	pol := p.in.Policy
	for {
		try++
		bucket := p.bucket
		queue, wait := pol.StageQueue(spec), pol.AgingAfter(bucket)
		pinned := spec.GPU && p.node != "" && pol.NodeAffinityWait > 0
		if pinned {
			queue, wait = p.node, pol.NodeAffinityWait
		}
		var out contract.StageOutput
		in := p.input(spec)
		att := contract.Attempt{Stage: stage, Try: try, Number: failed + lost + 1, Queue: queue, Bucket: bucket, ScheduledAt: workflow.Now(ctx)}
		first := p.startTry(ctx, spec, att, in, wait, pinned)
		decided := p.await(ctx, first, in, &try)
		att, out, pinned = decided.att, decided.out, decided.pinned
		err := decided.err
		att.EndedAt, att.Outcome, att.Node = decided.endedAt, contract.Classify(err, pinned, pol.InfraRetryFor > 0), contract.AttemptNode(err)
		if err != nil {
			att.Failure, att.FailureType = failureMessage(err), failureType(err)
		}
		var delay time.Duration
		switch att.Outcome {
		case contract.Done:
			// The node's own queue, where the exam's next GPU stages
			// wait for it: only a node queue of the exam's own GPU queue
			// (a node names it; a campus's exams never go to another's).
			if out.NodeQueue != "" && exam.IsNodeQueueOf(pol.GPUStageQueue(), out.NodeQueue) {
				p.node = out.NodeQueue
			}
			att.Node, att.GPU = cmp.Or(att.Node, out.Node), out.GPU
			p.record(att)
			return out, nil
		case contract.Unclaimed:
			// The node is gone, draining or too busy: any node in the
			// bucket may take the stage, reading its input from the store.
			workflow.GetLogger(ctx).Info("node did not take the stage in time; back to the shared queue",
				"stage", stage, "queue", att.Queue, "waited", wait)
			p.node = ""
			p.record(att)
			continue
		case contract.Aged:
			p.record(att)
			p.promote(ctx, stage, bucket, wait)
			continue
		case contract.Unreachable:
			if infraWaited >= pol.InfraRetryFor {
				p.record(att) // the last try of a spent budget: no wait after it
				return out, err
			}
			delay = infraBackoff(workflow.GetInfo(ctx).WorkflowExecution.RunID, stage, infraTries+1)
			infraTries++
			infraWaited += delay
			workflow.GetLogger(ctx).Warn("stage could not reach a backing service; rescheduling",
				"stage", stage, "error", att.Failure, "after", delay, "waitedSoFar", infraWaited-delay)
		case contract.Failed, contract.Lost:
			if att.Outcome == contract.Failed {
				failed++
			} else {
				lost++
			}
			// The next try goes to any node: this one is gone, or failed
			// the stage (a node that ran out of memory takes a batch's
			// retries elsewhere).
			p.node = ""
			if failed >= pol.MaxAttempts || failed+lost >= pol.MaxAttempts+pol.LostAttempts {
				p.record(att)
				return out, attemptsSpent(err)
			}
			delay = retryDelay(workflow.GetInfo(ctx).WorkflowExecution.RunID, stage, failed+lost, pol, err)
			workflow.GetLogger(ctx).Warn("stage attempt failed; retrying", "stage", stage, "try", try,
				"outcome", att.Outcome, "error", att.Failure, "after", delay)
		default: // Refused
			p.record(att)
			return out, err
		}
		// At least a millisecond: a zero wait starts no timer, and the
		// timer is where the exam's timeline reads the attempt.
		delay = max(delay, time.Millisecond)
		att.RetryAfter = delay
		p.record(att)
		p.move(ctx, lifecycle.RetryWait, stage)
		// The wait's timer carries the attempt it follows, where the
		// exam's timeline reads it. A struct of strings and numbers
		// marshals to the same JSON on every replay (workflowcheck flags
		// any use of reflection).
		//workflowcheck:ignore
		note := contract.RetrySummary(att)
		timer := workflow.NewTimerWithOptions(ctx, delay, workflow.TimerOptions{Summary: note})
		if err := timer.Get(ctx, nil); err != nil {
			return out, err
		}
		p.move(ctx, lifecycle.Queued, stage)
	}
}

// maxHandedHedges bounds how often a hedge is scheduled again after it
// went unclaimed (its chosen node did not take it in time, or a degraded
// node, each of whose polls made before it knew can take one, handed it
// back).
const maxHandedHedges = 3

// tryRun is one try of a stage in flight, or ended.
type tryRun struct {
	spec    exam.StageSpec
	att     contract.Attempt
	pinned  bool
	future  workflow.Future
	cancel  workflow.CancelFunc
	done    bool
	endedAt time.Time
	out     contract.StageOutput
	err     error
}

// startTry schedules the try att describes, waiting at most wait to
// start (0: no limit).
func (p *pipeline) startTry(ctx workflow.Context, spec exam.StageSpec, att contract.Attempt, in any, wait time.Duration, pinned bool) *tryRun {
	tctx, cancel := workflow.WithCancel(stageContext(ctx, att.Stage, p.in.Policy, att.Queue, p.in.Submission.Campus, att.Bucket, wait, att.Try))
	return &tryRun{spec: spec, att: att, pinned: pinned, cancel: cancel,
		future: workflow.ExecuteActivity(tctx, spec.Activity, in)}
}

// await waits for the try to end and returns the try that decides the
// stage. A GPU stage's try may be hedged meanwhile: when the fleet says
// the degraded node that holds it is past its deadline (HedgeSignal
// naming its activity), the stage is scheduled again as the next try
// (*try) on the healthy node the fleet chose (then, should that node not
// take it in time, in the shared queue), and the first of the two to end well wins: the
// other is cancelled and recorded as superseded. Should both fail, the
// original's failure decides (the hedge's, if the degraded node handed
// the original back unstarted), so a hedged try spends no more attempts
// than one.
// Only one try's output goes on, so an exam still has one report.
func (p *pipeline) await(ctx workflow.Context, first *tryRun, in any, try *int32) *tryRun {
	stage := first.att.Stage
	wait := func(r *tryRun) func(workflow.Future) {
		return func(f workflow.Future) {
			r.err = f.Get(ctx, &r.out)
			r.done, r.endedAt = true, workflow.Now(ctx)
		}
	}
	if !first.spec.GPU {
		wait(first)(first.future)
		return first
	}
	hedges := workflow.GetSignalChannel(ctx, contract.HedgeSignal)
	activityID := contract.ActivityID(stage, first.att.Try)
	var (
		second *tryRun
		hedge  contract.Hedge
		handed int // hedges a degraded node handed back
	)
	// A hedge goes to the healthy node the fleet chose, waiting for it
	// as for the node that holds an exam's data; then to the shared queue.
	startHedge := func(queue string) *tryRun {
		*try++
		att := contract.Attempt{Stage: stage, Try: *try, Number: first.att.Number, Queue: p.in.Policy.StageQueue(first.spec),
			Bucket: p.bucket, ScheduledAt: workflow.Now(ctx), Hedge: hedge.Reason}
		if queue != "" && p.in.Policy.NodeAffinityWait > 0 {
			att.Queue = queue
			return p.startTry(ctx, first.spec, att, in, p.in.Policy.NodeAffinityWait, true)
		}
		return p.startTry(ctx, first.spec, att, in, 0, false)
	}
	for {
		sel := workflow.NewSelector(ctx)
		if !first.done {
			sel.AddFuture(first.future, wait(first))
		}
		if second != nil && !second.done {
			sel.AddFuture(second.future, wait(second))
		}
		if second == nil && !first.done {
			sel.AddReceive(hedges, func(c workflow.ReceiveChannel, _ bool) {
				var h contract.Hedge
				c.Receive(ctx, &h)
				if h.ActivityID != activityID {
					return // a signal for an earlier try
				}
				first.att.Node = h.Node // where it was held, should it be superseded
				workflow.GetLogger(ctx).Warn("stage hedged on another node", "stage", stage, "activityId", activityID,
					"node", h.Node, "reason", h.Reason)
				hedge = h
				// Only to a node of the exam's own GPU queue; any other
				// queue named goes to that queue itself.
				queue := h.Queue
				if !exam.IsNodeQueueOf(p.in.Policy.GPUStageQueue(), queue) {
					queue = ""
				}
				second = startHedge(queue)
			})
		}
		sel.Select(ctx)
		if ctx.Err() != nil {
			// The exam is cancelled: what is still in flight goes with it.
			for _, r := range []*tryRun{first, second} {
				if r != nil && !r.done {
					r.err, r.done, r.endedAt = temporal.NewCanceledError(), true, workflow.Now(ctx)
				}
			}
			if second != nil {
				p.settle(ctx, second)
			}
			if first.err != nil {
				// It may have failed for good just before: the exam
				// still ends cancelled, not DEAD.
				first.err = temporal.NewCanceledError()
			}
			return first
		}
		if second == nil {
			if first.done {
				return first
			}
			continue
		}
		if second.done && !first.done && handed < maxHandedHedges &&
			contract.Classify(second.err, second.pinned, false) == contract.Unclaimed {
			// The chosen node did not take the hedge in time, or a
			// degraded node's earlier poll took it and handed it back:
			// schedule it again, in the shared queue.
			handed++
			p.settle(ctx, second)
			second = startHedge("")
			continue
		}
		var winner, other *tryRun
		switch {
		case first.done && first.err == nil:
			winner, other = first, second
		case second.done && second.err == nil:
			winner, other = second, first
		case first.done && second.done:
			// Both failed: the original's failure decides, unless the
			// degraded node handed it back unstarted.
			winner, other = first, second
			if contract.Classify(first.err, first.pinned, false) == contract.Unclaimed {
				winner, other = second, first
			}
		default:
			continue
		}
		p.settle(ctx, other)
		result := hedgeWon
		if winner == first {
			result = originalWon
			// It ran on the degraded node: the exam's next stage must
			// not wait for that node.
			winner.out.NodeQueue, p.node = "", ""
		}
		if winner.err != nil {
			result = neitherWon
		}
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"stage": string(stage), "won": result}).
			Counter(StageHedgesCounter).Inc(1)
		return winner
	}
}

// settle records the try that did not decide its stage: one still in
// flight is cancelled and superseded; one that ended, as it ended.
func (p *pipeline) settle(ctx workflow.Context, r *tryRun) {
	a := r.att
	if !r.done {
		r.cancel()
		a.EndedAt, a.Outcome = workflow.Now(ctx), contract.Superseded
		p.record(a)
		return
	}
	a.EndedAt, a.Outcome, a.Node = r.endedAt, contract.Classify(r.err, r.pinned, p.in.Policy.InfraRetryFor > 0), contract.AttemptNode(r.err)
	if r.err != nil {
		a.Failure, a.FailureType = failureMessage(r.err), failureType(r.err)
	}
	a.Node, a.GPU = cmp.Or(a.Node, r.out.Node), r.out.GPU
	p.record(a)
}

// record records how an attempt ended: the latest is the one a failed
// notification leaves in the result.
func (p *pipeline) record(a contract.Attempt) {
	p.last = &a
}

// attemptsSpent is the final failure of a stage whose last attempt
// failed with err: its message and type, not retried.
func attemptsSpent(err error) error {
	return temporal.NewNonRetryableApplicationError(failureMessage(err), failureType(err), err)
}

// retryDelay is the wait before a stage's next try after n failed or
// lost tries: full jitter, u·min(RetryCap, RetryBase·2^(n-1)), so stages
// that failed together (a batch on a node that ran out of memory) come
// back apart; u is drawn from the run ID, the same on every replay. A
// failure that names its own delay (a node handing back what it held
// when it died: at once) gets that delay.
func retryDelay(runID string, stage exam.Stage, n int32, pol exam.Policy, err error) time.Duration {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.NextRetryDelay() > 0 {
		return app.NextRetryDelay()
	}
	return fullJitter(runID, "retry/"+string(stage), int(n), pol.RetryBase, pol.RetryCap, time.Millisecond)
}

// fullJitter is the wait before the n-th retry of key: drawn uniformly
// below a ceiling that doubles from base up to limit ("full jitter"),
// and at least floor. The draw comes from the run ID, so it is the same
// on every replay and different for every run.
func fullJitter(runID, key string, n int, base, limit, floor time.Duration) time.Duration {
	ceiling := min(limit, base<<min(n-1, 20))
	return max(time.Duration(unitDraw(runID, key, n)*float64(ceiling)), floor)
}

// infraBackoff is the wait before rescheduling a stage for the n-th time
// after infrastructure failures: from the upper half of a doubling
// ceiling. Its jitter is drawn from the run ID, so it is the same on
// every replay and different for every exam.
func infraBackoff(runID string, stage exam.Stage, n int) time.Duration {
	ceiling := min(infraBackoffCap, infraBackoffBase<<min(n-1, 10))
	return ceiling/2 + time.Duration(unitDraw(runID, string(stage), n)*float64(ceiling/2))
}

// unitDraw is a number in [0, 1) drawn from the run ID, a key and n.
func unitDraw(runID, key string, n int) float64 {
	h := fnv.New64a()
	h.Write([]byte(runID + "/" + key + "/" + strconv.Itoa(n)))
	return float64(h.Sum64()%1_000_000) / 1_000_000
}

func (p *pipeline) promote(ctx workflow.Context, stage exam.Stage, from exam.Priority, waited time.Duration) {
	to := from.Up()
	p.bucket = to
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"from": string(from), "to": string(to)}).
		Counter(PromotionsCounter).Inc(1)
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
		if !p.state.Terminal() {
			workflow.GetMetricsHandler(ctx).Counter(UrgentSLABreachesCounter).Inc(1)
			workflow.GetLogger(ctx).Warn("urgent exam breached its SLA", "sla", p.in.Policy.UrgentSLA,
				"state", p.state, "stage", p.atStage)
		}
	})
}

// stageContext sets the activity options of one try of a stage: its
// activity ID, task queue, timeouts, its bucket's fair share and how
// long it may wait to start (its bucket's aging, or the wait for its
// node; 0: no limit), and its campus's share of the bucket. Each try is
// one attempt (oneTry): the workflow decides what follows it (stage).
func stageContext(ctx workflow.Context, stage exam.Stage, pol exam.Policy, queue, campus string, bucket exam.Priority, wait time.Duration, try int32) workflow.Context {
	return oneTry(ctx, workflow.ActivityOptions{
		ActivityID:             contract.ActivityID(stage, try),
		TaskQueue:              queue,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    pol.StageTimeout,
		HeartbeatTimeout:       pol.HeartbeatTimeout,
		Priority:               contract.TaskPriority(pol, bucket, campus),
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
	return contract.ErrTypeStageFailed
}
