package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
)

// rerunExport serves POST /v1/exams/{examId}/export: an admin sends a
// COMPLETED exam's results to its campus's PACS again after the export
// failed (the PACS refused an object, or stayed down past the retry
// budget) and the cause was fixed. No stage runs again; the objects and
// their UIDs are the ones the failed export built, so nothing the PACS
// took is duplicated. An export pending or delivered is 409, as is an
// exam whose campus has no PACS or whose report does not exist.
func (s *Server) rerunExport(c echo.Context) error {
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	conflict := func(detail string) error {
		p := problems.New(http.StatusConflict, "export-not-failed", detail)
		p.ExamID = f.ref.ID
		return p
	}
	info := f.desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return conflict("the exam has no report to export yet")
	}
	in, err := s.runInput(ctx, f)
	if err != nil {
		return err
	}
	if !in.Export || !s.cfg.ExportCampuses[f.ref.Campus] {
		return conflict("the exam's campus sends its results to no PACS")
	}
	switch desc, err := s.cfg.Temporal.DescribeWorkflowExecution(ctx, contract.ExportWorkflowID(f.ref), ""); {
	case err != nil && !isNotFound(err):
		return unavailable(ctx, err)
	case err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return conflict("the export is under way")
	case err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return conflict("the results were delivered")
	}
	in.Policy.ExportRetryFor = s.cfg.Policy.ExportRetryFor
	_, err = s.cfg.Temporal.ExecuteWorkflow(ctx, contract.ExportStartOptions(in.Submission, in.Policy).Client(),
		contract.ExportWorkflow, contract.ExportStart{Submission: in.Submission, Policy: in.Policy})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return unavailable(ctx, err)
	}
	who := auth.Of(c)
	s.cfg.Logger.Info("export rerun", zap.String("campus", f.ref.Campus), zap.String("examId", f.ref.ID), zap.String("by", who.Name))
	auditing.Note(c, "export", f.ref)
	st, err := s.status(ctx, f)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, examLocation(f.ref))
	return c.JSON(http.StatusAccepted, st)
}
