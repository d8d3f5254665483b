package workflows

import (
	"fmt"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// Register registers every octflow workflow under its contract name, on
// a worker or on a replayer: the exam pipeline over stages, in their
// order, and the review reminding through stages' notify stage.
func Register(r worker.WorkflowRegistry, stages exam.Pipeline) error {
	notify, ok := stages.Spec(exam.Notify)
	if !ok {
		return fmt.Errorf("the pipeline %v has no %s stage, which the review reminds through", stages.Stages(), exam.Notify)
	}
	r.RegisterWorkflowWithOptions(ExamWorkflow(stages), workflow.RegisterOptions{Name: contract.ExamWorkflow})
	r.RegisterWorkflowWithOptions(ReviewWorkflow(notify), workflow.RegisterOptions{Name: contract.ReviewWorkflow})
	r.RegisterWorkflowWithOptions(FleetWorkflow, workflow.RegisterOptions{Name: contract.FleetWorkflow})
	r.RegisterWorkflowWithOptions(InboxWorkflow, workflow.RegisterOptions{Name: contract.InboxWorkflow})
	r.RegisterWorkflowWithOptions(ScanSweepWorkflow, workflow.RegisterOptions{Name: contract.ScanSweepWorkflow})
	r.RegisterWorkflowWithOptions(ExportWorkflow, workflow.RegisterOptions{Name: contract.ExportWorkflow})
	return nil
}
