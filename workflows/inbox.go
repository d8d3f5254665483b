package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// inboxKeep is how many recent events the inbox holds; a workstation
// away for longer reads the worklist instead.
const inboxKeep = 1000

// InboxWorkflow keeps a campus's recent report-ready events, so a
// workstation that reconnects to the api's event stream (with
// Last-Event-ID) misses nothing, whatever happened to the api in
// between. Exams publish to it with signal-with-start.
func InboxWorkflow(ctx workflow.Context, state contract.InboxState) error {
	if state.Next == 0 {
		state.Next = 1
	}
	if err := workflow.SetQueryHandler(ctx, contract.InboxQuery, func(after int64) ([]contract.ReportReadyEvent, error) {
		for i, e := range state.Events {
			if e.Seq > after {
				return state.Events[i:], nil
			}
		}
		return []contract.ReportReadyEvent{}, nil
	}); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	events := workflow.GetSignalChannel(ctx, contract.InboxEventSignal)
	add := func(e contract.ReportReadyEvent) {
		// A notify stage or an export that is retried publishes again:
		// keep one of each.
		for _, old := range state.Events {
			if old.ExamID == e.ExamID && old.Reminder == e.Reminder && old.Kind == e.Kind {
				return
			}
		}
		e.Seq, e.At = state.Next, workflow.Now(ctx)
		state.Next++
		state.Events = append(state.Events, e)
		if n := len(state.Events); n > inboxKeep {
			state.Events = append([]contract.ReportReadyEvent(nil), state.Events[n-inboxKeep:]...)
		}
	}
	moves := workflow.GetSignalChannel(ctx, contract.MoveBuildSignal)
	for {
		var e contract.ReportReadyEvent
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(events, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &e)
			add(e)
		})
		sel.AddReceive(moves, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		if timeToContinue(ctx, state.HistoryLimit) {
			for events.ReceiveAsync(&e) {
				add(e)
			}
			return continueAsNew(ctx, contract.InboxWorkflow, state)
		}
	}
}
