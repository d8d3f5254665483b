package cost

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

func event(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

func started(attempt int32) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt}}}
}

func marker(name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name}}}
}

func TestOfCountsWhatEachEventCosts(t *testing.T) {
	cases := []struct {
		name   string
		events []*historypb.HistoryEvent
		want   Counts
	}{
		{"a start is an action", []*historypb.HistoryEvent{event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)},
			Counts{Runs: 1, Events: 1, Actions: 1}},
		{"a workflow task is counted once, by its start",
			[]*historypb.HistoryEvent{event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), event(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
				event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)},
			Counts{Runs: 1, Events: 3, WorkflowTasks: 1}},
		{"an activity's third attempt stands for three",
			[]*historypb.HistoryEvent{event(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), started(3), event(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)},
			Counts{Runs: 1, Events: 3, ActivityAttempts: 3, Actions: 3}},
		{"an activity that aged in its queue never started",
			[]*historypb.HistoryEvent{event(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), event(enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)},
			Counts{Runs: 1, Events: 2}},
		{"timers, upserts, signals and updates are actions",
			[]*historypb.HistoryEvent{event(enumspb.EVENT_TYPE_TIMER_STARTED), event(enumspb.EVENT_TYPE_TIMER_FIRED),
				event(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES), event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
				event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)},
			Counts{Runs: 1, Events: 6, Timers: 1, Upserts: 1, Signals: 1, Updates: 1, Actions: 4}},
		{"side effects and local activities are billed, version markers are not",
			[]*historypb.HistoryEvent{marker("SideEffect"), marker("LocalActivity"), marker("Version")},
			Counts{Runs: 1, Events: 3, Actions: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Of(c.events); got != c.want {
				t.Errorf("Of = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestARetryInARecordedHistoryCostsAnAttemptATimerAndItsUpserts(t *testing.T) {
	load := func(name string) Counts {
		h, err := client.HistoryFromJSON(mustOpen(t, filepath.Join("..", "..", "workflows", "testdata", name)), client.HistoryJSONOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return Of(h.GetEvents())
	}
	plain, retry := load("exam_plain.json"), load("exam_retry.json")
	// The workflow retries the stage itself: one more attempt, the
	// timer of its backoff, and the state changes it records.
	upserts := retry.Upserts - plain.Upserts
	if retry.ActivityAttempts != plain.ActivityAttempts+1 || retry.Timers != plain.Timers+1 || upserts < 1 ||
		retry.Actions != plain.Actions+2+upserts {
		t.Errorf("plain %+v, one retried stage %+v: want one attempt, one timer and their upserts more", plain, retry)
	}
	if plain.Actions < 1+plain.ActivityAttempts+plain.Upserts {
		t.Errorf("plain exam %+v: fewer actions than its start, attempts and upserts", plain)
	}
}

func TestBreakdownTotalsAndDividesBySource(t *testing.T) {
	b := Breakdown{Exams: 4, Sources: map[Source]Counts{
		Pipeline: {Runs: 4, Events: 160, Actions: 40}, Review: {Runs: 4, Events: 40, Actions: 8}, Fleet: {Runs: 1, Events: 400, Actions: 100}}}
	if got := b.Total(Fleet); got.Events != 200 || got.Actions != 48 || got.Runs != 8 {
		t.Errorf("total without the fleet %+v", got)
	}
	if got := b.Total().Per(b.Exams); got.Events != 150 || got.Actions != 37 {
		t.Errorf("per exam %+v", got)
	}
	if got := (Counts{Events: 3}).Per(0); got != (PerExam{}) {
		t.Errorf("per zero exams %+v, want zero", got)
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
