package activities

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/temporal"

	"octflow/callback"
	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

// The notify stage (exam.Notify), on the CPU workers: it tells the
// clinician's workstation that the exam's report is ready, by a signed
// POST to the exam's callback URL (Webhooks) and in the campus's event
// stream (Inbox). A failed push does not fail the exam, whose report
// stands; the review repeats it for an urgent exam awaiting review.

// notifySpec declares the notify stage, on the CPU workers.
func notifySpec() exam.StageSpec {
	return exam.StageSpec{Stage: exam.Notify, Activity: contract.NotifyWorkstation}
}

// Webhook headers. The signature is HMAC-SHA256, keyed with the site's
// secret, over the timestamp, a dot and the body: a workstation checks it
// and rejects stale timestamps, so a captured event cannot be replayed.
const (
	SignatureHeader = "X-Octflow-Signature" // "v1=" + hex HMAC
	TimestampHeader = "X-Octflow-Timestamp" // Unix seconds
	IdempotencyKey  = "Idempotency-Key"     // "<campus>/<examId>": one event per exam, however often delivered
)

// Sign returns the signature header value for body sent at ts.
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Webhooks deliver signed report-ready events.
type Webhooks struct {
	Guard *callback.Guard
	// Secrets holds each site's signing secret by campus; "*" is the
	// default for campuses without their own.
	Secrets map[string]string
	// PublicURL is the api's address as workstations reach it, for the
	// report links in the event.
	PublicURL string
	// Timeout bounds one delivery (default 10 s).
	Timeout time.Duration

	once    sync.Once
	clients [2]*http.Client // [0] guarded, [1] for allow-listed hosts
}

// client is the HTTP client of a delivery: one per guard for the life of
// the process, so connections are reused and bounded. Its dialer refuses
// internal addresses after DNS resolution, so a name that resolves (or
// re-resolves) to an internal address is caught too; an allow-listed
// host skips that check.
func (w *Webhooks) client(allowHost bool) *http.Client {
	w.once.Do(func() {
		timeout := w.Timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		for i, guarded := range []bool{true, false} {
			dialer := &net.Dialer{Timeout: 5 * time.Second}
			if guarded {
				dialer.Control = func(_, address string, _ syscall.RawConn) error {
					ap, err := netip.ParseAddrPort(address)
					if err != nil {
						return fmt.Errorf("%w: %v", callback.ErrRefused, err)
					}
					return w.Guard.CheckIP(ap.Addr())
				}
			}
			w.clients[i] = &http.Client{Timeout: timeout,
				Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil,
					MaxIdleConns: 32, MaxIdleConnsPerHost: 2, MaxConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
					TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: timeout},
				// A redirect could lead anywhere; workstations answer directly.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
	})
	if allowHost {
		return w.clients[1]
	}
	return w.clients[0]
}

// ReportReady is the event pushed to the clinician's workstation.
type ReportReady struct {
	ExamID string          `json:"examId"`
	Campus string          `json:"campus"`
	State  lifecycle.State `json:"state"`
	Eye    exam.Eye        `json:"eye,omitempty"`
	// Priority is the bucket the exam was submitted in.
	Priority exam.Priority `json:"priority"`
	Report   ReportLinks   `json:"report"`
	// ScanType is the scan's pattern; Gradable the quality gate's verdict
	// (full, partial, ungradable); NotMeasurable is true when the report
	// carries no measurement, so a workstation can flag it at once.
	ScanType      string `json:"scanType,omitempty"`
	Gradable      string `json:"gradable,omitempty"`
	NotMeasurable bool   `json:"notMeasurable,omitempty"`
	// Reminder counts repeated pushes for an urgent exam awaiting review.
	Reminder int `json:"reminder,omitempty"`
}

// ReportLinks point at the report through the api.
type ReportLinks struct {
	PDF  string `json:"pdf"`
	JSON string `json:"json"`
}

// NotifyWorkstation posts the signed report-ready event to the exam's
// callback URL. A 5xx, a timeout or a network error is retried (by the
// workflow, with jitter); a 4xx or a refused URL is final.
func (a *Activities) NotifyWorkstation(ctx context.Context, in contract.NotifyInput) (out contract.StageOutput, err error) {
	start := time.Now()
	defer func() { a.Metrics.observe(ctx, exam.Notify, a.Node, start, err) }()
	beat := &stageBeat{beat: contract.Heartbeat{Node: a.Node, Stage: exam.Notify}}
	defer func() {
		if ctx.Err() == nil {
			err = withNode(err, a.Node)
		}
	}()
	return a.notify(ctx, in, beat)
}

func (a *Activities) notify(ctx context.Context, in contract.NotifyInput, beat *stageBeat) (contract.StageOutput, error) {
	var ws Workstations
	if a.Workstations != nil {
		ws = *a.Workstations
	}
	if ws.Inbox != nil {
		e := contract.ReportReadyEvent{ExamID: in.Exam.ExamID, Campus: in.Exam.Campus, Priority: in.Exam.Priority,
			Eye: in.Exam.Eye, Reminder: in.Reminder, Summary: in.Summary}
		if err := ws.Inbox.Publish(ctx, e); err != nil {
			// Temporal did not answer: not the stage's fault.
			return contract.StageOutput{}, unavailable(ctx, fmt.Errorf("publish to the campus inbox: %w", err))
		}
	}
	if in.Exam.CallbackURL == "" {
		return contract.StageOutput{Note: "no callback URL"}, nil
	}
	w := ws.Webhooks
	if w == nil || w.Guard == nil {
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError("webhooks are not configured", "CallbackRejected", nil)
	}
	if err := w.Guard.Check(in.Exam.CallbackURL); err != nil {
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "CallbackRejected", nil)
	}
	secret := w.Secrets[in.Exam.Campus]
	if secret == "" {
		secret = w.Secrets["*"]
	}
	if secret == "" {
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError("no webhook secret for campus "+in.Exam.Campus, "CallbackRejected", nil)
	}
	base := strings.TrimRight(w.PublicURL, "/") + contract.ExamPath(in.Exam.Ref(), "/report") + "&format="
	event := ReportReady{ExamID: in.Exam.ExamID, Campus: in.Exam.Campus, State: lifecycle.Completed, Eye: in.Exam.Eye,
		Priority: in.Exam.Priority, Report: ReportLinks{PDF: base + "pdf", JSON: base + "json"}, Reminder: in.Reminder,
		ScanType: in.Summary.ScanType, Gradable: in.Summary.Gradable, NotMeasurable: in.Summary.NotMeasurable}
	body, err := json.Marshal(event)
	if err != nil {
		return contract.StageOutput{}, fmt.Errorf("encode event: %w", err)
	}
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.Exam.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError("bad callback URL", "CallbackRejected", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Exam IDs are unique within a campus only.
	key := in.Exam.Ref().String()
	if in.Reminder > 0 { // a reminder is a new event; its retries share its key
		key += "/reminder-" + strconv.Itoa(in.Reminder)
	}
	req.Header.Set(IdempotencyKey, key)
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, Sign([]byte(secret), ts, body))
	beat.send(ctx, true)
	u, _ := url.Parse(in.Exam.CallbackURL) // parsed by Check
	resp, err := w.client(w.Guard.AllowsHost(u.Hostname())).Do(req)
	if errors.Is(err, callback.ErrRefused) {
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "CallbackRejected", nil)
	}
	if err != nil {
		return contract.StageOutput{}, fmt.Errorf("deliver report-ready: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode >= 500:
		return contract.StageOutput{}, fmt.Errorf("workstation answered %s", resp.Status)
	case resp.StatusCode >= 300:
		return contract.StageOutput{}, temporal.NewNonRetryableApplicationError("workstation refused the event: "+resp.Status, "CallbackRejected", nil)
	}
	return contract.StageOutput{Note: "delivered: " + resp.Status, Delivered: true}, nil
}
