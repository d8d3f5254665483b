package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/contract"
)

// StreamLimits bound the event streams (GET /v1/notifications) the
// gateway holds open. Zero fields take the defaults.
type StreamLimits struct {
	// Total bounds the streams open at once, all tokens together
	// (default 256); PerToken bounds one token's (default 8). Over
	// either a stream is refused 429 with Retry-After.
	Total    int
	PerToken int
	// RetryAfter is what a refused client is told to wait (default 15 s).
	RetryAfter time.Duration
	// WriteTimeout bounds one write to a stream: a client that stops
	// reading is let go (default 30 s).
	WriteTimeout time.Duration
}

// withDefaults fills the zero fields.
func (l StreamLimits) withDefaults() StreamLimits {
	l.Total = cmp.Or(max(l.Total, 0), 256)
	l.PerToken = cmp.Or(max(l.PerToken, 0), 8)
	l.RetryAfter = cmp.Or(l.RetryAfter, 15*time.Second)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, 30*time.Second)
	return l
}

// keepaliveEvery is how often an idle stream sends a comment, so that
// proxies keep it open and a client that has gone is noticed.
const keepaliveEvery = 15 * time.Second

// notifications serves GET /v1/notifications: a Server-Sent Events stream
// of report-ready events for one campus (?campus=, default the token's).
// Events come from the campus's inbox workflow, so the stream survives
// api restarts: a client that reconnects with Last-Event-ID gets every
// event after it. Without Last-Event-ID the stream starts with the
// events the inbox still holds (its last 1000).
//
// Streams are few and cheap: a token may hold StreamLimits.PerToken of
// them and the gateway StreamLimits.Total, and all the streams of a
// campus are fed by one reading of its inbox per poll interval (a hub),
// whatever their number.
func (s *Server) notifications(c echo.Context) error {
	who := auth.Of(c)
	campus := c.QueryParam("campus")
	if campus == "" {
		campus = who.Campus
	}
	if campus == "" {
		return problems.New(http.StatusBadRequest, "malformed-request", "campus is required (?campus=)")
	}
	if !campusAllowed(who, campus) {
		// Not 403: nobody learns which campuses exist.
		return problems.New(http.StatusNotFound, "not-found", "no such campus")
	}
	var last int64
	if h := c.Request().Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return problems.New(http.StatusBadRequest, "malformed-request", "Last-Event-ID must be an event number")
		}
		last = n
	}
	leave, err := s.notify.admit(tokenKey(c))
	if err != nil {
		c.Response().Header().Set("Retry-After", problems.RetryAfter(s.notify.limits.RetryAfter))
		return err
	}
	defer leave()
	hub, unsubscribe := s.notify.subscribe(campus)
	defer unsubscribe()

	w := c.Response()
	// A stream outlives the server's write timeout: each write has a
	// deadline of its own instead, so a client that stops reading is let
	// go. (The server's read timeout ends with the request's headers
	// when, as here, there is no body.)
	rc := http.NewResponseController(w.Writer)
	send := func(write func() error) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.notify.limits.WriteTimeout))
		if err := write(); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
		return rc.SetWriteDeadline(time.Time{})
	}
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // no proxy buffering
	if err := send(func() error { w.WriteHeader(http.StatusOK); return nil }); err != nil && !isNotSupported(err) {
		return nil // the client went away
	}

	ctx := c.Request().Context()
	keepalive := time.NewTicker(keepaliveEvery)
	defer keepalive.Stop()
	for {
		events, changed := hub.since(last)
		if len(events) > 0 {
			err := send(func() error {
				for _, e := range events {
					data, err := json.Marshal(e)
					if err != nil {
						return err
					}
					if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind.Name(), data); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil && !isNotSupported(err) {
				return nil // the client went away or stopped reading
			}
			last = events[len(events)-1].Seq
		}
		select {
		case <-ctx.Done():
			return nil
		case <-keepalive.C:
			if err := send(func() error { _, err := fmt.Fprint(w, ": keepalive\n\n"); return err }); err != nil && !isNotSupported(err) {
				return nil
			}
		case <-changed:
		}
	}
}

// isNotSupported reports a deadline the response writer cannot take (a
// test's recorder); the stream goes on without it.
func isNotSupported(err error) bool { return errors.Is(err, http.ErrNotSupported) }

// tokenKey names the credential a request came with, for per-token
// limits: the hash of its bearer token, or else its principal's name.
func tokenKey(c echo.Context) string {
	if token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer "); ok && token != "" {
		return "token:" + auth.HashToken(strings.TrimSpace(token))
	}
	return "principal:" + auth.Of(c).Name
}

// inboxReader reads a campus inbox's events after a sequence number.
type inboxReader func(ctx context.Context, campus string, after int64) ([]contract.ReportReadyEvent, error)

// notifier admits event streams and runs one hub per campus that has
// streams.
type notifier struct {
	limits StreamLimits
	poll   time.Duration
	read   inboxReader
	log    *zap.Logger

	mu       sync.Mutex
	total    int
	perToken map[string]int
	hubs     map[string]*hub
}

func newNotifier(limits StreamLimits, poll time.Duration, read inboxReader, log *zap.Logger) *notifier {
	return &notifier{limits: limits.withDefaults(), poll: poll, read: read, log: log,
		perToken: map[string]int{}, hubs: map[string]*hub{}}
}

// admit takes a place for one more stream of token, or answers 429. The
// caller calls leave once the stream ends.
func (n *notifier) admit(token string) (leave func(), err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.perToken[token] >= n.limits.PerToken:
		return nil, problems.New(http.StatusTooManyRequests, "rate-limited",
			fmt.Sprintf("this token already holds %d event streams", n.limits.PerToken))
	case n.total >= n.limits.Total:
		return nil, problems.New(http.StatusTooManyRequests, "rate-limited",
			fmt.Sprintf("the gateway already serves %d event streams", n.limits.Total))
	}
	n.perToken[token]++
	n.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.total--
			if n.perToken[token]--; n.perToken[token] <= 0 {
				delete(n.perToken, token)
			}
		})
	}, nil
}

// subscribe joins campus's hub, starting it for the first subscriber;
// unsubscribe stops it after the last.
func (n *notifier) subscribe(campus string) (h *hub, unsubscribe func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h = n.hubs[campus]
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &hub{campus: campus, cancel: cancel, changed: make(chan struct{}), done: make(chan struct{})}
		n.hubs[campus] = h
		go n.run(ctx, h)
	}
	h.subscribers++
	var once sync.Once
	return h, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if h.subscribers--; h.subscribers == 0 {
				delete(n.hubs, campus)
				h.cancel()
			}
		})
	}
}

// hubKeep is how many events a hub keeps: as many as the inbox does, so
// a stream resuming from an old Last-Event-ID gets what a query of the
// inbox would give it.
const hubKeep = 1000

// hub holds what one campus's inbox held at its last reading, for every
// stream of that campus.
type hub struct {
	campus string
	cancel context.CancelFunc
	done   chan struct{} // closed when the hub's poll has stopped
	// subscribers is guarded by the notifier's mu.
	subscribers int

	mu      sync.Mutex
	events  []contract.ReportReadyEvent // in Seq order
	read    bool                        // the inbox was read at least once
	changed chan struct{}               // closed when events grow (or on the first reading)
}

// run reads the campus's inbox at once and then every poll interval,
// until the hub's last subscriber leaves.
func (n *notifier) run(ctx context.Context, h *hub) {
	defer close(h.done)
	tick := time.NewTicker(n.poll)
	defer tick.Stop()
	for {
		after := h.lastSeq()
		events, err := n.read(ctx, h.campus, after)
		if err != nil && ctx.Err() == nil {
			n.log.Warn("read campus inbox", zap.String("campus", h.campus), zap.Error(err))
		}
		if err == nil {
			h.add(after, events)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (h *hub) lastSeq() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return 0
	}
	return h.events[len(h.events)-1].Seq
}

// add appends the events read after seq after and wakes the streams.
func (h *hub) add(after int64, events []contract.ReportReadyEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	grew := false
	for _, e := range events {
		if e.Seq > after {
			h.events = append(h.events, e)
			after, grew = e.Seq, true
		}
	}
	if n := len(h.events); n > hubKeep {
		// A new array: streams may still be reading the old one.
		h.events = slices.Clone(h.events[n-hubKeep:])
	}
	if grew || !h.read {
		h.read = true
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

// since returns the events after seq after (none before the inbox was
// first read) and a channel closed when there may be more. The events
// are shared: callers only read them.
func (h *hub) since(after int64) ([]contract.ReportReadyEvent, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, _ := slices.BinarySearchFunc(h.events, after+1, func(e contract.ReportReadyEvent, seq int64) int {
		return cmp.Compare(e.Seq, seq)
	})
	return slices.Clip(h.events[i:]), h.changed
}

// inboxSince reads the campus inbox's events after seq after: the hubs'
// one Temporal query.
func (s *Server) inboxSince(ctx context.Context, campus string, after int64) ([]contract.ReportReadyEvent, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := s.cfg.Temporal.QueryWorkflow(qctx, contract.InboxWorkflowID(campus), "", contract.InboxQuery, after)
	if isNotFound(err) {
		return nil, nil // no report yet for this campus
	} else if err != nil {
		return nil, err
	}
	var events []contract.ReportReadyEvent
	if err := v.Get(&events); err != nil {
		return nil, err
	}
	return events, nil
}
