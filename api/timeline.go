package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"octflow/exam"
	"octflow/workflows"
)

// TimelineEntry is one step in an exam's life.
type TimelineEntry struct {
	At    time.Time      `json:"at"`
	From  exam.State     `json:"from,omitempty"`
	To    exam.State     `json:"to"`
	Stage exam.Stage     `json:"stage,omitempty"`
	Actor string         `json:"actor,omitempty"`
	Info  map[string]any `json:"info,omitempty"`
}

// timeline is built from the workflow history, Temporal's append-only
// event log, plus the stage in flight. It answers "how did this exam get
// here?" without a second event table.
//
// History records an activity's retries compactly: the failed attempts
// are summarised on the final attempt's start (its attempt number and the
// previous failure), so a retry shows as RETRY_WAIT at the time the
// retry started, with the failure that caused it.
type timeline struct {
	entries []TimelineEntry
	state   exam.State
	stages  map[int64]exam.Stage // scheduled event ID → stage
	buckets map[exam.Stage]string
	retries map[int64]int // scheduled event ID → index of its RETRY_WAIT entry
	// reviewLoop is set once the workflow entered its review wait.
	reviewLoop bool
}

func (t *timeline) add(at time.Time, to exam.State, stage exam.Stage, actor string, info map[string]any) {
	t.entries = append(t.entries, TimelineEntry{At: at.UTC(), From: t.state, To: to, Stage: stage, Actor: actor, Info: info})
	t.state = to
}

// buildTimeline turns history events (oldest first) and the pending stage,
// if any, into timeline entries. submitter is who submitted the exam.
func buildTimeline(events []*historypb.HistoryEvent, pending *workflowpb.PendingActivityInfo, submitter string) []TimelineEntry {
	t := &timeline{stages: map[int64]exam.Stage{}, buckets: map[exam.Stage]string{}, retries: map[int64]int{}}
	for _, ev := range events {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			t.add(at, exam.Created, "", submitter, nil)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			stage := exam.StageOfActivity(a.GetActivityType().GetName())
			t.stages[ev.GetEventId()] = stage
			info := map[string]any{"queue": a.GetTaskQueue().GetName()}
			if bucket := a.GetPriority().GetFairnessKey(); bucket != "" {
				info["bucket"] = bucket
				// The same stage scheduled again in another bucket is an
				// aging promotion.
				if prev, ok := t.buckets[stage]; ok && prev != bucket {
					info["promotedFrom"] = prev
				}
				t.buckets[stage] = bucket
			}
			t.add(at, exam.Queued, stage, "workflow", info)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			stage := t.stages[a.GetScheduledEventId()]
			if a.GetAttempt() > 1 {
				info := retryInfo(a.GetAttempt()-1, a.GetLastFailure())
				node, _ := info["node"].(string)
				t.retries[a.GetScheduledEventId()] = len(t.entries)
				t.add(at, exam.RetryWait, stage, node, info)
			}
			t.add(at, exam.Executing, stage, a.GetIdentity(), map[string]any{"attempt": a.GetAttempt(), "node": a.GetIdentity()})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			// A stage lost with its node names that node in its result.
			if i, ok := t.retries[a.GetScheduledEventId()]; ok {
				if node := recoveredFrom(a.GetResult()); node != "" {
					t.entries[i].Actor = node
					t.entries[i].Info["node"] = node
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			t.add(at, exam.Executing, t.stages[a.GetScheduledEventId()], a.GetIdentity(), failureInfo(a.GetFailure()))
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			if a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				continue // the stage aged in its queue; the promotion follows
			}
			t.add(at, exam.Executing, t.stages[a.GetScheduledEventId()], "temporal", failureInfo(a.GetFailure()))
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			// The workflow records the report's completion before it
			// waits for the review.
			sa := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes()
			if exam.State(searchAttr(sa, exam.AttrState)) == exam.Completed && t.state != exam.Completed {
				t.add(at, exam.Completed, "", "workflow", nil)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			req := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
			var in exam.ReviewInput
			if args := req.GetArgs().GetPayloads(); req.GetName() == workflows.ReviewUpdate && len(args) > 0 &&
				converter.GetDefaultDataConverter().FromPayload(args[0], &in) == nil {
				info := map[string]any{"review": in.Decision}
				if in.Note != "" {
					info["note"] = in.Note
				}
				t.add(at, t.state, "", in.By, info)
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if versionChange(ev) == "review-loop" {
				t.reviewLoop = true
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			switch {
			case t.state != exam.Completed:
				t.add(at, exam.Completed, "", "workflow", nil)
			case t.reviewLoop:
				t.add(at, exam.Completed, "", "workflow", map[string]any{"reviewWindow": "closed"})
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			t.add(at, exam.Dead, "", "workflow", failureInfo(ev.GetWorkflowExecutionFailedEventAttributes().GetFailure()))
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			a := ev.GetWorkflowExecutionTerminatedEventAttributes()
			t.add(at, exam.Dead, "", a.GetIdentity(), map[string]any{"reason": "terminated: " + a.GetReason()})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			t.add(at, exam.Dead, "", "temporal", map[string]any{"reason": "workflow timed out"})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			t.add(at, exam.Dead, "", "temporal", map[string]any{"reason": "cancelled"})
		}
	}
	if pending != nil {
		stage := exam.StageOfActivity(pending.GetActivityType().GetName())
		if pending.GetAttempt() > 1 && pending.GetLastFailure() != nil {
			at := pending.GetLastAttemptCompleteTime().AsTime()
			info := retryInfo(pending.GetAttempt()-1, pending.GetLastFailure())
			if n := pending.GetNextAttemptScheduleTime(); n != nil {
				info["nextAttemptAt"] = n.AsTime().UTC()
			}
			t.add(at, exam.RetryWait, stage, pending.GetLastWorkerIdentity(), info)
		}
		if pending.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			to := exam.Claimed
			if pending.GetLastHeartbeatTime() != nil {
				to = exam.Executing
			}
			t.add(pending.GetLastStartedTime().AsTime(), to, stage, pending.GetLastWorkerIdentity(),
				map[string]any{"attempt": pending.GetAttempt(), "node": pending.GetLastWorkerIdentity()})
		}
	}
	return t.entries
}

func retryInfo(failedAttempt int32, f *failurepb.Failure) map[string]any {
	info := failureInfo(f)
	info["failedAttempt"] = failedAttempt
	if node := failureNode(f); node != "" {
		info["node"] = node
	}
	return info
}

// versionChange is the change ID of a workflow.GetVersion marker.
func versionChange(ev *historypb.HistoryEvent) string {
	a := ev.GetMarkerRecordedEventAttributes()
	p := a.GetDetails()["change-id"].GetPayloads()
	var id string
	if a.GetMarkerName() != "Version" || len(p) == 0 || converter.GetDefaultDataConverter().FromPayload(p[0], &id) != nil {
		return ""
	}
	return id
}

// recoveredFrom reads the node of a failed attempt from a stage's result.
func recoveredFrom(result *commonpb.Payloads) string {
	if len(result.GetPayloads()) == 0 {
		return ""
	}
	var out struct {
		RecoveredFrom *struct {
			Node string `json:"node"`
		} `json:"recoveredFrom"`
	}
	if converter.GetDefaultDataConverter().FromPayload(result.GetPayloads()[0], &out) != nil || out.RecoveredFrom == nil {
		return ""
	}
	return out.RecoveredFrom.Node
}

// failureNode finds the node a failed attempt ran on: stage failures
// carry it in their details, and a stage lost with its node (heartbeat
// timeout) in its last heartbeat.
func failureNode(f *failurepb.Failure) string {
	for ; f != nil; f = f.GetCause() {
		payloads := f.GetApplicationFailureInfo().GetDetails().GetPayloads()
		if len(payloads) == 0 {
			payloads = f.GetTimeoutFailureInfo().GetLastHeartbeatDetails().GetPayloads()
		}
		if len(payloads) == 0 {
			continue
		}
		var who struct {
			Node string `json:"node"`
		}
		if converter.GetDefaultDataConverter().FromPayload(payloads[0], &who) == nil && who.Node != "" {
			return who.Node
		}
	}
	return ""
}

func failureInfo(f *failurepb.Failure) map[string]any {
	info := map[string]any{}
	if f == nil {
		return info
	}
	// The root cause reads best: Temporal wraps it in activity and
	// workflow failures.
	root := f
	for root.GetCause() != nil {
		root = root.GetCause()
	}
	info["failure"] = root.GetMessage()
	if t := root.GetApplicationFailureInfo().GetType(); t != "" {
		info["failureType"] = t
	}
	if t := root.GetTimeoutFailureInfo(); t != nil {
		info["failureType"] = "Timeout" + t.GetTimeoutType().String()
	}
	return info
}

// getEvents serves GET /v1/exams/{examId}/events.
func (s *Server) getEvents(c echo.Context) error {
	desc, err := s.examFromPath(c)
	if err != nil {
		return err
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution()
	var events []*historypb.HistoryEvent
	it := s.cfg.Temporal.GetWorkflowHistory(c.Request().Context(), run.GetWorkflowId(), run.GetRunId(),
		false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return problem(http.StatusServiceUnavailable, "unavailable", "temporal history: "+err.Error())
		}
		events = append(events, ev)
	}
	var pending *workflowpb.PendingActivityInfo
	if p := desc.GetPendingActivities(); len(p) > 0 {
		pending = p[0]
	}
	return c.JSON(http.StatusOK, buildTimeline(events, pending, memoString(desc, memoSubmitter)))
}
