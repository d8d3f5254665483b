package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/workflowservice/v1"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
)

// examFound is an exam a request named and may see: its reference and
// Temporal's description of its latest pipeline run.
type examFound struct {
	ref  exam.Ref
	desc *workflowservice.DescribeWorkflowExecutionResponse
}

func (f *examFound) workflowID() string {
	return f.desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId()
}
func (f *examFound) runID() string {
	return f.desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// findExam resolves the exam a request names: the path's exam ID (the
// device's, or the exam's reference) in the campus of ?campus= or,
// without it, in the caller's campuses. A campus is a tenant, so an exam
// outside the caller's campuses answers exactly like a missing one: 404,
// never 403, so nobody learns which IDs another campus uses. Problems do
// not repeat the path's ID: it may be an identifier, and they are
// audited.
func (s *Server) findExam(c echo.Context) (*examFound, error) {
	id := c.Param("examId")
	notFound := problems.New(http.StatusNotFound, "not-found", "no such exam")
	if exam.ValidateID(id) != nil {
		return nil, notFound
	}
	campuses, err := s.campusesFor(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	var found []*examFound
	for _, campus := range campuses {
		ref := s.cfg.Pseudonymizer.ExamRef(campus, id)
		desc, err := s.describeExam(ctx, ref)
		if isNotFound(err) {
			continue
		} else if err != nil {
			return nil, unavailable(ctx, err)
		}
		found = append(found, &examFound{ref: ref, desc: desc})
	}
	switch len(found) {
	case 0:
		return nil, notFound
	case 1:
		return found[0], nil
	}
	var names []string
	for _, f := range found {
		names = append(names, f.ref.Campus)
	}
	return nil, problems.New(http.StatusConflict, "ambiguous-exam",
		"the exam exists in campuses "+strings.Join(names, ", ")+"; say which with ?campus=")
}

// campusesFor lists the campuses a request's exam ID is looked up in:
// ?campus= if the caller may see it, else every campus of the caller's.
// An admin sees every campus and so must say which, unless their token
// names a home campus.
func (s *Server) campusesFor(c echo.Context) ([]string, error) {
	who := auth.Of(c)
	if q := c.QueryParam("campus"); q != "" {
		if exam.ValidateCampus(q) != nil || !who.CanSee(q) {
			if exam.ValidateCampus(q) == nil && exam.ValidateID(c.Param("examId")) == nil {
				auditing.Probe(c, s.cfg.Pseudonymizer.ExamRef(q, c.Param("examId")))
			}
			return nil, problems.New(http.StatusNotFound, "not-found", "no such exam")
		}
		return []string{q}, nil
	}
	if scope := who.Scope(); scope != nil {
		return scope, nil
	}
	if who.Campus != "" {
		return []string{who.Campus}, nil
	}
	return nil, problems.New(http.StatusBadRequest, "malformed-request", "an admin must say which campus: ?campus=")
}

// describeExam describes an exam's latest pipeline run. An exam Temporal
// does not hold is a *serviceerror.NotFound.
func (s *Server) describeExam(ctx context.Context, ref exam.Ref) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return s.cfg.Temporal.DescribeWorkflowExecution(ctx, contract.ExamWorkflowID(ref), "")
}

// campusAllowed checks a ?campus= for a request about a whole campus
// (the event stream): it must be one the caller may see.
func campusAllowed(who auth.Principal, campus string) bool {
	return exam.ValidateCampus(campus) == nil && (who.Role == auth.RoleAdmin || slices.Contains(who.Scope(), campus))
}
