package api

import (
	"slices"
	"sync"
	"time"

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

// campusWindow is how lately a campus must have sent an exam to share the
// normal and low buckets: a campus that sends nothing takes no part, so
// a campus alone at night has its buckets whole (decision 0023).
const campusWindow = 30 * time.Minute

// campusActivity remembers when each campus last sent an exam. The
// campuses are those of upload tokens, so it holds at most one entry
// each.
type campusActivity struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newCampusActivity() *campusActivity {
	return &campusActivity{last: map[string]time.Time{}}
}

// sharing records that campus sends an exam at now and returns the
// campuses that sent one within campusWindow, campus among them, sorted:
// those whose parts of the buckets the exam's part is taken among
// (exam.Policy.ForCampus).
func (a *campusActivity) sharing(campus string, now time.Time) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[campus] = now
	out := make([]string, 0, len(a.last))
	for c, at := range a.last {
		if now.Sub(at) > campusWindow {
			delete(a.last, c)
			continue
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// policyFor is the policy a new exam (or a rerun) of campus runs under.
func (s *Server) policyFor(campus string) exam.Policy {
	return s.cfg.Policy.ForCampus(campus, s.sharing.sharing(campus, time.Now()))
}
