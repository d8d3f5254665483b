package api

import (
	"os"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"octflow/exam"
)

func TestTimelineOfARecordedExamFollowsThePipeline(t *testing.T) {
	f, err := os.Open("../workflows/testdata/exam_workflow_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := buildTimeline(h.GetEvents(), nil, "demo device")

	type step struct {
		to    exam.State
		stage exam.Stage
	}
	want := []step{{exam.Created, ""}}
	for _, s := range exam.Pipeline {
		want = append(want, step{exam.Queued, s}, step{exam.Executing, s})
	}
	want = append(want, step{exam.Completed, ""})
	if len(got) != len(want) {
		t.Fatalf("timeline has %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if e.To != w.to || e.Stage != w.stage {
			t.Errorf("entry %d = %s %s, want %s %s", i, e.To, e.Stage, w.to, w.stage)
		}
		if i > 0 && (e.From != got[i-1].To || e.At.Before(got[i-1].At)) {
			t.Errorf("entry %d does not follow entry %d: %+v after %+v", i, i-1, e, got[i-1])
		}
		if e.To == exam.Executing && e.Stage.NeedsGPU() && !strings.HasPrefix(e.Actor, "sim-gpu-node-") {
			t.Errorf("GPU stage %s ran by %q, want a GPU node", e.Stage, e.Actor)
		}
	}
	if got[0].Actor != "demo device" {
		t.Errorf("creator = %q", got[0].Actor)
	}
}

func TestTimelineShowsARetryWithItsFailureAndNode(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	events := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		{EventId: 5, EventTime: at(1), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: exam.Layers.ActivityName()}}}},
		{EventId: 6, EventTime: at(40), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: 5, Attempt: 2, Identity: "gpu-b",
				LastFailure: &failurepb.Failure{Message: "CUDA out of memory",
					FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "StageFailed"}}}}}},
	}
	got := buildTimeline(events, nil, "dev")
	if len(got) != 4 {
		t.Fatalf("timeline %+v", got)
	}
	retry, exec := got[2], got[3]
	if retry.To != exam.RetryWait || retry.Stage != exam.Layers || retry.Info["failure"] != "CUDA out of memory" || retry.Info["failedAttempt"] != int32(1) {
		t.Errorf("retry entry = %+v", retry)
	}
	if exec.To != exam.Executing || exec.Actor != "gpu-b" || exec.Info["attempt"] != int32(2) || exec.From != exam.RetryWait {
		t.Errorf("execution entry = %+v", exec)
	}
}

func TestTimelineShowsAnAgingPromotion(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	scheduled := func(id int64, s int, bucket string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(s), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: exam.Denoise.ActivityName()}, Priority: &commonpb.Priority{FairnessKey: bucket}}}}
	}
	events := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		scheduled(5, 1, "low"),
		{EventId: 6, EventTime: at(1801), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
			Attributes: &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: &historypb.ActivityTaskTimedOutEventAttributes{
				ScheduledEventId: 5, Failure: &failurepb.Failure{Message: "activity ScheduleToStart timeout",
					FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START}}}}}},
		scheduled(10, 1802, "normal"),
	}
	got := buildTimeline(events, nil, "dev")
	if len(got) != 3 {
		t.Fatalf("timeline %+v", got)
	}
	if p := got[2]; p.To != exam.Queued || p.From != exam.Queued || p.Info["bucket"] != "normal" || p.Info["promotedFrom"] != "low" {
		t.Errorf("promotion entry = %+v", p)
	}
}
