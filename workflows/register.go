package workflows

import (
	"fmt"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// Register registers every octflow workflow under its contract name, on
// a worker or on a replayer, the exam pipeline over stages, in their
// order. The pipeline is code, not configuration: every worker of a
// namespace must be handed the same one (a worker of a new build with
// another is a new version, Worker Versioning's to route). A pipeline
// the workflows cannot run is refused: it must have a report stage,
// after which the review and the export start, and a notify stage on
// the CPU workers whose activity is the review's reminder; and every
// stage must state its input (activities.StageOf does), which the exam's
// workflow gives it by.
//
// Every workflow is pinned (Worker Versioning, decision 28): a run ends
// on the build that started it. The long-running ones (fleet, inboxes)
// move to a new current build at their next continue-as-new
// (continueAsNew).
func Register(r worker.WorkflowRegistry, stages exam.Pipeline) error {
	if err := runnable(stages); err != nil {
		return err
	}
	for name, fn := range map[string]any{
		contract.ExamWorkflow:      ExamWorkflow(stages),
		contract.ReviewWorkflow:    ReviewWorkflow,
		contract.FleetWorkflow:     FleetWorkflow,
		contract.InboxWorkflow:     InboxWorkflow,
		contract.ScanSweepWorkflow: ScanSweepWorkflow,
		contract.ExportWorkflow:    ExportWorkflow,
	} {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name, VersioningBehavior: workflow.VersioningBehaviorPinned})
	}
	return nil
}

// runnable says why the workflows cannot run stages, if they cannot.
func runnable(stages exam.Pipeline) error {
	seen := map[string]bool{}
	for _, s := range stages {
		if s.Stage == "" || s.Activity == "" || seen[string(s.Stage)] || seen["activity "+s.Activity] {
			return fmt.Errorf("pipeline %v: stage %q (activity %q) is unnamed or named twice", stages.Stages(), s.Stage, s.Activity)
		}
		seen[string(s.Stage)], seen["activity "+s.Activity] = true, true
		switch s.Input {
		case exam.ImageInput, exam.ReportInput, exam.NotifyInput:
		default:
			return fmt.Errorf("pipeline %v: stage %s states no input the pipeline gives (%q): declare it with activities.StageOf", stages.Stages(), s.Stage, s.Input)
		}
	}
	if _, ok := stages.Spec(exam.Render); !ok {
		return fmt.Errorf("pipeline %v has no %s stage", stages.Stages(), exam.Render)
	}
	if n, ok := stages.Spec(exam.Notify); !ok || n.Activity != contract.NotifyWorkstation || n.GPU || n.Input != exam.NotifyInput {
		return fmt.Errorf("pipeline %v: its %s stage must run %s on the CPU workers, taking a %s input, as the review's reminders do",
			stages.Stages(), exam.Notify, contract.NotifyWorkstation, exam.NotifyInput)
	}
	return nil
}
