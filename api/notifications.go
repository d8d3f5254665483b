package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/contract"
)

// notifications serves GET /v1/notifications: a Server-Sent Events stream
// of report-ready events for one campus (?campus=, default the token's).
// Events come from the campus's inbox workflow, so the stream survives
// api restarts: a client that reconnects with Last-Event-ID gets every
// event after it. Without Last-Event-ID the stream starts with the
// events the inbox still holds (its last 1000).
func (s *Server) notifications(c echo.Context) error {
	who := principal(c)
	campus := c.QueryParam("campus")
	if campus == "" {
		campus = who.Campus
	}
	if campus == "" {
		return problem(http.StatusBadRequest, "malformed-request", "campus is required (?campus=)")
	}
	if !campusAllowed(who, campus) {
		// Not 403: nobody learns which campuses exist.
		return problem(http.StatusNotFound, "not-found", "no campus "+campus)
	}
	var last int64
	if h := c.Request().Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return problem(http.StatusBadRequest, "malformed-request", "Last-Event-ID must be an event number")
		}
		last = n
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	w.Flush()

	ctx := c.Request().Context()
	poll, keepalive := time.NewTicker(s.cfg.NotifyPoll), time.NewTicker(15*time.Second)
	defer poll.Stop()
	defer keepalive.Stop()
	for {
		events, err := s.inboxSince(ctx, campus, last)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("read campus inbox", zap.String("campus", campus), zap.Error(err))
		}
		for _, e := range events {
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: report-ready\ndata: %s\n\n", e.Seq, data); err != nil {
				return nil // the client went away
			}
			last = e.Seq
		}
		if len(events) > 0 {
			w.Flush()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			w.Flush()
		case <-poll.C:
		}
	}
}

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
