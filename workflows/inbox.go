package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"octflow/exam"
)

// The inbox: one long-running workflow per campus holding the latest
// report-ready events, so a workstation that reconnects to the api's
// event stream (with Last-Event-ID) misses nothing, whatever happened to
// the api in between. Exams publish to it with signal-with-start.
const (
	InboxWorkflowName = "InboxWorkflow"
	InboxEventSignal  = "report-ready"
	InboxQuery        = "events-since"
)

// InboxWorkflowID is the workflow ID of a campus's inbox.
func InboxWorkflowID(campus string) string { return "inbox-" + campus }

// InboxState is carried across continue-as-new.
type InboxState struct {
	Campus string                  `json:"campus"`
	Next   int64                   `json:"next"`
	Events []exam.ReportReadyEvent `json:"events"`
}

// inboxKeep is how many recent events the inbox holds; a workstation
// away for longer reads the worklist instead.
const inboxKeep = 1000

// InboxWorkflow keeps a campus's recent report-ready events.
func InboxWorkflow(ctx workflow.Context, state InboxState) error {
	if state.Next == 0 {
		state.Next = 1
	}
	if err := workflow.SetQueryHandler(ctx, InboxQuery, func(after int64) ([]exam.ReportReadyEvent, error) {
		for i, e := range state.Events {
			if e.Seq > after {
				return state.Events[i:], nil
			}
		}
		return []exam.ReportReadyEvent{}, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	events := workflow.GetSignalChannel(ctx, InboxEventSignal)
	add := func(e exam.ReportReadyEvent) {
		// A notify stage that is retried publishes again: keep one.
		for _, old := range state.Events {
			if old.ExamID == e.ExamID && old.Reminder == e.Reminder {
				return
			}
		}
		e.Seq, e.At = state.Next, workflow.Now(ctx)
		state.Next++
		state.Events = append(state.Events, e)
		if n := len(state.Events); n > inboxKeep {
			state.Events = append([]exam.ReportReadyEvent(nil), state.Events[n-inboxKeep:]...)
		}
	}
	for {
		var e exam.ReportReadyEvent
		events.Receive(ctx, &e)
		add(e)
		if historyFull(ctx) {
			for events.ReceiveAsync(&e) {
				add(e)
			}
			return workflow.NewContinueAsNewError(ctx, InboxWorkflowName, state)
		}
	}
}
