// Package cost measures what exams cost the workflow engine, from the
// histories Temporal keeps of them: events, workflow tasks, activity
// attempts, timers, search-attribute upserts, signals, updates, and the
// billable actions Temporal Cloud would count for them.
//
// Actions follow Temporal Cloud's definition as far as a history shows
// it, like Temporal Cloud's own estimate from event histories: a workflow
// started (client, child or continue-as-new), a timer started, a
// search-attribute upsert, a signal, an accepted update, a side effect or
// local-activity marker, and every attempt of an activity. Queries,
// rejected updates and activity heartbeats are billed too but leave no
// event: they are not in these counts (docs/benchmark.md says how to
// read them).
package cost

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Counts is what one or more workflow runs cost the engine.
type Counts struct {
	// Runs is how many workflow runs the counts cover.
	Runs int `json:"runs"`
	// Events is how many history events the runs wrote.
	Events int `json:"events"`
	// WorkflowTasks is how many workflow tasks were dispatched to
	// workers (each a round trip and a replay of new events).
	WorkflowTasks int `json:"workflowTasks"`
	// ActivityAttempts is how many activity attempts started, retries
	// included.
	ActivityAttempts int `json:"activityAttempts"`
	Timers           int `json:"timers"`
	// Upserts is how many search-attribute upserts the runs made: each
	// one a write to the visibility store.
	Upserts int `json:"upserts"`
	Signals int `json:"signals"`
	Updates int `json:"updates"`
	// Actions is the billable actions the history shows (package doc).
	Actions int `json:"actions"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Runs += o.Runs
	c.Events += o.Events
	c.WorkflowTasks += o.WorkflowTasks
	c.ActivityAttempts += o.ActivityAttempts
	c.Timers += o.Timers
	c.Upserts += o.Upserts
	c.Signals += o.Signals
	c.Updates += o.Updates
	c.Actions += o.Actions
}

// billableMarkers are the markers Temporal Cloud bills: side effects and
// local activities (version markers are exempt).
var billableMarkers = map[string]bool{"SideEffect": true, "MutableSideEffect": true, "LocalActivity": true}

// Of counts one run's history.
func Of(events []*historypb.HistoryEvent) Counts {
	c := Counts{Runs: 1, Events: len(events)}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			c.WorkflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// One started event stands for every attempt up to its own:
			// the server writes it once, for the attempt that closed.
			n := int(max(ev.GetActivityTaskStartedEventAttributes().GetAttempt(), 1))
			c.ActivityAttempts += n
			c.Actions += n
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Timers++
			c.Actions++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.Upserts++
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			c.Signals++
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			c.Updates++
			c.Actions++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if billableMarkers[ev.GetMarkerRecordedEventAttributes().GetMarkerName()] {
				c.Actions++
			}
		}
	}
	return c
}

// Workflow counts every run Temporal holds of the workflow workflowID
// (all runs of a chain continued as new, every rerun).
func Workflow(ctx context.Context, c client.Client, workflowID string) (Counts, error) {
	var total Counts
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", workflowID), NextPageToken: token})
		if err != nil {
			return Counts{}, fmt.Errorf("list runs of %s: %w", workflowID, err)
		}
		for _, ex := range resp.GetExecutions() {
			events, err := History(ctx, c, workflowID, ex.GetExecution().GetRunId())
			if err != nil {
				return Counts{}, err
			}
			total.Add(Of(events))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return total, nil
		}
	}
}

// History reads one run's events, oldest first.
func History(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s/%s: %w", workflowID, runID, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

// Source is where a cost comes from.
type Source string

// The sources of an exam's cost.
const (
	// Pipeline is the exam's own workflow (every run of it).
	Pipeline Source = "pipeline"
	// Review is the clinician's review workflow.
	Review Source = "review"
	// Inbox is the campus inbox's share: its runs over the exams.
	Inbox Source = "inbox"
	// Fleet is the fleet workflow's share: node reports, which grow
	// with time and nodes, not with exams.
	Fleet Source = "fleet"
)

// Sources lists the sources in the order reports show them.
var Sources = []Source{Pipeline, Review, Inbox, Fleet}

// Breakdown is the cost of a set of exams by source.
type Breakdown struct {
	Exams   int               `json:"exams"`
	Sources map[Source]Counts `json:"sources"`
}

// PerExam is one source's cost (or the total's) divided by the exams.
type PerExam struct {
	Events           float64 `json:"events"`
	WorkflowTasks    float64 `json:"workflowTasks"`
	ActivityAttempts float64 `json:"activityAttempts"`
	Timers           float64 `json:"timers"`
	Upserts          float64 `json:"upserts"`
	Signals          float64 `json:"signals"`
	Updates          float64 `json:"updates"`
	Actions          float64 `json:"actions"`
}

// Per divides c over n exams.
func (c Counts) Per(n int) PerExam {
	if n <= 0 {
		return PerExam{}
	}
	d := float64(n)
	return PerExam{Events: float64(c.Events) / d, WorkflowTasks: float64(c.WorkflowTasks) / d,
		ActivityAttempts: float64(c.ActivityAttempts) / d, Timers: float64(c.Timers) / d,
		Upserts: float64(c.Upserts) / d, Signals: float64(c.Signals) / d, Updates: float64(c.Updates) / d,
		Actions: float64(c.Actions) / d}
}

// Total is the cost of every source but those left out.
func (b Breakdown) Total(leaveOut ...Source) Counts {
	var t Counts
	for s, c := range b.Sources {
		skip := false
		for _, l := range leaveOut {
			skip = skip || s == l
		}
		if !skip {
			t.Add(c)
		}
	}
	return t
}
