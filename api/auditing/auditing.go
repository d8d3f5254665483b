// Package auditing records the gateway's access decisions: one IHE ATNA
// audit event (package audit) per decision, allowed or refused.
//
// Every access decision of the gateway goes to the audit trail
// (api.Config.AuditTrail): each request to /v1, /dicom-web and /codec is
// written there, allowed or refused, 401 included, just before its
// answer's status is written (echo's Response.Before), so a crash right
// after answering cannot lose it. When the trail cannot take the entry,
// an answer that would allow something is replaced by 503: nothing is
// served without its audit entry. Handlers add what only they know
// (which exam, what was done) with Note; the decision's outcome is the
// status written.
package auditing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/audit"
	"octflow/exam"
)

// Config is what the recorder needs of the gateway.
type Config struct {
	// Trail takes the entries.
	Trail audit.Sink
	// Tokens judge a request's caller before its route does (Admit).
	Tokens *auth.Tokens
	// ExamRef is the exam a request names by id within campus
	// (the gateway's pseudonyms), for a request refused before its
	// handler resolved it.
	ExamRef func(campus, id string) exam.Ref
	// MaxExams is the most exams one request may name (a STOW-RS
	// request's instances): an action asks the trail for room for them.
	MaxExams int
	Logger   *zap.Logger
	// Now is the clock the rate of entries without credentials runs on
	// (nil: time.Now).
	Now func() time.Time
}

// Recorder writes each audited request's decision before its answer.
type Recorder struct {
	cfg Config
	// anonymous is each client's rate of entries without credentials.
	anonymous *anonymousRate
}

// New builds the recorder.
func New(cfg Config) *Recorder {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Recorder{cfg: cfg, anonymous: newAnonymousRate(cfg.Trail, now)}
}

const (
	auditNoteKey       = "octflow.audit"
	clientRequestIDKey = "octflow.clientRequestId"
)

// auditNote is what a request's handlers tell the trail before the
// answer goes out.
type auditNote struct {
	action string
	refs   []exam.Ref
	reason string
	// details are what the handler adds to the request's object (no
	// patient data).
	details []audit.Detail
	who     *auth.Principal // who was refused before the request had a principal
	err     error           // the handler's error, for its detail
	cancel  context.CancelFunc
	done    bool
}

// Note notes that the request did action to ref (ref may be zero, or a
// campus only). The entry is written when the answer's status is, with
// that status.
func Note(c echo.Context, action string, ref exam.Ref) {
	n := note(c)
	if n == nil {
		return
	}
	n.action = action
	if ref != (exam.Ref{}) {
		n.refs = append(n.refs, ref)
	}
}

// Detail adds a detail of what was done to the request's entry, as the
// request object's ParticipantObjectDetail: a value that names no
// patient (a run ID, a digest), never free text a user typed.
func Detail(c echo.Context, typ, value string) {
	if n := note(c); n != nil {
		n.details = append(n.details, audit.Detail{Type: typ, Value: value})
	}
}

// Refused notes why a request is refused (no patient data), and who was
// refused when the principal is not the request's yet.
func Refused(c echo.Context, reason string, who *auth.Principal) {
	if n := note(c); n != nil {
		n.reason, n.who = reason, who
	}
}

// Probe notes that a request named an exam of a campus the caller may
// not see; it is answered 404 like a missing exam, and audited as a
// refusal naming that campus.
func Probe(c echo.Context, ref exam.Ref) {
	if n := note(c); n != nil {
		n.reason = "campus not permitted"
		n.refs = append(n.refs, ref)
	}
}

func note(c echo.Context) *auditNote {
	n, _ := c.Get(auditNoteKey).(*auditNote)
	return n
}

// RequestIDs gives each request an ID of the server's own, from newID
// (the X-Request-ID answered and logged); a client's X-Request-ID is
// kept apart, bounded, for the audit entry only.
func RequestIDs(newID func() string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(clientRequestIDKey, boundedClientID(c.Request().Header.Get(echo.HeaderXRequestID)))
			c.Response().Header().Set(echo.HeaderXRequestID, newID())
			return next(c)
		}
	}
}

// boundedClientID keeps a client's request ID when it is at most 64
// characters of [A-Za-z0-9._:-]; anything else is dropped.
func boundedClientID(id string) string {
	if len(id) > 64 {
		return ""
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			return ""
		}
	}
	return id
}

// audited says whether a request is an access decision: the API and the
// codec, not health checks, the OpenAPI document or CORS preflights.
func audited(c echo.Context) bool {
	p := c.Path()
	return c.Request().Method != http.MethodOptions &&
		(strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/codec/") || strings.HasPrefix(p, "/dicom-web/")) &&
		!(c.Request().Method == http.MethodGet && p == "/codec/login")
}

// Middleware writes each audited request's decision before its answer.
func (r *Recorder) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !audited(c) {
			return next(c)
		}
		ctx, cancel := context.WithCancel(c.Request().Context())
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		n := &auditNote{cancel: cancel}
		c.Set(auditNoteKey, n)
		c.Response().Before(func() { r.recordDecision(c, n) })
		if err := r.admitAction(c); err != nil {
			n.err = err
			return err
		}
		err := next(c)
		n.err = err
		return err
	}
}

// An audit entry of one decision takes about 2 KiB; a STOW-RS request's
// names every exam it stored (about 400 bytes each). An action is
// admitted with room for its own entry and those of a few others acting
// at the same time (Admit reserves nothing).
const (
	entryBytes    = 2 << 10
	examBytes     = 400
	actionsAtOnce = 4
)

// admitNeed is the room an action asks the audit trail for.
func (r *Recorder) admitNeed(c echo.Context) int64 {
	need := int64(entryBytes)
	if routeAction(c.Request().Method, c.Path()) == "store-instances" {
		need += int64(r.cfg.MaxExams) * examBytes
	}
	return need * actionsAtOnce
}

// admitAction refuses, before anything is done, a request that acts (a
// submission, a review, a rerun, a breaker reset, a codec sign-in or
// encoding) while the audit trail could not record it: otherwise the
// action would be taken and only its answer turned into a 503. Reads
// are refused at their answer (recordDecision), which they have not yet
// given.
func (r *Recorder) admitAction(c echo.Context) error {
	a, ok := r.cfg.Trail.(audit.Admitter)
	if !ok || c.Request().Method == http.MethodGet || routeAction(c.Request().Method, c.Path()) == "codec-decode" {
		return nil
	}
	// Authentication comes later, in the route; the caller's share of
	// the trail is judged by the token the request carries.
	var who audit.User
	if p, ok := r.cfg.Tokens.Bearer(c.Request()); ok {
		who = audit.User{ID: p.Name, Role: string(p.Role)}
	}
	if err := a.Admit(who, r.admitNeed(c)); err != nil {
		r.cfg.Logger.Error("audit trail cannot record an action; refusing it", zap.String("route", c.Path()), zap.Error(err))
		c.Response().Header().Set("Retry-After", "30")
		return problems.New(http.StatusServiceUnavailable, "unavailable", "the audit trail cannot record this request; retry later")
	}
	return nil
}

// recordDecision writes the entry; if the trail refuses it, an answer
// that allows is turned into a 503 and the handler is cancelled.
func (r *Recorder) recordDecision(c echo.Context, n *auditNote) {
	if n.done {
		return
	}
	n.done = true
	res := c.Response()
	ev := r.auditEvent(c, n, res.Status)
	if ev.Unauthenticated && !r.anonymous.admit(c, ev) {
		return // counted: the client is over its rate of entries without credentials
	}
	err := r.cfg.Trail.Record(ev)
	if err == nil {
		return
	}
	r.cfg.Logger.Error("audit trail refused an entry", zap.String("route", c.Path()), zap.Int("status", res.Status), zap.Error(err))
	if res.Status >= 400 {
		return // a refusal stays one
	}
	n.cancel()
	p := problems.New(http.StatusServiceUnavailable, "unavailable", "the audit trail cannot record this request; retry later")
	p.Instance = problems.Instance(c)
	body, _ := json.Marshal(p)
	h := res.Header()
	h.Del(echo.HeaderContentLength)
	h.Del(echo.HeaderContentEncoding)
	h.Set(echo.HeaderContentType, "application/problem+json")
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	h.Set("Retry-After", "30")
	res.Status = http.StatusServiceUnavailable
	res.Writer = &withheld{ResponseWriter: res.Writer, body: body}
}

// withheld answers a problem in place of a response whose audit entry
// could not be written, and drops whatever the handler writes.
type withheld struct {
	http.ResponseWriter
	body []byte
}

func (w *withheld) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	_, _ = w.ResponseWriter.Write(w.body)
}
func (w *withheld) Write(b []byte) (int, error) { return len(b), nil }
func (w *withheld) Flush()                      {}
func (w *withheld) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditEvent is the decision as a DICOM audit event.
func (r *Recorder) auditEvent(c echo.Context, n *auditNote, status int) audit.Event {
	action := n.action
	if action == "" {
		action = routeAction(c.Request().Method, c.Path())
	}
	kind := actionEvent(action)
	who := auth.Of(c)
	if who.Name == "" && n.who != nil {
		who = *n.who
	}
	// A request no credential identified (no token, an unknown one, a
	// route or method refused before authentication) shares the spool's
	// bounded part for those: anyone can send them.
	ev := audit.Event{ID: kind.id, Types: kind.types, Action: kind.action, Outcome: outcome(status),
		User:            audit.User{ID: who.Name, Role: string(who.Role), Address: remoteIP(c.Request())},
		Unauthenticated: who.Role == ""}
	if status == http.StatusUnauthorized {
		ev.ID, ev.Types, ev.Action = audit.UserAuthenticated, []audit.Code{audit.Login}, audit.Execute
		ev.User.ID = "unauthenticated"
	}
	ev.Description = strconv.Itoa(status) + " " + http.StatusText(status)
	reason := n.reason
	var p *problems.Problem
	if reason == "" && errors.As(n.err, &p) && status >= 400 {
		reason = p.Detail
	}
	if reason != "" {
		ev.Description += ": " + reason
	}
	req := audit.Object{ID: c.Request().Method + " " + c.Path(), Type: 2,
		IDType: audit.Code{Code: "route", System: "octflow", Meaning: "API route"},
		Details: []audit.Detail{{Type: "action", Value: action}, {Type: "status", Value: strconv.Itoa(status)},
			{Type: "requestId", Value: c.Response().Header().Get(echo.HeaderXRequestID)}}}
	if id, _ := c.Get(clientRequestIDKey).(string); id != "" {
		req.Details = append(req.Details, audit.Detail{Type: "clientRequestId", Value: id})
	}
	req.Details = append(req.Details, n.details...)
	ev.Objects = append(ev.Objects, req)
	refs := n.refs
	if len(refs) == 0 {
		// Refused before the handler resolved the exam: the exam the
		// request named, by its reference in the campus it named or the
		// caller's; with neither known, its reference under no campus.
		if id := c.Param("examId"); id != "" && exam.ValidateID(id) == nil {
			campus := who.Campus
			if q := c.QueryParam("campus"); exam.ValidateCampus(q) == nil {
				campus = q
			}
			refs = []exam.Ref{r.cfg.ExamRef(campus, id)}
		}
	}
	for _, ref := range refs {
		ev.Objects = append(ev.Objects, examObject(ref, kind.role))
	}
	return ev
}

func examObject(ref exam.Ref, role int) audit.Object {
	if ref.ID == "" {
		return audit.Object{ID: ref.Campus, Type: 3, Role: 2, IDType: audit.Code{Code: "campus", System: "octflow", Meaning: "Campus"}}
	}
	return audit.Object{ID: ref.Campus + "/" + ref.ID, Type: 2, Role: role,
		IDType: audit.Code{Code: "exam", System: "octflow", Meaning: "Exam (campus/exam ID)"}}
}

// eventKind is how an action is described in DICOM's terms.
type eventKind struct {
	id     audit.Code
	types  []audit.Code
	action audit.Action
	role   int // the exam object's ParticipantObjectTypeCodeRole
}

// Participant object roles (PS3.15 A.5.1.2.2).
const (
	roleReport = 3
	roleJob    = 20
)

// actionEvent maps the gateway's actions to DICOM audit events.
func actionEvent(action string) eventKind {
	switch action {
	case "submit", "store-instances":
		return eventKind{id: audit.InstancesTransferred, action: audit.Create, role: roleJob}
	case "read-status", "read-events":
		return eventKind{id: audit.PatientRecord, action: audit.Read, role: roleJob}
	case "read-report":
		return eventKind{id: audit.PatientRecord, action: audit.Read, role: roleReport}
	case "review":
		return eventKind{id: audit.PatientRecord, action: audit.Update, role: roleReport}
	case "rerun":
		return eventKind{id: audit.PatientRecord, action: audit.Execute, types: []audit.Code{audit.UseOfRestrictedFunction}, role: roleJob}
	case "notifications", "list-nodes", "list-queues":
		return eventKind{id: audit.Query, action: audit.Execute}
	case "codec-decode", "codec-decode-system":
		return eventKind{id: audit.Export, action: audit.Read}
	case "codec-encode", "codec-encode-system":
		return eventKind{id: audit.Import, action: audit.Create}
	case "codec-login", "codec-logout":
		return eventKind{id: audit.UserAuthenticated, types: []audit.Code{audit.Login}, action: audit.Execute}
	}
	// Admin actions, and any route added without an entry here.
	return eventKind{id: audit.SecurityAlert, types: []audit.Code{audit.UseOfRestrictedFunction}, action: audit.Execute}
}

// routeAction is a route's action when its handler named none (it was
// refused before, or does not call audit).
func routeAction(method, path string) string {
	switch method + " " + path {
	case "POST /v1/exams":
		return "submit"
	case "POST /dicom-web/studies", "POST /dicom-web/studies/:study":
		return "store-instances"
	case "GET /v1/exams/:examId":
		return "read-status"
	case "GET /v1/exams/:examId/events":
		return "read-events"
	case "GET /v1/exams/:examId/report":
		return "read-report"
	case "POST /v1/exams/:examId/review":
		return "review"
	case "POST /v1/exams/:examId/rerun":
		return "rerun"
	case "GET /v1/notifications":
		return "notifications"
	case "GET /v1/nodes":
		return "list-nodes"
	case "GET /v1/queues":
		return "list-queues"
	case "POST /v1/nodes/:nodeId/breaker/reset":
		return "reset-breaker"
	case "POST /codec/decode":
		return "codec-decode"
	case "POST /codec/encode":
		return "codec-encode"
	case "POST /codec/login":
		return "codec-login"
	case "POST /codec/logout":
		return "codec-logout"
	}
	return strings.ToLower(method) + " " + path
}

// outcome maps an answer's status to an EventOutcomeIndicator: allowed
// and done, refused (4xx), failed (5xx).
func outcome(status int) audit.Outcome {
	switch {
	case status < 400:
		return audit.Success
	case status < 500:
		return audit.MinorFailure
	}
	return audit.SeriousFailure
}

// remoteIP is the peer's address as the connection shows it (never a
// forwarding header a client could write).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// anonymousRate bounds how many entries without credentials one client
// (an IPv4 address, an IPv6 /64: auth.ClientOf) writes one by one: anyone can
// send such requests, and they share one bounded part of the trail's
// spool (audit.Trail.Record), which one client must not take alone. Past
// its rate a client's requests are answered as before and counted, and
// the trail gets a Security Alert with the count: on the first one
// counted, every countEvery after it, and before the client's next entry
// written one by one.
type anonymousRate struct {
	limit *auth.Failures
	trail audit.Sink
	now   func() time.Time

	mu      sync.Mutex
	counted map[netip.Prefix]int
}

const (
	anonymousBurst = 20
	anonymousEvery = 100 * time.Millisecond // 10 a second
	countEvery     = 1000
	// anonymousClients bounds the clients tracked.
	anonymousClients = 10_000
)

func newAnonymousRate(trail audit.Sink, now func() time.Time) *anonymousRate {
	return &anonymousRate{limit: auth.NewFailures(anonymousBurst, anonymousEvery, anonymousClients), trail: trail, now: now,
		counted: map[netip.Prefix]int{}}
}

// admit says whether ev, an entry without credentials from c's client,
// is written one by one; if not, it is counted.
func (a *anonymousRate) admit(c echo.Context, ev audit.Event) bool {
	client, now := auth.ClientOf(c.Request()), a.now()
	over := a.limit.Wait(client, now) > 0
	if !over {
		a.limit.Fail(client, now)
	}
	a.mu.Lock()
	n := a.counted[client]
	if over {
		n++
		a.counted[client] = n
	} else {
		delete(a.counted, client)
	}
	if len(a.counted) > anonymousClients { // bounded: forget the smallest counts' clients
		for k, v := range a.counted {
			if v < n {
				delete(a.counted, k)
				break
			}
		}
	}
	a.mu.Unlock()
	if (over && n%countEvery == 1) || (!over && n > 0) {
		_ = a.trail.Record(audit.Event{ID: audit.SecurityAlert, Types: []audit.Code{audit.UseOfRestrictedFunction},
			Action: audit.Execute, Outcome: audit.MinorFailure, Unauthenticated: true,
			Description: fmt.Sprintf("%d requests without credentials from this client, over %d a second, were counted, not recorded one by one",
				n, int(time.Second/anonymousEvery)),
			User: audit.User{ID: "unauthenticated", Address: ev.User.Address}})
	}
	return !over
}
