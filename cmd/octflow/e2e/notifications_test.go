package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/lifecycle"
)

// sseEvent is one event read from the stream.
type sseEvent struct {
	id    int64
	event contract.ReportReadyEvent
}

// readEvents connects to GET /v1/notifications (with lastID unless 0)
// and returns the first n events.
func (h *harness) readEvents(lastID int64, n int) []sseEvent {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.sys.App.APIURL()+"/v1/notifications", nil)
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Clinician)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		h.t.Fatalf("stream answered %d %s", resp.StatusCode, ct)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.event); err != nil {
				h.t.Fatal(err)
			}
		case line == "" && cur.id != 0:
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	if len(out) < n {
		h.t.Fatalf("stream ended after %d of %d events: %v", len(out), n, sc.Err())
	}
	return out
}

func TestNotificationStreamDeliversReportReadyAndResumesAfterReconnect(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(161))
	_, other := phantomDICOM(t, tiny(162))

	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "sse-1", Priority: "urgent"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	first := h.readEvents(0, 1)[0]
	if first.event.ExamID != h.ref("sse-1").ID || first.event.Campus != h.sys.Secrets.Campus || first.event.Summary.CentralSubfieldThicknessUm == nil {
		t.Errorf("first event %+v", first.event)
	}
	// The workstation was away while another report became ready; it
	// reconnects with the last event it saw and gets only the new one.
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "sse-2"}, other); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	h.waitFor("sse-2", time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Completed })
	next := h.readEvents(first.id, 1)[0]
	if next.event.ExamID != h.ref("sse-2").ID || next.id != first.id+1 {
		t.Errorf("after reconnect: event %d %+v, want sse-2 as event %d", next.id, next.event, first.id+1)
	}
	h.getJSON(h.sys.Secrets.Device, "/v1/notifications", http.StatusForbidden, nil)
}
