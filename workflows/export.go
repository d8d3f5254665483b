package workflows

import (
	"errors"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"octflow/contract"
	"octflow/exam"
)

// Backoff of an export whose PACS does not answer: full jitter under a
// ceiling doubling from exportBackoffBase to exportBackoffCap.
const (
	exportBackoffBase = 5 * time.Second
	exportBackoffCap  = 5 * time.Minute
	// exportTimeout bounds one send (build the objects, STOW-RS).
	exportTimeout = 5 * time.Minute
)

// ExportWorkflow sends an exam's results to its campus's PACS, apart
// from the pipeline: the exam is COMPLETED once its report exists, and
// its report-ready event goes out, whatever the PACS does. A PACS that
// does not answer is tried again after a jittered backoff for up to the
// policy's ExportRetryFor, without running any stage again; one that
// refuses an object ends the export failed (the workflow fails, so an
// admin may start it again under the same ID once the cause is fixed).
// Every send builds the same objects with the same UIDs, so a resend
// makes no duplicate. An exam rerun whose earlier run's export delivered
// is not exported again (the ID's export completed); the PACS keeps the
// earlier run's objects. A run that superseded the earlier report is
// exported again: its results name the earlier ones and reject them.
func ExportWorkflow(ctx workflow.Context, in contract.ExportStart) (contract.ExportState, error) {
	st := contract.ExportState{Status: contract.ExportPending}
	if err := workflow.SetQueryHandler(ctx, contract.ExportQuery, func() (contract.ExportState, error) { return st, nil }); err != nil {
		return st, err
	}
	exports := func(outcome string) {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).Counter(ExportsCounter).Inc(1)
	}
	// The budget counts the sends' time too: a PACS that takes the
	// connection and then hangs costs a timeout per try.
	sends := retries{key: "export", base: exportBackoffBase, limit: exportBackoffCap, floor: time.Second,
		deadline: workflow.Now(ctx).Add(in.Policy.ExportRetryFor), retryable: exportRetryable}
	var out contract.ExportOutput
	err := sends.run(ctx, func(n int) error {
		st.Tries++
		actx := oneTry(ctx, workflow.ActivityOptions{
			ActivityID:          "export-" + strconv.Itoa(n),
			TaskQueue:           exam.CPUQueue,
			StartToCloseTimeout: exportTimeout,
		})
		err := workflow.ExecuteActivity(actx, contract.ExportToPACS, contract.StageInput{Exam: in.Submission}).Get(ctx, &out)
		if err != nil {
			st.Failure = failureMessage(err)
		}
		return err
	})
	if err != nil {
		st.Status = contract.ExportFailed
		exports(exportFailed)
		workflow.GetLogger(ctx).Error("export to the PACS failed", "tries", st.Tries, "error", st.Failure)
		return st, temporal.NewNonRetryableApplicationError(st.Failure, failureType(err), err)
	}
	now := workflow.Now(ctx)
	st.Status, st.Instances, st.Failure, st.DeliveredAt = contract.ExportDelivered, out.Instances, "", &now
	exports(exportDelivered)
	return st, nil
}

// exportRetryable reports whether a send may succeed if tried again: the
// PACS did not answer, or the send timed out. A refusal, or objects that
// cannot be built, may not.
func exportRetryable(err error) bool {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable() && app.Type() != contract.ErrTypeExportRefused
	}
	return true
}

// startExport starts the exam's export, which outlives the pipeline
// (afterReport); a superseding run's though the earlier export
// delivered.
func (p *pipeline) startExport(ctx workflow.Context, superseding bool) workflow.ChildWorkflowFuture {
	opts := contract.ExportStartOptions(p.in.Submission, p.in.Policy)
	if superseding {
		opts = opts.Superseding()
	}
	cctx := workflow.WithChildOptions(ctx, opts.Child())
	return workflow.ExecuteChildWorkflow(cctx, contract.ExportWorkflow, contract.ExportStart{Submission: p.in.Submission, Policy: p.in.Policy})
}
