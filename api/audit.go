package api

import (
	"github.com/labstack/echo/v4"

	"octflow/api/auditing"
	"octflow/exam"
)

// audit notes that the request did action to ref, for its entry in the
// audit trail (auditing.Note); status is what the handler means to
// answer, and the status written prevails.
func (s *Server) audit(c echo.Context, action string, ref exam.Ref, status int) {
	auditing.Note(c, action, ref)
}

// auditRefusal notes why a request is refused (auditing.Refused).
func auditRefusal(c echo.Context, reason string, who *Principal) { auditing.Refused(c, reason, who) }
