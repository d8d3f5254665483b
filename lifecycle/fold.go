package lifecycle

import (
	"cmp"
	"errors"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"octflow/contract"
	"octflow/exam"
)

// Converters decode what Temporal stores, with the converters the client
// uses (including its payload codec).
type Converters struct {
	Data    converter.DataConverter
	Failure converter.FailureConverter
}

// DefaultConverters are Temporal's default data and failure converters.
func DefaultConverters() Converters {
	return Converters{Data: converter.GetDefaultDataConverter(), Failure: temporal.GetDefaultFailureConverter()}
}

// Run is one workflow run as Temporal holds it.
type Run struct {
	// Events is the run's history, oldest first.
	Events []*historypb.HistoryEvent
	// Pending is the activity in flight (from DescribeWorkflowExecution),
	// nil for a closed run or when there is none.
	Pending *workflowpb.PendingActivityInfo
}

// Entry is one step in an exam's life.
type Entry struct {
	At    time.Time      `json:"at"`
	From  State          `json:"from,omitempty"`
	To    State          `json:"to"`
	Stage exam.Stage     `json:"stage,omitempty"`
	Actor string         `json:"actor,omitempty"`
	Info  map[string]any `json:"info,omitempty"`
}

// Failure describes why an attempt failed or why the exam is dead.
type Failure struct {
	Stage   exam.Stage `json:"stage,omitempty"`
	Message string     `json:"message"`
	Type    string     `json:"type,omitempty"`
	Attempt int32      `json:"attempt,omitempty"`
}

// Record is an exam's life folded from its runs: the timeline, and where
// the exam stands at its end.
type Record struct {
	Timeline []Entry
	State    State
	// Stage is the stage in flight, or where a DEAD exam stopped.
	Stage    exam.Stage
	Priority exam.Priority
	// EffectivePriority is the bucket the exam's latest stage was
	// scheduled in: above Priority once aging promoted it.
	EffectivePriority exam.Priority
	Attempt           int32
	Node              string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	LastFailure       *Failure
	// Summary is the headline result, once the measure stage has run.
	Summary *exam.Summary
	// Report is where the report stage wrote the report.
	Report *contract.ReportKeys
	// Result is the pipeline's result once it completed.
	Result *contract.ExamResult
	// Review is the clinician's review once the report exists.
	Review *contract.ReviewState
	// Export is where the export of the results to the campus's PACS
	// stands (nil: the campus has no PACS, or it has not started).
	Export *contract.ExportState
	// Runs counts the pipeline's runs (more than one after a rerun).
	Runs int
	// Illegal lists moves the table forbids; none should ever appear.
	Illegal []ErrIllegalTransition
}

// Fold builds an exam's Record from its pipeline runs (oldest first) and,
// once the report exists, its review run and its export's latest run
// (nil when there is none). now is the time of the reading.
func Fold(c Converters, now time.Time, runs []Run, review, export *Run) *Record {
	f := &folder{conv: c, now: now, rec: &Record{}}
	for i, run := range runs {
		f.pipelineRun(i, run)
	}
	if review != nil {
		f.reviewRun(*review)
	}
	if export != nil {
		f.exportRun(*export)
	}
	r := f.rec
	r.Runs = len(runs)
	if n := len(r.Timeline); n > 0 {
		r.CreatedAt = r.Timeline[0].At
		for _, e := range r.Timeline {
			// The review's and the export's entries follow the
			// pipeline's, each in its own order.
			if e.At.After(r.UpdatedAt) {
				r.UpdatedAt = e.At
			}
		}
	}
	if r.EffectivePriority == "" {
		r.EffectivePriority = r.Priority
	}
	return r
}

type folder struct {
	conv Converters
	now  time.Time
	rec  *Record

	// per run
	stages    map[int64]exam.Stage  // scheduled event ID → stage
	open      map[string]bool       // activity IDs scheduled and not yet closed
	reminders map[int]bool          // the reminders in the timeline (review runs)
	buckets   map[exam.Stage]string // last bucket each stage was scheduled in
	// spent counts each stage's attempts spent, as the workflow's
	// records of its retried tries say: the next one is attempt spent+1.
	spent map[exam.Stage]int32
	// failed is the text of each stage's latest try that ended without
	// its work done, as its event says (how it ended is the workflow's
	// record, read with the retry wait).
	failed map[exam.Stage]*Failure
}

func (f *folder) add(at time.Time, to State, stage exam.Stage, actor string, info map[string]any) {
	r := f.rec
	from := r.State
	if len(r.Timeline) > 0 || from != "" {
		if err := CheckMove(from, to); err != nil {
			var illegal ErrIllegalTransition
			errors.As(err, &illegal)
			r.Illegal = append(r.Illegal, illegal)
		}
	}
	r.Timeline = append(r.Timeline, Entry{At: at.UTC(), From: from, To: to, Stage: stage, Actor: actor, Info: info})
	r.State = to
	switch {
	case to == Created || to == Completed:
		r.Stage = ""
	case stage != "":
		r.Stage = stage
	}
}

func (f *folder) pipelineRun(n int, run Run) {
	f.stages, f.buckets, f.spent = map[int64]exam.Stage{}, map[exam.Stage]string{}, map[exam.Stage]int32{}
	f.failed = map[exam.Stage]*Failure{}
	f.open = map[string]bool{}
	activityIDs := map[int64]string{} // scheduled event ID → activity ID
	cancelled := map[int64]bool{}     // scheduled event IDs the workflow cancelled
	r := f.rec
	for _, ev := range run.Events {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a := ev.GetWorkflowExecutionStartedEventAttributes()
			var in contract.ExamInput
			_ = f.decode(a.GetInput(), &in)
			r.Priority, r.EffectivePriority = in.Submission.Priority, in.Submission.Priority
			r.LastFailure, r.Result, r.Summary, r.Report, r.Attempt, r.Node = nil, nil, nil, nil, 0, ""
			if n == 0 || in.Rerun == nil {
				f.add(at, Created, "", f.memoString(a.GetMemo(), contract.MemoSubmitter), nil)
				continue
			}
			f.add(at, Created, "", in.Rerun.By, map[string]any{"rerun": n + 1, "previousRunId": in.Rerun.PreviousRunID})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			stage := stageOf(a.GetActivityId())
			f.stages[ev.GetEventId()] = stage
			activityIDs[ev.GetEventId()] = a.GetActivityId()
			f.open[a.GetActivityId()] = true
			info := map[string]any{"queue": a.GetTaskQueue().GetName()}
			if b := contract.BucketOfKey(a.GetPriority().GetFairnessKey()); b != "" {
				bucket := string(b)
				info["bucket"] = bucket
				// The same stage scheduled again in another bucket is an
				// aging promotion.
				if prev, ok := f.buckets[stage]; ok && prev != bucket {
					info["promotedFrom"] = prev
				}
				f.buckets[stage] = bucket
				r.EffectivePriority = b
			}
			r.Attempt, r.Node = 0, ""
			if n := f.spent[stage]; n > 0 {
				r.Attempt = n + 1
				info["attempt"] = n + 1
			}
			f.add(at, Queued, stage, "workflow", info)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if cancelled[a.GetScheduledEventId()] {
				// Temporal writes an attempt's start with its end: a try
				// the workflow cancelled (a hedge's loser) starts, in the
				// history, after the exam has moved on.
				continue
			}
			stage := f.stages[a.GetScheduledEventId()]
			if r.State == Executing && r.Stage == stage {
				// The other try of a hedged stage: the stage runs already.
				r.Node = a.GetIdentity()
				continue
			}
			r.Attempt, r.Node = f.spent[stage]+1, a.GetIdentity()
			f.add(at, Executing, stage, a.GetIdentity(), map[string]any{"attempt": r.Attempt, "node": a.GetIdentity()})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if cancelled[a.GetScheduledEventId()] {
				continue // a cancelled try's output is not the exam's
			}
			delete(f.open, activityIDs[a.GetScheduledEventId()])
			stage := f.stages[a.GetScheduledEventId()]
			var out contract.StageOutput
			if f.decode(a.GetResult(), &out) != nil {
				continue
			}
			if out.Summary != nil {
				r.Summary = out.Summary
			}
			if stage == exam.Render && len(out.Keys) == 2 {
				r.Report = &contract.ReportKeys{JSONKey: out.Keys[0], PDFKey: out.Keys[1]}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			// How the try ended is the workflow's call: a retry's timer
			// carries its record; an exam that stops closes its run.
			a := ev.GetActivityTaskFailedEventAttributes()
			if cancelled[a.GetScheduledEventId()] {
				continue
			}
			delete(f.open, activityIDs[a.GetScheduledEventId()])
			f.failed[f.stages[a.GetScheduledEventId()]] = f.failure(a.GetFailure())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			if cancelled[a.GetScheduledEventId()] {
				continue
			}
			delete(f.open, activityIDs[a.GetScheduledEventId()])
			f.failed[f.stages[a.GetScheduledEventId()]] = f.failure(a.GetFailure())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			// A hedged try superseded by the other (the workflow's
			// attempt records say so): it is not the exam's any more.
			id := ev.GetActivityTaskCancelRequestedEventAttributes().GetScheduledEventId()
			cancelled[id] = true
			delete(f.open, activityIDs[id])
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			f.retryWait(at, ev)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			var res contract.ExamResult
			_ = f.decode(ev.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res)
			r.Result = &res
			f.complete(at, res.NotifyFailure)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			fail := f.failure(ev.GetWorkflowExecutionFailedEventAttributes().GetFailure())
			fail.Stage, fail.Attempt = r.Stage, r.Attempt
			f.dead(at, "workflow", fail)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			a := ev.GetWorkflowExecutionTerminatedEventAttributes()
			f.dead(at, a.GetIdentity(), &Failure{Stage: r.Stage, Message: "terminated by an operator: " + a.GetReason(), Type: "Terminated"})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			f.dead(at, "temporal", &Failure{Stage: r.Stage, Message: "the exam's workflow timed out", Type: "Timeout"})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			f.dead(at, "temporal", &Failure{Stage: r.Stage, Message: "cancelled", Type: "Cancelled"})
		}
	}
	// Describe and history are two reads: a pending activity the
	// history has already closed is stale.
	if p := run.Pending; p != nil && f.open[p.GetActivityId()] {
		f.pending(p)
	}
}

// complete records the report's existence, and the report-ready push's
// last try when it failed for good.
func (f *folder) complete(at time.Time, notify *contract.Attempt) {
	f.rec.Attempt, f.rec.Node = 0, ""
	var info map[string]any
	if notify != nil {
		f.rec.LastFailure = &Failure{Stage: notify.Stage, Message: notify.Failure, Type: notify.FailureType, Attempt: notify.Number}
		info = map[string]any{"notifyError": notify.Failure}
	}
	f.add(at, Completed, "", "workflow", info)
}

// retryWait adds the wait before a stage's next try (RETRY_WAIT) from
// the record of the try it follows, which the workflow names the wait's
// timer by (contract.RetrySummary), with the failure's text from that
// try's event. Other timers (the urgent SLA) add nothing. Until the
// workflow has decided (the workflow task after a failed try), the
// exam shows the try's EXECUTING.
func (f *folder) retryWait(at time.Time, ev *historypb.HistoryEvent) {
	var summary string
	if p := ev.GetUserMetadata().GetSummary(); p == nil || f.conv.Data.FromPayload(p, &summary) != nil {
		return
	}
	a, ok := contract.AttemptOfRetrySummary(summary)
	if !ok {
		return
	}
	if ended := f.failed[a.Stage]; ended != nil {
		a.Failure = ended.Message
		a.FailureType = cmp.Or(a.FailureType, ended.Type)
	}
	info := map[string]any{"failure": a.Failure, "outcome": string(a.Outcome),
		"nextAttemptAt": at.Add(ev.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration()).UTC()}
	if a.FailureType != "" {
		info["failureType"] = a.FailureType
	}
	f.spent[a.Stage] = a.Number - 1
	if a.Outcome.Spends() {
		f.spent[a.Stage]++
		info["failedAttempt"] = a.Number
	}
	actor := "temporal"
	if a.Node != "" {
		actor, info["node"] = a.Node, a.Node
	}
	f.rec.LastFailure = &Failure{Stage: a.Stage, Message: a.Failure, Type: a.FailureType, Attempt: a.Number}
	f.rec.Attempt = f.spent[a.Stage] + 1
	f.add(at, RetryWait, a.Stage, actor, info)
}

func (f *folder) dead(at time.Time, actor string, fail *Failure) {
	f.rec.LastFailure = fail
	info := map[string]any{"failure": fail.Message}
	if fail.Type != "" {
		info["failureType"] = fail.Type
	}
	f.add(at, Dead, fail.Stage, actor, info)
}

// pending adds what the activity in flight says: a node that claimed
// the stage, or one that runs it and heartbeats. A stage waiting in its
// queue is already QUEUED, one waiting for its retry RETRY_WAIT.
func (f *folder) pending(p *workflowpb.PendingActivityInfo) {
	r := f.rec
	if p.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
		return
	}
	stage := stageOf(p.GetActivityId())
	to := Claimed
	if f.running(p) {
		to = Executing
	}
	r.Attempt, r.Node = f.spent[stage]+1, p.GetLastWorkerIdentity()
	f.add(p.GetLastStartedTime().AsTime(), to, stage, r.Node, map[string]any{"attempt": r.Attempt, "node": r.Node})
}

// running reports whether the attempt in flight has reported progress:
// a heartbeat of this attempt that says its work started. A GPU stage
// beats as soon as its node takes it, then again once it holds its GPU
// and starts (contract.Heartbeat.StartedAt); until then it is CLAIMED. A
// heartbeat that does not say when it was taken counts as progress.
func (f *folder) running(p *workflowpb.PendingActivityInfo) bool {
	hb := p.GetLastHeartbeatTime()
	if hb == nil || hb.AsTime().Before(p.GetLastStartedTime().AsTime()) {
		return false // no heartbeat of this attempt: the details are an earlier one's
	}
	var beat contract.Heartbeat
	if f.decode(p.GetHeartbeatDetails(), &beat) != nil || beat.TakenAt == nil {
		return true
	}
	return beat.StartedAt != nil
}

// reviewRun adds the review workflow's decisions, reminders and close.
func (f *folder) reviewRun(run Run) {
	r := f.rec
	f.reminders = map[int]bool{}
	for _, ev := range run.Events {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			var in contract.ReviewStart
			_ = f.decode(ev.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in)
			r.Review = &contract.ReviewState{Status: exam.ReviewPending, Reviews: []exam.Review{},
				ClosesAt: in.ReportAt.Add(in.Policy.ReviewWindow).UTC()}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			f.reminder(at, stageOf(a.GetActivityId()), a.GetInput())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			f.decision(at, ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			var res contract.ReviewState
			if f.decode(ev.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res) == nil && r.Review != nil {
				r.Review.Status = res.Status
			}
			f.add(at, Completed, "", "workflow", map[string]any{"reviewWindow": "closed", "review": r.Review.Status})
		}
	}
}

// exportRun adds the export of the results to the PACS: its start, each
// failed send, and how it ended. Its entries leave the exam's state as
// it is (the exam is COMPLETED once its report exists).
func (f *folder) exportRun(run Run) {
	r := f.rec
	// A note, not a move: the exam's state is the pipeline's.
	note := func(at time.Time, info map[string]any) {
		r.Timeline = append(r.Timeline, Entry{At: at.UTC(), From: r.State, To: r.State, Actor: "workflow", Info: info})
	}
	for _, ev := range run.Events {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			r.Export = &contract.ExportState{Status: contract.ExportPending}
			note(at, map[string]any{"export": string(contract.ExportPending)})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if r.Export != nil {
				r.Export.Tries++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			pf := ev.GetActivityTaskFailedEventAttributes().GetFailure()
			if pf == nil {
				pf = ev.GetActivityTaskTimedOutEventAttributes().GetFailure()
			}
			fail := f.failure(pf)
			if r.Export != nil {
				r.Export.Failure = fail.Message
			}
			note(at, map[string]any{"export": "try failed", "failure": fail.Message, "failureType": fail.Type})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			var st contract.ExportState
			if f.decode(ev.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &st) == nil {
				r.Export = &st
			}
			note(at, map[string]any{"export": string(contract.ExportDelivered), "instances": len(st.Instances)})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			msg := "the export ended without delivering"
			if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
				msg = f.failure(a.GetFailure()).Message
			}
			if r.Export == nil {
				r.Export = &contract.ExportState{}
			}
			r.Export.Status, r.Export.Failure = contract.ExportFailed, msg
			note(at, map[string]any{"export": string(contract.ExportFailed), "failure": msg})
		}
	}
}

// stageOf is the stage whose try an activity ID names
// (contract.ActivityID), "" for another activity's.
func stageOf(activityID string) exam.Stage {
	stage, _, _ := contract.ParseActivityID(activityID)
	return stage
}

// reminder records a repeated report-ready push for an urgent exam,
// once however often it was tried.
func (f *folder) reminder(at time.Time, stage exam.Stage, input *commonpb.Payloads) {
	var in contract.NotifyInput
	if stage != exam.Notify || f.decode(input, &in) != nil || in.Reminder == 0 || f.reminders[in.Reminder] {
		return // not a reminder, or a retry of one in the timeline
	}
	f.reminders[in.Reminder] = true
	if f.rec.Review != nil {
		f.rec.Review.Reminders = max(f.rec.Review.Reminders, in.Reminder)
	}
	f.add(at, Completed, exam.Notify, "workflow", map[string]any{"reminder": in.Reminder})
}

// decision records a clinician's accepted review decision; the review's
// status follows the same rule the workflow applies.
func (f *folder) decision(at time.Time, in *updatepb.Input) {
	r := f.rec
	var req contract.ReviewRequest
	if in == nil || f.decode(in.GetArgs(), &req) != nil || r.Review == nil {
		return
	}
	r.Review.Status = r.Review.Status.After(req.Decision)
	r.Review.Reviews = append(r.Review.Reviews, exam.Review{At: at.UTC(), Decision: req.Decision, Note: req.Note, By: req.By})
	info := map[string]any{"review": req.Decision}
	if req.Note != "" {
		info["note"] = req.Note
	}
	f.add(at, Completed, "", req.By, info)
}

// failure reads what a failure says about the stage: the first
// application error or timeout inside the activity's failure (a
// workflow's failure wraps the activity's, which may wrap the Go error
// the stage returned, whose message is only a part of the stage's).
func (f *folder) failure(pf *failurepb.Failure) *Failure {
	if pf == nil {
		return &Failure{}
	}
	var chain []error
	for e := f.conv.Failure.FailureToError(pf); e != nil; e = errors.Unwrap(e) {
		chain = append(chain, e)
	}
	start := 0
	for i, e := range chain {
		if _, ok := e.(*temporal.ActivityError); ok {
			start = i + 1
		}
	}
	for _, e := range chain[start:] {
		switch x := e.(type) {
		case *temporal.ApplicationError:
			return &Failure{Message: x.Message(), Type: x.Type()}
		case *temporal.TimeoutError:
			return &Failure{Message: "timed out: " + x.TimeoutType().String(), Type: "Timeout" + x.TimeoutType().String()}
		}
	}
	return &Failure{Message: chain[0].Error()}
}

func (f *folder) decode(p *commonpb.Payloads, v any) error {
	if len(p.GetPayloads()) == 0 {
		return errors.New("no payload")
	}
	return f.conv.Data.FromPayload(p.GetPayloads()[0], v)
}

func (f *folder) memoString(m *commonpb.Memo, field string) string {
	var v string
	if p := m.GetFields()[field]; p == nil || f.conv.Data.FromPayload(p, &v) != nil {
		return ""
	}
	return v
}

// PreviousRunID is the run that run follows after an operator's rerun,
// "" for an exam's first run.
func (c Converters) PreviousRunID(run Run) string {
	in, err := c.Input(run)
	if err != nil || in.Rerun == nil {
		return ""
	}
	return in.Rerun.PreviousRunID
}

// Input is the pipeline input of run.
func (c Converters) Input(run Run) (contract.ExamInput, error) {
	var in contract.ExamInput
	for _, ev := range run.Events {
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			f := &folder{conv: c}
			return in, f.decode(a.GetInput(), &in)
		}
	}
	return in, errors.New("the run has no start event")
}
