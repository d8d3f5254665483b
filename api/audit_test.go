package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/audit"
)

// recordingTrail keeps the events it takes; fail makes it refuse them.
type recordingTrail struct {
	mu     sync.Mutex
	events []audit.Event
	// answered says, per event, whether the answer's status had been
	// written when the event was recorded.
	answered []bool
	w        *watchedWriter
	fail     error
	// admit is what Admit answers; acted counts the test action's runs.
	admit error
	acted int
	needs []int64 // what each Admit asked for
}

func (r *recordingTrail) Admit(_ audit.User, need int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.needs = append(r.needs, need)
	return r.admit
}

func (r *recordingTrail) Record(ev audit.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.events = append(r.events, ev)
	r.answered = append(r.answered, r.w != nil && r.w.wroteHeader)
	return nil
}

// watchedWriter notes when the status goes out.
type watchedWriter struct {
	*httptest.ResponseRecorder
	wroteHeader bool
}

func (w *watchedWriter) WriteHeader(code int) {
	w.wroteHeader = true
	w.ResponseRecorder.WriteHeader(code)
}

func auditedServer(t *testing.T, trail *recordingTrail) *Server {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev-north"), Principal: auth.Principal{Name: "oct-1", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("dr-north"), Principal: auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, AuditTrail: trail})
	// An action that needs no Temporal: what postReview does.
	srv.echo.POST("/v1/test/:examId/review", func(c echo.Context) error {
		trail.mu.Lock()
		trail.acted++
		trail.mu.Unlock()
		return c.String(http.StatusOK, "recorded")
	}, require(tokens, auth.RoleClinician))
	// A report read that needs no Temporal: what getReport does.
	srv.echo.GET("/v1/test/:examId/report", func(c echo.Context) error {
		s := srv
		auditing.Note(c, "read-report", s.cfg.Pseudonymizer.ExamRef("north", c.Param("examId")))
		return c.String(http.StatusOK, "the report")
	}, require(tokens, auth.RoleClinician))
	// A handler that says what it did beyond its action: what the
	// supersede's rerun adds.
	srv.echo.POST("/v1/test/:examId/supersede", func(c echo.Context) error {
		auditing.Note(c, "rerun", srv.cfg.Pseudonymizer.ExamRef("north", c.Param("examId")))
		auditing.Detail(c, "supersedes", "run-1")
		auditing.Detail(c, "reasonSha256", reasonDigest("wrong eye"))
		return c.String(http.StatusAccepted, "started")
	}, require(tokens, auth.RoleClinician))
	return srv
}

// A handler's details reach the request's entry, beside its action: a
// supersede names the replaced run and the reason's digest, never the
// reason.
func TestAHandlersDetailsAreAudited(t *testing.T) {
	trail := &recordingTrail{}
	srv := auditedServer(t, trail)
	if w := call(srv, trail, "POST", "/v1/test/e7/supersede", "dr-north"); w.Code != http.StatusAccepted {
		t.Fatalf("status %d", w.Code)
	}
	if len(trail.events) != 1 {
		t.Fatalf("%d audit events, want 1", len(trail.events))
	}
	req := trail.events[0].Objects[0]
	if detail(req, "action") != "rerun" || detail(req, "supersedes") != "run-1" || len(detail(req, "reasonSha256")) != 16 {
		t.Errorf("the entry's details are %+v", req.Details)
	}
	for _, d := range req.Details {
		if strings.Contains(d.Value, "wrong eye") {
			t.Errorf("the reason is in the entry: %+v", d)
		}
	}
}

func call(srv *Server, trail *recordingTrail, method, target, token string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = "192.0.2.10:5555"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := &watchedWriter{ResponseRecorder: httptest.NewRecorder()}
	trail.mu.Lock()
	trail.w = w
	trail.mu.Unlock()
	srv.ServeHTTP(w, req)
	return w.ResponseRecorder
}

func detail(o audit.Object, typ string) string {
	for _, d := range o.Details {
		if d.Type == typ {
			return d.Value
		}
	}
	return ""
}

func TestEveryAccessDecisionIsAuditedBeforeItIsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name, method, target, token string
		status                      int
		event                       audit.Code
		outcome                     audit.Outcome
		user, object, reason        string
	}{
		{"no token", "GET", "/v1/exams/e1/report", "", 401, audit.UserAuthenticated, audit.MinorFailure, "unauthenticated", "/e1", "missing bearer token"},
		{"an unknown token", "GET", "/v1/exams/e1/report", "guess", 401, audit.UserAuthenticated, audit.MinorFailure, "unauthenticated", "/e1", "unknown token"},
		{"a submission without a token", "POST", "/v1/exams", "", 401, audit.UserAuthenticated, audit.MinorFailure, "unauthenticated", "", ""},
		{"a device reading a report", "GET", "/v1/exams/e1/report", "dev-north", 403, audit.PatientRecord, audit.MinorFailure, "oct-1", "north/e1", "role device not permitted"},
		{"a probe of another campus's exam", "GET", "/v1/exams/e1/report?campus=south", "dr-north", 404, audit.PatientRecord, audit.MinorFailure, "dr-lee", "south/e1", "campus not permitted"},
		{"a probe of another campus's exam status", "GET", "/v1/exams/e1?campus=south", "dev-north", 404, audit.PatientRecord, audit.MinorFailure, "oct-1", "south/e1", "campus not permitted"},
		{"an admin action without the role", "POST", "/v1/nodes/n1/breaker/reset", "dr-north", 403, audit.SecurityAlert, audit.MinorFailure, "dr-lee", "", "role clinician not permitted"},
		{"a report read", "GET", "/v1/test/e7/report", "dr-north", 200, audit.PatientRecord, audit.Success, "dr-lee", "north/e7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trail := &recordingTrail{}
			srv := auditedServer(t, trail)
			w := call(srv, trail, tc.method, tc.target, tc.token)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if len(trail.events) != 1 {
				t.Fatalf("%d audit events, want 1", len(trail.events))
			}
			ev := trail.events[0]
			if trail.answered[0] {
				t.Error("the event was recorded after the answer's status went out")
			}
			if ev.ID != tc.event || ev.Outcome != tc.outcome || ev.User.ID != tc.user || ev.User.Address != "192.0.2.10" {
				t.Errorf("event %s outcome %d user %q from %q; want %s %d %q", ev.ID.Meaning, ev.Outcome, ev.User.ID, ev.User.Address,
					tc.event.Meaning, tc.outcome, tc.user)
			}
			if !strings.Contains(ev.Description, tc.reason) {
				t.Errorf("description %q does not say %q", ev.Description, tc.reason)
			}
			// Exams are named by their references, never by the
			// device's exam ID, which may be an identifier.
			var objects []string
			for _, o := range ev.Objects[1:] {
				objects = append(objects, o.ID)
			}
			want := tc.object
			if campus, id, ok := strings.Cut(tc.object, "/"); ok {
				want = srv.cfg.Pseudonymizer.ExamRef(campus, id).String()
			}
			if got := strings.Join(objects, ","); got != want {
				t.Errorf("exam objects %q, want %q (%s)", got, want, tc.object)
			}
			if got := detail(ev.Objects[0], "requestId"); got == "" || got != w.Header().Get(echo.HeaderXRequestID) {
				t.Errorf("requestId %q, answered %q", got, w.Header().Get(echo.HeaderXRequestID))
			}
		})
	}
}

func TestRequestIDsAreTheServersOwn(t *testing.T) {
	for _, tc := range []struct{ sent, kept string }{
		{"trace-42.a:b", "trace-42.a:b"},
		{"has space", ""},
		{strings.Repeat("x", 65), ""},
		{"<script>", ""},
	} {
		trail := &recordingTrail{}
		srv := auditedServer(t, trail)
		w := call(srv, trail, "GET", "/v1/test/e7/report", "dr-north", "X-Request-ID", tc.sent)
		got := w.Header().Get(echo.HeaderXRequestID)
		if got == "" || got == tc.sent {
			t.Errorf("sent %q: answered request ID %q, want one of the server's", tc.sent, got)
		}
		req := trail.events[0].Objects[0]
		if detail(req, "requestId") != got || detail(req, "clientRequestId") != tc.kept {
			t.Errorf("sent %q: audited requestId %q clientRequestId %q, want %q and %q", tc.sent,
				detail(req, "requestId"), detail(req, "clientRequestId"), got, tc.kept)
		}
	}
}

func TestNothingIsServedWithoutItsAuditEntry(t *testing.T) {
	trail := &recordingTrail{fail: audit.ErrSpoolFull}
	srv := auditedServer(t, trail)
	w := call(srv, trail, "GET", "/v1/test/e7/report", "dr-north")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || strings.Contains(w.Body.String(), "the report") {
		t.Fatalf("an allowed read the trail refused: %d %q, want 503 with Retry-After and no report", w.Code, w.Body)
	}
	var p problems.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != http.StatusServiceUnavailable {
		t.Errorf("body %q is not a 503 problem: %v", w.Body, err)
	}
	// A refusal stays the refusal it was.
	if w := call(srv, trail, "GET", "/v1/test/e7/report", ""); w.Code != http.StatusUnauthorized {
		t.Errorf("a refused request the trail refused: %d, want 401", w.Code)
	}
	// Health checks are no access decision.
	trail.fail = nil
	call(srv, trail, "GET", "/healthz", "")
	if len(trail.events) != 0 {
		t.Errorf("health check audited: %+v", trail.events)
	}
}

// An action the trail could not record is refused before it is taken,
// not after; a read is still answered while its entry can be written.
func TestNoActionIsTakenThatTheTrailCouldNotRecord(t *testing.T) {
	trail := &recordingTrail{admit: audit.ErrSpoolFull}
	srv := auditedServer(t, trail)
	w := call(srv, trail, "POST", "/v1/test/e7/review", "dr-north")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || trail.acted != 0 {
		t.Fatalf("an action the trail could not admit: %d %q, acted %d times; want 503, Retry-After, not acted", w.Code, w.Body, trail.acted)
	}
	if len(trail.events) != 1 || trail.events[0].Outcome == audit.Success {
		t.Errorf("the refusal's entry: %+v", trail.events)
	}
	if w := call(srv, trail, "GET", "/v1/test/e7/report", "dr-north"); w.Code != http.StatusOK {
		t.Errorf("a read whose entry can be written: %d, want 200", w.Code)
	}
	trail.admit = nil
	if w := call(srv, trail, "POST", "/v1/test/e7/review", "dr-north"); w.Code != http.StatusOK || trail.acted != 1 {
		t.Errorf("an admitted action: %d, acted %d times; want 200 and 1", w.Code, trail.acted)
	}
	// A STOW-RS request asks for room for every exam it may store (how
	// much: package auditing's tests).
	call(srv, trail, "POST", "/dicom-web/studies", "dev-north")
	if n := trail.needs; len(n) != 3 || n[2] <= n[0] {
		t.Errorf("room asked: %v; want a STOW-RS request to ask for its %d exams too", n, intake.MaxInstances)
	}
}
