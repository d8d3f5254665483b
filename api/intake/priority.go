package intake

import (
	"github.com/labstack/echo/v4"

	"octflow/api/auth"
	"octflow/exam"
)

// WarningHeader carries what the gateway changed in a request it took,
// e.g. an urgent priority the device may not send.
const WarningHeader = "X-Octflow-Warning"

// AllowedPriority is the priority an upload gets: urgent only from a
// device or router whose token allows it (auth.Principal.Urgent); anyone
// else's urgent is taken as normal, and the answer says so. Urgent work
// takes 60 % of every GPU: a device that may not send it cannot jump
// the queue of every campus by asking.
func AllowedPriority(c echo.Context, p exam.Priority) exam.Priority {
	if p != exam.Urgent || auth.Of(c).Urgent {
		return p
	}
	c.Response().Header().Set(WarningHeader, "urgent is not this device's to send (its token does not allow it): taken as normal")
	return exam.Normal
}
