package workers

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"octflow/contract"
	"octflow/exam"
)

// InboxPublisher puts report-ready events into their campus's inbox
// workflow, starting it on first use.
type InboxPublisher struct{ Client client.Client }

// Publish signals the campus inbox (signal-with-start).
func (p InboxPublisher) Publish(ctx context.Context, e contract.ReportReadyEvent) error {
	id := contract.InboxWorkflowID(e.Campus)
	_, err := p.Client.SignalWithStartWorkflow(ctx, id, contract.InboxEventSignal, e,
		client.StartWorkflowOptions{ID: id, TaskQueue: exam.WorkflowQueue, Priority: contract.SystemPriority()},
		contract.InboxWorkflow, contract.InboxState{Campus: e.Campus})
	if err != nil {
		return fmt.Errorf("signal inbox %s: %w", id, err)
	}
	return nil
}
