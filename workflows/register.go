package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
)

// Register registers every octflow workflow under its contract name, on
// a worker or on a replayer.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(ExamWorkflow, workflow.RegisterOptions{Name: contract.ExamWorkflow})
	r.RegisterWorkflowWithOptions(ReviewWorkflow, workflow.RegisterOptions{Name: contract.ReviewWorkflow})
	r.RegisterWorkflowWithOptions(FleetWorkflow, workflow.RegisterOptions{Name: contract.FleetWorkflow})
	r.RegisterWorkflowWithOptions(InboxWorkflow, workflow.RegisterOptions{Name: contract.InboxWorkflow})
	r.RegisterWorkflowWithOptions(ScanSweepWorkflow, workflow.RegisterOptions{Name: contract.ScanSweepWorkflow})
	r.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
}
