package deployment

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
)

// A workflow no worker has taken up yet (just started, or just continued
// as new) holds no decision a build could contradict: the gate passes it
// without a replay, which the SDK would refuse for want of events. Once
// a workflow task completed, its history is replayed, and a build that
// cannot run it (here: one that registers no workflow at all) is refused.
func TestTheGateReplaysOnlyHistoriesWithACompletedWorkflowTask(t *testing.T) {
	started := &historypb.HistoryEvent{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: "InboxWorkflow"},
			TaskQueue:    &taskqueuepb.TaskQueue{Name: "octflow-workflows"},
		}}}
	scheduled := &historypb.HistoryEvent{EventId: 2, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
			TaskQueue: &taskqueuepb.TaskQueue{Name: "octflow-workflows"},
		}}}
	taken := &historypb.HistoryEvent{EventId: 3, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: 2}}}
	completed := &historypb.HistoryEvent{EventId: 4, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: 2, StartedEventId: 3}}}
	g := Gate{Register: func(worker.WorkflowRegistry) error { return nil }, Logger: zap.NewNop()}
	for _, tc := range []struct {
		name    string
		events  []*historypb.HistoryEvent
		refused bool
	}{
		{"started, its first task not taken", []*historypb.HistoryEvent{started, scheduled}, false},
		{"its first task taken, not completed", []*historypb.HistoryEvent{started, scheduled, taken}, false},
		{"a task completed", []*historypb.HistoryEvent{started, scheduled, taken, completed}, true},
	} {
		err := g.replayHistory(&historypb.History{Events: tc.events}, "inbox-north", "run-1")
		if refused := err != nil; refused != tc.refused {
			t.Errorf("%s: replay error %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}
