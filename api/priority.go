package api

import (
	"slices"
	"sync"
	"time"

	"octflow/exam"
)

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
