package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"octflow/activities"
	"octflow/api/intake"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// receivedEvent is one delivery seen by the workstation stand-in.
type receivedEvent struct {
	header http.Header
	body   []byte
}

func TestReportReadyIsSignedRetriedAndDeliveredWithOneIdempotencyKey(t *testing.T) {
	h := newHarness(t, 1)
	// A real HTTP receiver on loopback (the dev stack allow-lists it):
	// its first answer is a 500, then it accepts.
	var mu sync.Mutex
	var got []receivedEvent
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, receivedEvent{r.Header.Clone(), body})
		first := len(got) == 1
		mu.Unlock()
		if first {
			http.Error(w, "workstation busy", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ws.Close()

	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(131))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "hook-1", CallbackURL: ws.URL + "/octflow"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("hook-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want the refused one and its retry", len(got))
	}
	secret := []byte(h.sys.Secrets.WebhookSecret)
	for i, ev := range got {
		ts, err := strconv.ParseInt(ev.header.Get(activities.TimestampHeader), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)) > time.Minute {
			t.Errorf("delivery %d: timestamp %q", i, ev.header.Get(activities.TimestampHeader))
		}
		if want := activities.Sign(secret, ts, ev.body); ev.header.Get(activities.SignatureHeader) != want {
			t.Errorf("delivery %d: signature does not verify", i)
		}
		if k := ev.header.Get(activities.IdempotencyKey); k != h.ref("hook-1").String() {
			t.Errorf("delivery %d: idempotency key %q, want the campus and exam reference", i, k)
		}
	}
	if !bytes.Equal(got[0].body, got[1].body) {
		t.Error("the retry carried a different event")
	}
	var event activities.ReportReady
	if err := json.Unmarshal(got[1].body, &event); err != nil {
		t.Fatal(err)
	}
	if event.ExamID != h.ref("hook-1").ID || event.Campus != h.sys.Secrets.Campus || event.State != lifecycle.Completed {
		t.Errorf("event %+v", event)
	}
	// The link in the event serves the report to a clinician.
	req, _ := http.NewRequest(http.MethodGet, event.Report.PDF, nil)
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Clinician)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		t.Errorf("GET %s: %d, %q…", event.Report.PDF, resp.StatusCode, pdf[:min(8, len(pdf))])
	}
}

func TestCallbackToAnInternalAddressIsRefusedAtSubmission(t *testing.T) {
	h := newHarness(t, 0, func(c *devsystem.Config) { c.APIOnly = true })
	_, scan := phantomDICOM(t, tiny(141))
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "https://10.0.0.7/hook", "https://192.168.0.2/hook"} {
		_, code, _ := h.device.Submit(context.Background(), intake.Meta{ExamID: "ssrf-1", CallbackURL: u}, scan)
		if code != http.StatusUnprocessableEntity {
			t.Errorf("callback %s answered %d, want 422", u, code)
		}
	}
	if n := h.executions("ssrf-1"); n != 0 {
		t.Errorf("a refused submission started %d workflows", n)
	}
}
