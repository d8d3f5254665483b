package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// ScanSweepWorkflow removes stored scans no exam took: the gateway never
// deletes a scan itself, because a submission whose start had an unknown
// outcome may yet have an exam using it. A Temporal schedule runs it;
// only scans older than the grace period are looked at, so a submission
// that is still starting keeps its scan.
func ScanSweepWorkflow(ctx workflow.Context, in contract.SweepInput) (contract.SweepResult, error) {
	var res contract.SweepResult
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: exam.CPUQueue, StartToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute,
	})
	err := workflow.ExecuteActivity(ctx, contract.SweepScans, in).Get(ctx, &res)
	return res, err
}
