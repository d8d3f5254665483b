package lifecycle

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
)

// history reads a recorded history from the replay corpus.
func history(t *testing.T, name string) []*historypb.HistoryEvent {
	t.Helper()
	f, err := os.Open("../workflows/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h.GetEvents()
}

func TestFoldTimelineOfARecordedExamFollowsThePipeline(t *testing.T) {
	for _, c := range []struct{ file, creator string }{
		{"exam_plain.json", "demo device"},
		{"exam_pinned.json", "demo device"},
	} {
		t.Run(c.file, func(t *testing.T) {
			rec := Fold(corpusCodec(t), time.Now(), []Run{{Events: history(t, c.file)}}, nil, nil)
			got := rec.Timeline
			type step struct {
				to    State
				stage exam.Stage
			}
			want := []step{{Created, ""}}
			// The pipeline the corpus was recorded with.
			for _, s := range []exam.Stage{exam.Denoise, exam.Layers, exam.Lesions, exam.Measure, exam.Render, exam.Notify} {
				want = append(want, step{Queued, s}, step{Executing, s})
			}
			gpu := map[exam.Stage]bool{exam.Denoise: true, exam.Layers: true, exam.Lesions: true, exam.Measure: true}
			want = append(want, step{Completed, ""})
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
				if e.To == Executing && gpu[e.Stage] && !strings.HasPrefix(e.Actor, "sim-gpu-node-") {
					t.Errorf("GPU stage %s ran by %q, want a GPU node", e.Stage, e.Actor)
				}
			}
			if got[0].Actor != c.creator {
				t.Errorf("creator = %q, want %q", got[0].Actor, c.creator)
			}
			if rec.State != Completed || rec.Summary == nil || rec.Summary.CentralSubfieldThicknessUm == nil || *rec.Summary.CentralSubfieldThicknessUm <= 0 || len(rec.Illegal) != 0 {
				t.Errorf("record ends %s with summary %+v, illegal moves %v", rec.State, rec.Summary, rec.Illegal)
			}
		})
	}
}

// tries is a synthetic history of a layers stage whose first try failed
// on gpu-a and whose retry was scheduled 30 s later: the events up to
// upTo (an event ID).
func tries(t *testing.T, t0 time.Time, upTo int64) []*historypb.HistoryEvent {
	t.Helper()
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	scheduled := func(id int64, s int, try int32) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(s), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: "SegmentLayers"}, ActivityId: contract.ActivityID(exam.Layers, try)}}}
	}
	summary, err := corpusCodec(t).Data.ToPayload(contract.RetrySummary(contract.Attempt{Stage: exam.Layers, Try: 1, Number: 1,
		Node: "gpu-a", Outcome: contract.Failed, Failure: "CUDA out of memory", FailureType: "StageFailed", RetryAfter: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	all := []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		scheduled(5, 1, 1),
		{EventId: 6, EventTime: at(2), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: 5, Attempt: 1, Identity: "gpu-a"}}},
		{EventId: 7, EventTime: at(9), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
				ScheduledEventId: 5, StartedEventId: 6, Identity: "gpu-a", Failure: &failurepb.Failure{Message: "CUDA out of memory",
					FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "StageFailed"}}}}}},
		// The workflow's record of the failed try names the wait's timer.
		{EventId: 11, EventTime: at(10), EventType: enumspb.EVENT_TYPE_TIMER_STARTED, UserMetadata: &sdkpb.UserMetadata{Summary: summary},
			Attributes: &historypb.HistoryEvent_TimerStartedEventAttributes{TimerStartedEventAttributes: &historypb.TimerStartedEventAttributes{
				StartToFireTimeout: durationpb.New(30 * time.Second)}}},
		{EventId: 12, EventTime: at(40), EventType: enumspb.EVENT_TYPE_TIMER_FIRED},
		scheduled(16, 40, 2),
		{EventId: 17, EventTime: at(41), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: 16, Attempt: 1, Identity: "gpu-b"}}},
	}
	var out []*historypb.HistoryEvent
	for _, ev := range all {
		if ev.GetEventId() <= upTo {
			out = append(out, ev)
		}
	}
	return out
}

// A hedged stage: the try on the degraded node is cancelled once the
// hedge wins. Temporal writes a try's start with its end, so the
// cancelled try's start and cancellation can come after the exam moved
// on; the timeline shows one run of the stage and no illegal move.
func TestFoldTimelineOfAHedgedStage(t *testing.T) {
	events := history(t, "exam_hedged.json")
	var cancelRequested int64
	for _, ev := range events {
		if a := ev.GetActivityTaskCancelRequestedEventAttributes(); a != nil {
			cancelRequested = a.GetScheduledEventId()
		}
	}
	if cancelRequested == 0 {
		t.Fatal("the recorded history holds no cancelled try")
	}
	// The late start and cancellation of the held try, right after the
	// next stage was scheduled.
	late := slices.Clone(events)
	for i, ev := range late {
		if ev.GetActivityTaskScheduledEventAttributes().GetActivityId() == contract.ActivityID(exam.Layers, 1) {
			at := ev.GetEventTime()
			started := &historypb.HistoryEvent{EventId: 1000, EventTime: at, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
				Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
					ScheduledEventId: cancelRequested, Attempt: 1, Identity: "gpu-held"}}}
			canceled := &historypb.HistoryEvent{EventId: 1001, EventTime: at, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
				Attributes: &historypb.HistoryEvent_ActivityTaskCanceledEventAttributes{ActivityTaskCanceledEventAttributes: &historypb.ActivityTaskCanceledEventAttributes{
					ScheduledEventId: cancelRequested, StartedEventId: 1000}}}
			late = slices.Insert(late, i+1, started, canceled)
			break
		}
	}
	// Both tries start: the original fails while the hedge runs, and the
	// hedge's start follows (nothing is cancelled).
	both := []*historypb.HistoryEvent{}
	for _, ev := range events {
		if ev.GetActivityTaskCancelRequestedEventAttributes() != nil {
			continue
		}
		if ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() != 0 && len(both) > 0 &&
			ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() != cancelRequested && !startedOriginal(both, cancelRequested) {
			at := ev.GetEventTime()
			both = append(both,
				&historypb.HistoryEvent{EventId: 1000, EventTime: at, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
					Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
						ScheduledEventId: cancelRequested, Attempt: 1, Identity: "gpu-held"}}},
				&historypb.HistoryEvent{EventId: 1001, EventTime: at, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
					Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
						ScheduledEventId: cancelRequested, StartedEventId: 1000, Identity: "gpu-held", Failure: &failurepb.Failure{Message: "CUDA error",
							FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "StageFailed"}}}}}})
		}
		both = append(both, ev)
	}
	for name, evs := range map[string][]*historypb.HistoryEvent{"as recorded": events, "with the late start": late, "both tries start": both} {
		t.Run(name, func(t *testing.T) {
			rec := Fold(corpusCodec(t), time.Now(), []Run{{Events: evs}}, nil, nil)
			if rec.State != Completed || len(rec.Illegal) != 0 {
				t.Fatalf("record ends %s with illegal moves %v", rec.State, rec.Illegal)
			}
			var ran []string
			for _, e := range rec.Timeline {
				if e.To == Executing {
					ran = append(ran, string(e.Stage)+" "+e.Actor)
				}
			}
			first := "denoise gpu-spare"
			if name == "both tries start" {
				first = "denoise gpu-held" // the first to start; the hedge's start adds no move
			}
			want := []string{first, "layers gpu-spare", "lesions gpu-spare", "measure gpu-spare", "report octflow-dev", "notify octflow-dev"}
			if !slices.Equal(ran, want) {
				t.Errorf("stages ran %v, want %v", ran, want)
			}
		})
	}
}

// startedOriginal says whether evs start the try scheduled as id.
func startedOriginal(evs []*historypb.HistoryEvent, id int64) bool {
	for _, ev := range evs {
		if ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == id {
			return true
		}
	}
	return false
}

func TestFoldTimelineShowsARetryWithItsFailureAndNode(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	r := Fold(corpusCodec(t), t0, []Run{{Events: tries(t, t0, 17)}}, nil, nil)
	got := r.Timeline
	if len(got) != 6 || len(r.Illegal) != 0 {
		t.Fatalf("timeline %+v, illegal %v", got, r.Illegal)
	}
	first, retry, queued, exec := got[2], got[3], got[4], got[5]
	if first.To != Executing || first.Actor != "gpu-a" || first.Info["attempt"] != int32(1) {
		t.Errorf("first try = %+v", first)
	}
	if retry.To != RetryWait || retry.Stage != exam.Layers || retry.Info["failure"] != "CUDA out of memory" || retry.Info["failedAttempt"] != int32(1) ||
		retry.Info["outcome"] != string(contract.Failed) || retry.Actor != "gpu-a" || retry.Info["node"] != "gpu-a" || retry.Info["nextAttemptAt"] != t0.Add(40*time.Second) {
		t.Errorf("retry entry = %+v", retry)
	}
	if queued.To != Queued || queued.Info["attempt"] != int32(2) {
		t.Errorf("the retry back in its queue = %+v", queued)
	}
	if f := r.LastFailure; f == nil || f.Stage != exam.Layers || f.Attempt != 1 || f.Message != "CUDA out of memory" || f.Type != "StageFailed" {
		t.Errorf("last failure = %+v, want layers' first attempt", f)
	}
	if exec.To != Executing || exec.Actor != "gpu-b" || exec.Info["attempt"] != int32(2) || exec.From != Queued {
		t.Errorf("execution entry = %+v", exec)
	}
}

func TestFoldTimelineShowsAnAgingPromotion(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	scheduled := func(id int64, s int, bucket string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(s), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: "Denoise"}, Priority: &commonpb.Priority{FairnessKey: bucket}}}}
	}
	// The keys as recorded histories hold them (the bucket alone) and as
	// exams carry them now (bucket and campus, decision 0023).
	for _, key := range []func(exam.Priority) string{
		func(b exam.Priority) string { return string(b) },
		func(b exam.Priority) string { return contract.FairnessKey(b, "north") },
	} {
		events := []*historypb.HistoryEvent{
			{EventId: 1, EventTime: at(0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
			scheduled(5, 1, key(exam.Low)),
			{EventId: 6, EventTime: at(1801), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
				Attributes: &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: &historypb.ActivityTaskTimedOutEventAttributes{
					ScheduledEventId: 5, Failure: &failurepb.Failure{Message: "activity ScheduleToStart timeout",
						FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START}}}}}},
			scheduled(10, 1802, key(exam.Normal)),
		}
		r := Fold(corpusCodec(t), t0, []Run{{Events: events}}, nil, nil)
		got := r.Timeline
		if len(got) != 3 {
			t.Fatalf("timeline %+v", got)
		}
		if p := got[2]; p.To != Queued || p.From != Queued || p.Info["bucket"] != "normal" || p.Info["promotedFrom"] != "low" {
			t.Errorf("keys %q, %q: promotion entry = %+v", key(exam.Low), key(exam.Normal), p)
		}
		if r.EffectivePriority != exam.Normal {
			t.Errorf("keys %q, %q: effective priority %q, want normal", key(exam.Low), key(exam.Normal), r.EffectivePriority)
		}
	}
}

func TestFoldRecordedHistoriesOfEveryPath(t *testing.T) {
	run := func(file string) Run { return Run{Events: history(t, file)} }
	cases := []struct {
		name   string
		runs   []Run
		review *Run
		check  func(t *testing.T, r *Record)
	}{
		{"a retried stage", []Run{run("exam_retry.json")}, nil, func(t *testing.T, r *Record) {
			e := findEntry(r, RetryWait, exam.Layers)
			if e == nil || e.Info["failure"] != "simulated CUDA out of memory" || e.Info["failureType"] != contract.ErrTypeStageFailed ||
				e.Actor != "sim-gpu-node-1" || e.Info["failedAttempt"] != int32(1) || e.Info["outcome"] != string(contract.Failed) {
				t.Errorf("RETRY_WAIT entry %+v, want the failure and the node it failed on", e)
			}
			if r.State != Completed {
				t.Errorf("ends %s", r.State)
			}
		}},
		{"a try lost with its node", []Run{run("exam_node_lost.json")}, nil, func(t *testing.T, r *Record) {
			e := findEntry(r, RetryWait, exam.Layers)
			if e == nil || e.Info["outcome"] != string(contract.Lost) || e.Info["failureType"] != contract.ErrTypeNodeLost || e.Info["failedAttempt"] != int32(1) {
				t.Errorf("RETRY_WAIT entry %+v, want the lost try, numbered", e)
			}
			var attempts []any
			for _, x := range r.Timeline {
				if x.Stage == exam.Layers && x.To == Executing {
					attempts = append(attempts, x.Info["attempt"])
				}
			}
			if fmt.Sprint(attempts) != "[1 2]" || r.State != Completed {
				t.Errorf("layers ran attempts %v; the exam ends %s", attempts, r.State)
			}
		}},
		{"a report-ready push that failed for good", []Run{run("exam_notify_failed.json")}, nil, func(t *testing.T, r *Record) {
			last := r.Timeline[len(r.Timeline)-1]
			if r.State != Completed || r.Report == nil || r.LastFailure == nil || r.LastFailure.Stage != exam.Notify || r.LastFailure.Attempt != 1 ||
				last.Info["notifyError"] == nil || last.Info["notifyError"] != r.LastFailure.Message {
				t.Errorf("record ends %s with report %+v, last failure %+v, last entry %+v", r.State, r.Report, r.LastFailure, last)
			}
		}},
		{"an aging promotion", []Run{run("exam_aging.json")}, nil, func(t *testing.T, r *Record) {
			var promoted []string
			for _, e := range r.Timeline {
				if from, ok := e.Info["promotedFrom"]; ok {
					promoted = append(promoted, fmt.Sprintf("%s→%s", from, e.Info["bucket"]))
				}
			}
			if strings.Join(promoted, ",") != "low→normal,normal→urgent" || r.Priority != exam.Low {
				t.Errorf("promotions %v of a %s exam", promoted, r.Priority)
			}
		}},
		{"an infrastructure failure waits without spending attempts", []Run{run("exam_infra_retry.json")}, nil, func(t *testing.T, r *Record) {
			e := findEntry(r, RetryWait, exam.Lesions)
			if e == nil || e.Info["failureType"] != contract.ErrTypeInfrastructure || e.Info["outcome"] != string(contract.Unreachable) {
				t.Errorf("RETRY_WAIT entry %+v, want the infrastructure failure", e)
			}
			for _, x := range r.Timeline {
				if x.Stage == exam.Lesions && x.To == Executing && x.Info["attempt"] != int32(1) {
					t.Errorf("lesions ran attempt %v: the outage spent an attempt", x.Info["attempt"])
				}
			}
		}},
		{"a DEAD exam", []Run{run("exam_rerun_1_dead.json")}, nil, func(t *testing.T, r *Record) {
			if r.State != Dead || r.Stage != exam.Measure || r.LastFailure == nil ||
				r.LastFailure.Message != "measurements impossible on this volume" || r.LastFailure.Type != "InvalidVolume" {
				t.Errorf("record ends %s at %s with %+v", r.State, r.Stage, r.LastFailure)
			}
		}},
		{"a rerun of a DEAD exam", []Run{run("exam_rerun_1_dead.json"), run("exam_rerun_2.json")}, nil, func(t *testing.T, r *Record) {
			var path []State
			for _, e := range r.Timeline {
				if e.To == Created || e.To == Dead || e.To == Completed {
					path = append(path, e.To)
				}
			}
			if fmt.Sprint(path) != "[CREATED DEAD CREATED COMPLETED]" || r.Runs != 2 || r.LastFailure != nil || r.Summary == nil {
				t.Errorf("path %v over %d runs, last failure %+v", path, r.Runs, r.LastFailure)
			}
			if rerun := findEntry(r, Created, ""); rerun == nil {
				t.Error("no CREATED entry")
			}
		}},
		{"review decisions", []Run{run("exam_plain.json")}, ptr(run("review_decisions.json")), func(t *testing.T, r *Record) {
			var trail []string
			for _, e := range r.Timeline {
				if d, ok := e.Info["review"]; ok && e.Info["reviewWindow"] == nil {
					trail = append(trail, fmt.Sprintf("%s by %s", d, e.Actor))
				}
			}
			if strings.Join(trail, ", ") != "approve by demo clinician, amend by demo clinician" ||
				r.Review == nil || r.Review.Status != exam.ReviewAmended || len(r.Review.Reviews) != 2 {
				t.Errorf("trail %v, review %+v", trail, r.Review)
			}
		}},
		{"reminders until the window closes", []Run{run("exam_plain.json")}, ptr(run("review_reminders.json")), func(t *testing.T, r *Record) {
			// As many reminders as the recording made (how many fit in
			// the window depends on the recording machine's load), each
			// once in the timeline however often it was pushed: the
			// workstation failed the first push of the first, which was
			// pushed again.
			pushes, reminders := 0, 0
			for _, ev := range history(t, "review_reminders.json") {
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "NotifyWorkstation" {
					pushes++
				}
			}
			for _, e := range r.Timeline {
				if e.Info["reminder"] != nil {
					reminders++
				}
			}
			if r.Review == nil || r.Review.Status != exam.ReviewExpired || reminders < 1 || r.Review.Reminders != reminders ||
				pushes != reminders+1 {
				t.Errorf("review %+v after %d pushes, %d reminders in the timeline: want expired, each reminder once, one pushed twice",
					r.Review, pushes, reminders)
			}
			if last := r.Timeline[len(r.Timeline)-1]; last.Info["reviewWindow"] != "closed" {
				t.Errorf("timeline ends %+v", last)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Fold(corpusCodec(t), time.Now(), c.runs, c.review, nil)
			if len(r.Illegal) != 0 {
				t.Errorf("illegal moves %v", r.Illegal)
			}
			for i := 1; i < len(r.Timeline); i++ {
				if e := r.Timeline[i]; e.From != r.Timeline[i-1].To || e.At.Before(r.Timeline[i-1].At) {
					t.Errorf("entry %d does not follow entry %d: %+v after %+v", i, i-1, e, r.Timeline[i-1])
				}
			}
			c.check(t, r)
		})
	}
}

func TestFoldPendingStageStates(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	cdc := corpusCodec(t)
	beat := func(taken int, started *int) *commonpb.Payloads {
		hb := contract.Heartbeat{Node: "gpu-a", Stage: exam.Layers, TakenAt: ptr(at(taken).AsTime())}
		if started != nil {
			hb.StartedAt = ptr(at(*started).AsTime())
		}
		p, err := cdc.Data.ToPayloads(hb)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	claimed := func(p *workflowpb.PendingActivityInfo) *workflowpb.PendingActivityInfo {
		p.State, p.LastWorkerIdentity = enumspb.PENDING_ACTIVITY_STATE_STARTED, "gpu-a"
		return p
	}
	cases := []struct {
		name        string
		upTo        int64 // the history's last event (see tries)
		pending     *workflowpb.PendingActivityInfo
		want        State
		wantAttempt int32
	}{
		{"waiting on its queue", 5, &workflowpb.PendingActivityInfo{State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED}, Queued, 0},
		{"picked up, no heartbeat", 5, claimed(&workflowpb.PendingActivityInfo{LastStartedTime: at(2)}), Claimed, 1},
		{"running and heartbeating", 5, claimed(&workflowpb.PendingActivityInfo{LastStartedTime: at(2), LastHeartbeatTime: at(4)}), Executing, 1},
		{"taken, its GPU not yet held", 5, claimed(&workflowpb.PendingActivityInfo{LastStartedTime: at(2), LastHeartbeatTime: at(2),
			HeartbeatDetails: beat(2, nil)}), Claimed, 1},
		{"started on its GPU", 5, claimed(&workflowpb.PendingActivityInfo{LastStartedTime: at(2), LastHeartbeatTime: at(3),
			HeartbeatDetails: beat(2, ptr(3))}), Executing, 1},
		{"failed, the workflow not yet told", 7, nil, Executing, 1},
		{"waiting out its backoff", 12, nil, RetryWait, 2},
		{"the retry back on the queue", 16, &workflowpb.PendingActivityInfo{State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED}, Queued, 2},
		{"the retry claimed", 16, claimed(&workflowpb.PendingActivityInfo{LastStartedTime: at(41)}), Claimed, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.pending != nil {
				c.pending.ActivityType = &commonpb.ActivityType{Name: "SegmentLayers"}
				c.pending.ActivityId = contract.ActivityID(exam.Layers, 1)
				if c.upTo >= 16 {
					c.pending.ActivityId = contract.ActivityID(exam.Layers, 2)
				}
			}
			r := Fold(cdc, t0.Add(time.Minute), []Run{{Events: tries(t, t0, c.upTo), Pending: c.pending}}, nil, nil)
			if r.State != c.want || r.Stage != exam.Layers || len(r.Illegal) != 0 || r.Attempt != c.wantAttempt {
				t.Errorf("state %s at %s, attempt %d (illegal %v), want %s, attempt %d", r.State, r.Stage, r.Attempt, r.Illegal, c.want, c.wantAttempt)
			}
			if c.want == RetryWait && (r.LastFailure == nil || r.LastFailure.Message != "CUDA out of memory") {
				t.Errorf("retry without its failure: %+v", r.LastFailure)
			}
		})
	}
}

func TestFoldCountsAMoveTheTableForbids(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// A history in which a finished exam's stage starts again: nothing
	// octflow writes, but the check must see it if it ever happens.
	events := history(t, "exam_plain.json")
	late := &historypb.HistoryEvent{EventId: 999, EventTime: timestamppb.New(t0), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{}}}
	r := Fold(corpusCodec(t), t0, []Run{{Events: append(events, late)}}, nil, nil)
	if len(r.Illegal) != 1 || r.Illegal[0] != (ErrIllegalTransition{From: Completed, To: Dead}) {
		t.Errorf("illegal moves %v, want COMPLETED → DEAD", r.Illegal)
	}
}

func findEntry(r *Record, to State, stage exam.Stage) *Entry {
	for i := range r.Timeline {
		if r.Timeline[i].To == to && r.Timeline[i].Stage == stage {
			return &r.Timeline[i]
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// corpusCodec opens the replay corpus's sealed payloads (see
// workflows/testdata/README.md).
func corpusCodec(t *testing.T) Converters {
	t.Helper()
	c, err := codec.Open("../workflows/testdata/codec-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	dc, fc := codec.Converters(c)
	return Converters{Data: dc, Failure: fc}
}

func TestFoldKeepsTheExamsStateThroughItsExport(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	cdc := corpusCodec(t)
	// An export that failed twice and was refused: its entries are notes
	// that keep the exam's state, whatever that state is.
	payload := func(v any) *commonpb.Payloads {
		p, err := cdc.Data.ToPayloads(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	failed := func(id int64, s int, msg, typ string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(s), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
				Failure: &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
					ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: typ}}}}}}
	}
	started := func(id int64, s int) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: at(s), EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED}
	}
	export := Run{Events: []*historypb.HistoryEvent{
		{EventId: 1, EventTime: at(50), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Input: payload(contract.ExportStart{})}}},
		started(6, 51), failed(7, 52, "the PACS did not answer: connection refused", contract.ErrTypePACSUnavailable),
		started(12, 60), failed(13, 61, "the PACS refused the results (409)", contract.ErrTypeExportRefused),
		{EventId: 16, EventTime: at(62), EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
				Failure: &failurepb.Failure{Message: "the PACS refused the results (409)", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
					ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: contract.ErrTypeExportRefused}}}}}},
	}}
	r := Fold(cdc, t0, []Run{{Events: tries(t, t0, 17)}}, nil, &export)
	if x := r.Export; x == nil || x.Status != contract.ExportFailed || x.Tries != 2 || x.Failure != "the PACS refused the results (409)" {
		t.Errorf("export %+v, want failed after 2 tries with the refusal", r.Export)
	}
	if len(r.Illegal) != 0 || r.State != Executing || !r.UpdatedAt.Equal(t0.Add(62*time.Second)) {
		t.Errorf("state %s, illegal %v, updated %s: the export's notes must keep the state", r.State, r.Illegal, r.UpdatedAt)
	}
	if last := r.Timeline[len(r.Timeline)-1]; last.Info["export"] != string(contract.ExportFailed) || last.From != Executing || last.To != Executing {
		t.Errorf("last entry %+v", last)
	}
}
