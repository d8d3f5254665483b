package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
)

// ReviewRequest is the body of POST /v1/exams/{examId}/review.
type ReviewRequest struct {
	Decision string `json:"decision"`
	Note     string `json:"note"`
}

// ReviewResponse says where the review stands after the decision.
type ReviewResponse struct {
	ExamID string            `json:"examId"`
	Campus string            `json:"campus"`
	Review exam.ReviewStatus `json:"review"`
}

// postReview delivers a clinician's decision as a Temporal Update to the
// exam's ReviewWorkflow, whose validator enforces the rules (one final
// decision, then amendments only, within the window). Before the report
// exists there is no review workflow, and the decision is refused.
func (s *Server) postReview(c echo.Context) error {
	// The request is checked before the exam is looked up: bad input is
	// refused without asking Temporal anything.
	var body ReviewRequest
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return problems.JSON("the review (JSON {decision, note})", err)
	}
	decision, err := exam.ParseDecision(body.Decision)
	if err != nil {
		return problems.New(http.StatusBadRequest, "malformed-request", err.Error())
	}
	if len(body.Note) > 4000 {
		return problems.New(http.StatusBadRequest, "malformed-request", "note is longer than 4000 characters")
	}
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	req := contract.ReviewRequest{Decision: decision, Note: body.Note, By: auth.Of(c).Name}
	refused := func(detail string) error {
		auditing.Note(c, "review", f.ref)
		p := problems.New(http.StatusConflict, "review-refused", detail)
		p.ExamID = f.ref.ID
		return p
	}

	status, err := s.review(ctx, contract.ReviewWorkflowID(f.ref), "", req)
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app): // the validator's refusal
		return refused(app.Error())
	case isNotFound(err) && f.desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return refused("the exam's review window has closed")
	case isNotFound(err):
		return refused("the exam has no report to review")
	case err != nil:
		return unavailable(ctx, err)
	}
	auditing.Note(c, "review", f.ref)
	return c.JSON(http.StatusOK, ReviewResponse{ExamID: f.ref.ID, Campus: f.ref.Campus, Review: status})
}

// review sends req to the workflow that holds the exam's review.
func (s *Server) review(ctx context.Context, workflowID, runID string, req contract.ReviewRequest) (exam.ReviewStatus, error) {
	handle, err := s.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, RunID: runID, UpdateName: contract.ReviewUpdate,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return "", err
	}
	var status exam.ReviewStatus
	return status, handle.Get(ctx, &status)
}
