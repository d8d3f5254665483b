package api

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"octflow/api/auth"
	"octflow/audit"
	"octflow/audit/audittest"
)

// The review's attack on the trail, through the gateway to a real
// rsyslog: a device's STOW-RS request whose part header is a 1.1 MiB line
// without a colon. It is refused, its entry is bounded and reaches the
// collector, and the trail goes on for every other request, across a
// restart of the api, with nothing cut from the journal.
func TestOnePoisonedRequestCannotSilenceTheTrail(t *testing.T) {
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	spool := t.TempDir()
	open := func() *audit.Trail {
		tr, err := audit.Open(audit.Config{Collector: c.Addr(), CAFile: p.Path("ca.pem"), CertFile: p.Path("client.pem"), KeyFile: p.Path("client.key"),
			SpoolDir: spool, Settle: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond},
			audit.Source{ID: "api@test", Host: "test-host", PID: 4242}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "oct-1", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	do := func(tr *audit.Trail, method, path, token, contentType string, body []byte) int {
		srv := newServer(t, Config{Tokens: tokens, AuditTrail: tr, SpoolDir: t.TempDir()})
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	waitFor := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := 0
			for _, l := range c.Lines() {
				if strings.Contains(l.Msg, what) {
					got++
				}
			}
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the collector holds %d entries with %q after 30 s, want %d", got, what, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	tr := open()
	if code := do(tr, "POST", "/dicom-web/studies", "dev", `multipart/related; type="application/dicom"; boundary=B`, poisoned()); code != http.StatusBadRequest {
		t.Fatalf("the poisoned request: %d, want 400", code)
	}
	if code := do(tr, "GET", "/v1/exams/E1/report?format=tiff", "clin", "", nil); code != http.StatusBadRequest {
		t.Fatalf("a clinician's request after it: %d", code)
	}
	waitFor("POST /dicom-web/studies", 1)
	waitFor("GET /v1/exams/:examId/report", 1)
	for _, l := range c.Lines() {
		if len(l.Msg) > audit.MaxMessage || strings.Contains(l.Msg, marker) {
			t.Errorf("an entry of %d bytes that repeats the request: %.200s", len(l.Msg), l.Msg)
		}
	}
	// A restart: the journal is reopened whole, and shipping goes on.
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	sizes := segmentSizes(t, spool)
	tr = open()
	defer tr.Close()
	if after := segmentSizes(t, spool); !maps.Equal(sizes, after) {
		t.Fatalf("reopening the journal changed its segments from %v to %v", sizes, after)
	}
	if code := do(tr, "GET", "/v1/exams/E1/report?format=tiff", "clin", "", nil); code != http.StatusBadRequest {
		t.Fatalf("a clinician's request after the restart: %d", code)
	}
	waitFor("GET /v1/exams/:examId/report", 2)
	if aside, _ := filepath.Glob(filepath.Join(spool, "set-aside", "*")); len(aside) != 0 {
		t.Errorf("bounded entries were set aside: %v", aside)
	}
}

func segmentSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.audit"))
	out := map[string]int64{}
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = fi.Size()
	}
	return out
}

// One token's flood while the audit collector is away fills at most its
// share of the spool: past it that token's actions are refused (503)
// before they are taken, while another caller's requests are recorded
// and its actions admitted.
func TestOneTokensFloodCannotStopTheTrailForOthers(t *testing.T) {
	// Nothing listens at the collector's address: everything stays spooled.
	tr, err := audit.Open(audit.Config{Collector: "127.0.0.1:1", SpoolDir: t.TempDir(), SpoolBytes: 256 << 10,
		MinBackoff: time.Hour, MaxBackoff: time.Hour}, audit.Source{ID: "api@test"}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "oct-1", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := newServer(t, Config{Tokens: tokens, AuditTrail: tr, SpoolDir: t.TempDir(), Registerer: reg, Temporal: newFakeTemporal()})
	metric := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				m := f.GetMetric()[0]
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	do := func(method, path, token string) int {
		req := httptest.NewRequest(method, path, strings.NewReader("{"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 2000 {
		before := tr.Pending()
		do("GET", "/v1/exams/E1/report?format=tiff", "dev")
		if tr.Pending() == before {
			t.Logf("the device's entries stopped being taken after %d requests", i)
			break
		}
	}
	if code := do("POST", "/v1/exams", "dev"); code != http.StatusServiceUnavailable {
		t.Errorf("the flooding device's submission: %d, want 503 before it is taken", code)
	}
	// The trail's figures say what waits and what was refused.
	if n, b, spool := metric("octflow_audit_pending_records"), metric("octflow_audit_pending_bytes"), metric("octflow_audit_spool_bytes"); n < 30 || b < spool/4-4<<10 || spool != 256<<10 {
		t.Errorf("pending %v records, %v bytes of %v: want the device's quarter of the spool", n, b, spool)
	}
	if taken, refused := metric("octflow_audit_last_taken_timestamp_seconds"), metric("octflow_audit_refused_total"); taken != 0 || refused < 2 {
		t.Errorf("last taken %v, refused %v: want never, and the device's refusals", taken, refused)
	}
	before := tr.Pending()
	do("GET", "/v1/exams/E1/report?format=tiff", "clin")
	if tr.Pending() <= before {
		t.Error("the clinician's request was not recorded while the device flooded")
	}
	if code := do("POST", "/v1/exams/E1/review", "clin"); code == http.StatusServiceUnavailable {
		t.Error("the clinician's review was refused for the device's flood")
	}
}
