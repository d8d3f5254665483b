package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/lifecycle"
)

// runInput is the input the exam's latest pipeline run started with.
func (s *Server) runInput(ctx context.Context, f *examFound) (contract.ExamInput, error) {
	run := f.desc.GetWorkflowExecutionInfo().GetExecution()
	events, err := s.history(ctx, run.GetWorkflowId(), run.GetRunId())
	if err != nil {
		return contract.ExamInput{}, unavailable(ctx, err)
	}
	in, err := s.cfg.Converters.Input(lifecycle.Run{Events: events})
	if err != nil {
		return contract.ExamInput{}, unavailable(ctx, err)
	}
	return in, nil
}

// rerunExam serves POST /v1/exams/{examId}/rerun: an admin starts a new
// run of a DEAD exam under the same exam ID, on the same stored scan and
// under the policy in force now. The new run names the one it follows,
// so the exam's timeline shows both. Anything but a DEAD exam is 409.
func (s *Server) rerunExam(c echo.Context) error {
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	desc := f.desc
	info := desc.GetWorkflowExecutionInfo()
	id := f.ref.ID
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
	default:
		p := problems.New(http.StatusConflict, "not-dead", "only a DEAD exam can be run again; this one is not")
		p.ExamID = id
		return p
	}
	in, err := s.runInput(ctx, f)
	if err != nil {
		return err
	}
	who := auth.Of(c)
	in.Policy = s.policyFor(in.Submission.Campus)
	in.Rerun = &contract.Rerun{PreviousRunID: info.GetExecution().GetRunId(), By: who.Name, At: time.Now().UTC()}
	// A new run only after a failed one; two admins at once start one.
	err = s.startRun(ctx, in, contract.ExamMemo{ScanDigest: in.Submission.ScanDigest, SubmissionID: randomID(),
		DeviceID: in.Submission.DeviceID, Submitter: s.memoString(desc, contract.MemoSubmitter)}, true)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return unavailable(ctx, err)
	}
	s.cfg.Logger.Info("exam rerun", zap.String("campus", f.ref.Campus), zap.String("examId", id), zap.String("by", who.Name))
	auditing.Note(c, "rerun", f.ref)
	if f.desc, err = s.cfg.Temporal.DescribeWorkflowExecution(ctx, f.workflowID(), ""); err != nil {
		return unavailable(ctx, err)
	}
	st, err := s.status(ctx, f)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, examLocation(f.ref))
	return c.JSON(http.StatusAccepted, st)
}
