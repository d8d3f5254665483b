package api

import (
	"net/http"
	"octflow/api/auditing"

	"github.com/labstack/echo/v4"
)

// getEvents serves GET /v1/exams/{examId}/events: the exam's timeline,
// folded by lifecycle from the workflow histories (Temporal's
// append-only event log) of every run of the exam and of its review.
func (s *Server) getEvents(c echo.Context) error {
	f, err := s.findExam(c)
	if err != nil {
		return err
	}
	rec, err := s.record(c.Request().Context(), f)
	if err != nil {
		return unavailable(c.Request().Context(), err)
	}
	auditing.Note(c, "read-events", f.ref)
	if rec.Timeline == nil {
		return c.JSON(http.StatusOK, []struct{}{}) // [], never null
	}
	return c.JSON(http.StatusOK, rec.Timeline)
}
