package auditing

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/problems"
	"octflow/audit"
	"octflow/exam"
)

// sinkFunc is a trail that hands each entry to a function.
type sinkFunc func(audit.Event) error

func (f sinkFunc) Record(ev audit.Event) error { return f(ev) }

// TestAnActionAsksRoomForEveryExamItMayName: a STOW-RS request asks the
// trail for room for the entries of every exam it may store, another
// action for its own.
func TestAnActionAsksRoomForEveryExamItMayName(t *testing.T) {
	const exams = 64
	r := New(Config{MaxExams: exams})
	need := func(path string) int64 {
		c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, path, nil), httptest.NewRecorder())
		c.SetPath(path)
		return r.admitNeed(c)
	}
	submit, stow := need("/v1/exams"), need("/dicom-web/studies")
	if submit != entryBytes*actionsAtOnce || stow != (entryBytes+exams*examBytes)*actionsAtOnce {
		t.Errorf("room asked: %d for a submission, %d for a STOW-RS request of up to %d exams", submit, stow, exams)
	}
}

func TestOneClientWithoutCredentialsCannotTakeTheTrailsSharedPart(t *testing.T) {
	var events []audit.Event
	trail := sinkFunc(func(ev audit.Event) error { events = append(events, ev); return nil })
	e := echo.New()
	e.HTTPErrorHandler = problems.Handler(zap.NewNop())
	// The burst arrives at one instant: on the wall clock a slow run
	// (the race detector beside a compose build) refilled the bucket
	// mid-burst and let 27 entries through.
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	e.Use(New(Config{Trail: trail, ExamRef: func(campus, id string) exam.Ref { return exam.Ref{Campus: campus, ID: id} },
		Logger: zap.NewNop(), Now: func() time.Time { return at }}).Middleware)
	e.POST("/v1/exams", func(c echo.Context) error { return c.NoContent(http.StatusAccepted) })
	from := func(addr string, n int) {
		for range n {
			req := httptest.NewRequest(http.MethodPut, "/v1/exams", nil) // 405, no token
			req.RemoteAddr = addr
			e.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	from("198.51.100.7:4000", 500)
	flood := len(events)
	var alert string
	for _, ev := range events {
		if ev.ID == audit.SecurityAlert && strings.Contains(ev.Description, "counted, not recorded one by one") {
			alert = ev.Description
		}
	}
	if flood != anonymousBurst+1 {
		t.Errorf("one client without credentials wrote %d entries one by one in a burst, want %d and the alert counting the rest", flood, anonymousBurst)
	}
	if !strings.Contains(alert, "1 requests without credentials") {
		t.Errorf("no alert counting the client's requests: %q", alert)
	}
	// Another client is not held back by the first.
	from("203.0.113.9:4000", 5)
	if got := len(events) - flood; got != 5 {
		t.Errorf("another client's 5 requests wrote %d entries, want 5", got)
	}
}
