package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"octflow/exam"
	"octflow/workflows"
)

// ReviewRequest is the body of POST /v1/exams/{examId}/review.
type ReviewRequest struct {
	Decision string `json:"decision"`
	Note     string `json:"note"`
}

// ReviewResponse says where the review stands after the decision.
type ReviewResponse struct {
	ExamID string            `json:"examId"`
	Review exam.ReviewStatus `json:"review"`
}

// postReview delivers a clinician's decision to the exam's workflow as a
// Temporal Update; the workflow's validator enforces the rules (report
// first, one final decision, then amendments only).
func (s *Server) postReview(c echo.Context) error {
	desc, err := s.examFromPath(c)
	if err != nil {
		return err
	}
	var req ReviewRequest
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return problem(http.StatusBadRequest, "malformed-request", "body must be JSON {decision, note}: "+err.Error())
	}
	decision, err := exam.ParseDecision(req.Decision)
	if err != nil {
		return problem(http.StatusBadRequest, "malformed-request", err.Error())
	}
	if len(req.Note) > 4000 {
		return problem(http.StatusBadRequest, "malformed-request", "note is longer than 4000 characters")
	}
	run := desc.GetWorkflowExecutionInfo().GetExecution()
	id := strings.TrimPrefix(run.GetWorkflowId(), "exam-")
	ctx := c.Request().Context()
	handle, err := s.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetWorkflowId(), RunID: run.GetRunId(), UpdateName: workflows.ReviewUpdate,
		Args:         []any{exam.ReviewInput{Decision: decision, Note: req.Note, By: principal(c).Name}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if isNotFound(err) {
		p := problem(http.StatusConflict, "review-refused", "the exam's review window has closed")
		p.ExamID = id
		return p
	} else if err != nil {
		return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}
	var status exam.ReviewStatus
	if err := handle.Get(ctx, &status); err != nil {
		var refused *temporal.ApplicationError
		if errors.As(err, &refused) {
			p := problem(http.StatusConflict, "review-refused", refused.Error())
			p.ExamID = id
			return p
		}
		return problem(http.StatusServiceUnavailable, "unavailable", "temporal: "+err.Error())
	}
	return c.JSON(http.StatusOK, ReviewResponse{ExamID: id, Review: status})
}
