package api

import (
	"github.com/labstack/echo/v4"

	"octflow/exam"
)

// WarningHeader carries what the gateway changed in a request it took,
// e.g. an urgent priority the device may not send.
const WarningHeader = "X-Octflow-Warning"

// allowedPriority is the priority an upload gets: urgent only from a
// device or router whose token allows it (Principal.Urgent); anyone
// else's urgent is taken as normal, and the answer says so. Urgent work
// takes 60 % of every GPU: a device that may not send it cannot jump
// the queue of every campus by asking.
func allowedPriority(c echo.Context, p exam.Priority) exam.Priority {
	if p != exam.Urgent || principal(c).Urgent {
		return p
	}
	c.Response().Header().Set(WarningHeader, "urgent is not this device's to send (its token does not allow it): taken as normal")
	return exam.Normal
}
