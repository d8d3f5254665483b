package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"octflow/api/apitest"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/audit/audittest"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// TestTheAuditRepositoryReceivesEveryAccessDecision points the gateway's
// audit trail at a real collector (rsyslogd over TLS), makes one access
// decision of each kind a hospital's auditor asks about, with the
// collector stopped for most of them, and finds each one at the
// collector once it is back.
func TestTheAuditRepositoryReceivesEveryAccessDecision(t *testing.T) {
	p := audittest.NewPKI(t)
	collector := audittest.StartCollector(t, p, "server")
	trail, err := audit.Open(audit.Config{Collector: collector.Addr(), CAFile: p.Path("ca.pem"),
		CertFile: p.Path("client.pem"), KeyFile: p.Path("client.key"), SpoolDir: t.TempDir(),
		Settle: 200 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
		audit.Source{ID: "api@test"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer trail.Close()
	h := newHarness(t, 1, func(c *devsystem.Config) { c.AuditTrail = trail })
	ctx := context.Background()

	_, scan := phantomDICOM(t, tiny(251))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "audited-1"}, scan); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("audited-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	sealed := h.firstInput(t, "audited-1")
	collector.Stop() // the audit repository goes away

	h.call(http.MethodGet, "not-a-token", "/v1/exams/audited-1", nil, http.StatusUnauthorized, nil)
	var north string
	for _, c := range h.sys.Secrets.Clinicians {
		if c.Campus == devsystem.SecondCampus {
			north = c.Token
		}
	}
	h.call(http.MethodGet, north, "/v1/exams/audited-1?campus="+h.sys.Secrets.Campus, nil, http.StatusNotFound, nil)
	req, _ := http.NewRequest(http.MethodGet, h.sys.App.APIURL()+"/v1/exams/audited-1/report?format=json", nil)
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Clinician)
	client := apitest.Client(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	if code := do(client, req); code != http.StatusOK && code != http.StatusFound && code != http.StatusTemporaryRedirect {
		t.Fatalf("report read: %d", code)
	}
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, sealed))}})
	req, _ = http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/codec/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Clinician)
	if code := do(h.http, req); code != http.StatusOK {
		t.Fatalf("codec decode: %d", code)
	}

	collector.Start() // and comes back
	type want struct {
		what string
		has  []string
	}
	wants := []want{
		{"the device's upload", []string{`csd-code="110104"`, `EventOutcomeIndicator="0"`}},
		{"the refused token", []string{`csd-code="110114"`, `EventOutcomeIndicator="4"`}},
		{"the other campus's probe", []string{`csd-code="110110"`, `EventOutcomeIndicator="4"`, `<EventOutcomeDescription>404 `}},
		{"the report read", []string{`csd-code="110110"`, `EventOutcomeIndicator="0"`, `ParticipantObjectID="GET /v1/exams/:examId/report"`}},
		{"the codec decode", []string{`csd-code="110106"`, `EventOutcomeIndicator="0"`}},
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var missing []string
		lines := collector.Lines()
		for _, w := range wants {
			found := false
			for _, l := range lines {
				if containsAll(l.Msg, w.has) && l.MsgID == "IHE+RFC-3881" {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, w.what)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, l := range lines {
				t.Log(l.Msg)
			}
			t.Fatalf("the collector never received %s (%d messages received)", strings.Join(missing, ", "), len(lines))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
