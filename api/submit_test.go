package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"octflow/activities"
	"octflow/exam"
)

// These cases are all refused before the gateway touches Temporal or the
// object store, which is why the server here has neither: reaching them
// would panic and show up as a 500. The end-to-end tests in cmd/octflow
// cover the same refusals against the real stack.
func TestSubmitRefusesBadRequestsBeforeStoringAnything(t *testing.T) {
	tokens, err := NewTokens([]TokenEntry{
		{SHA256: HashToken("dev-token"), Principal: Principal{Name: "d", Role: RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: HashToken("clin-token"), Principal: Principal{Name: "c", Role: RoleClinician}},
	})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := activities.NewCallbackGuard("")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: NewPseudonymizer([]byte("0123456789abcdef")), MaxScanBytes: 1024, Callbacks: guard})

	form := func(parts map[string]string) (string, *bytes.Buffer) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, name := range []string{"meta", "scan", "extra"} {
			if v, ok := parts[name]; ok {
				w, _ := mw.CreateFormFile(name, name)
				w.Write([]byte(v))
			}
		}
		mw.Close()
		return mw.FormDataContentType(), &body
	}
	okMeta := `{"examId":"E1","priority":"low"}`
	cases := []struct {
		name        string
		token       string
		contentType string
		parts       map[string]string
		status      int
		kind        string
	}{
		{"no token", "", "", map[string]string{"meta": okMeta, "scan": "x"}, 401, "unauthenticated"},
		{"unknown token", "nope", "", map[string]string{"meta": okMeta, "scan": "x"}, 401, "unauthenticated"},
		{"wrong role", "clin-token", "", map[string]string{"meta": okMeta, "scan": "x"}, 403, "forbidden"},
		{"json body", "dev-token", "application/json", nil, 415, "unsupported-media"},
		{"scan too large", "dev-token", "", map[string]string{"meta": okMeta, "scan": strings.Repeat("x", 4096)}, 413, "too-large"},
		{"missing meta", "dev-token", "", map[string]string{"scan": "x"}, 400, "malformed-request"},
		{"missing scan", "dev-token", "", map[string]string{"meta": okMeta}, 400, "malformed-request"},
		{"unexpected part", "dev-token", "", map[string]string{"meta": okMeta, "scan": "x", "extra": "y"}, 400, "malformed-request"},
		{"meta not JSON", "dev-token", "", map[string]string{"meta": "{", "scan": "x"}, 400, "malformed-request"},
		{"unknown meta field", "dev-token", "", map[string]string{"meta": `{"examId":"E1","patientName":"x"}`, "scan": "x"}, 400, "malformed-request"},
		{"bad priority", "dev-token", "", map[string]string{"meta": `{"examId":"E1","priority":"asap"}`, "scan": "x"}, 400, "invalid-meta"},
		{"bad eye", "dev-token", "", map[string]string{"meta": `{"examId":"E1","eye":"left"}`, "scan": "x"}, 400, "invalid-meta"},
		{"exam id with slash", "dev-token", "", map[string]string{"meta": `{"examId":"a/b"}`, "scan": "x"}, 400, "invalid-meta"},
		{"callback not http", "dev-token", "", map[string]string{"meta": `{"examId":"E1","callbackUrl":"file:///etc/passwd"}`, "scan": "x"}, 422, "invalid-callback"},
		{"callback to cloud metadata", "dev-token", "", map[string]string{"meta": `{"examId":"E1","callbackUrl":"http://169.254.169.254/latest"}`, "scan": "x"}, 422, "invalid-callback"},
		{"callback to a private address", "dev-token", "", map[string]string{"meta": `{"examId":"E1","callbackUrl":"https://10.1.2.3/hook"}`, "scan": "x"}, 422, "invalid-callback"},
		{"scan not DICOM", "dev-token", "", map[string]string{"meta": okMeta, "scan": "not a dicom file"}, 422, "invalid-volume"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct, body := form(c.parts)
			if c.contentType != "" {
				ct, body = c.contentType, bytes.NewBufferString("{}")
			}
			req := httptest.NewRequest(http.MethodPost, "/v1/exams", body)
			req.Header.Set("Content-Type", ct)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if rec.Code != c.status || p.Type != "urn:octflow:problem:"+c.kind || p.Status != c.status {
				t.Errorf("got %d %s (%s), want %d %s", rec.Code, p.Type, p.Detail, c.status, c.kind)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("content type %q", got)
			}
		})
	}
}

func TestPseudonymIsStableKeyedAndHidesTheID(t *testing.T) {
	a, b := NewPseudonymizer([]byte("key-one-0123456789")), NewPseudonymizer([]byte("key-two-0123456789"))
	ref := a.Ref("PAT-0042")
	if ref != a.Ref("PAT-0042") {
		t.Error("pseudonym not stable")
	}
	if ref == b.Ref("PAT-0042") {
		t.Error("pseudonym does not depend on the key")
	}
	if strings.Contains(ref, "0042") || !strings.HasPrefix(ref, "pt-") || len(ref) != 27 {
		t.Errorf("pseudonym %q", ref)
	}
	if a.Ref("") != "" {
		t.Error("empty ID must give no pseudonym")
	}
}

func TestNewTokensRejectsIncompleteEntries(t *testing.T) {
	for _, e := range []TokenEntry{
		{SHA256: "abc", Principal: Principal{Role: RoleAdmin}},
		{SHA256: HashToken("t"), Principal: Principal{Role: "root"}},
		{SHA256: HashToken("t"), Principal: Principal{Role: RoleDevice, DeviceID: "d"}},
	} {
		if _, err := NewTokens([]TokenEntry{e}); err == nil {
			t.Errorf("NewTokens accepted %+v", e)
		}
	}
}

func TestADeviceOverItsRateGets429WithRetryAfter(t *testing.T) {
	tokens, err := NewTokens([]TokenEntry{
		{SHA256: HashToken("dev-a"), Principal: Principal{Name: "a", Role: RoleDevice, DeviceID: "oct-a", Campus: "north"}},
		{SHA256: HashToken("dev-b"), Principal: Principal{Name: "b", Role: RoleDevice, DeviceID: "oct-b", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: NewPseudonymizer([]byte("0123456789abcdef")),
		DeviceRate: RateLimit{PerMinute: 2, Burst: 2}})
	post := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/exams", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json") // refused with 415 when admitted
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for i := range 2 {
		if rec := post("dev-a"); rec.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("request %d within the burst: %d", i, rec.Code)
		}
	}
	rec := post("dev-a")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "30" ||
		!strings.Contains(rec.Body.String(), "urn:octflow:problem:rate-limited") {
		t.Errorf("third request: %d, Retry-After %q, %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := post("dev-b"); rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("another device was limited too: %d", rec.Code)
	}
}

func TestUploadsBeyondTheConcurrencyLimitWaitThenGet503(t *testing.T) {
	tokens, err := NewTokens([]TokenEntry{
		{SHA256: HashToken("dev"), Principal: Principal{Name: "d", Role: RoleDevice, DeviceID: "oct-1", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: NewPseudonymizer([]byte("0123456789abcdef")),
		MaxConcurrentUploads: 1, UploadWait: 100 * time.Millisecond})
	// The first upload stalls mid-body and holds the only slot.
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	first := httptest.NewRequest(http.MethodPost, "/v1/exams", pr)
	first.Header.Set("Content-Type", mw.FormDataContentType())
	first.Header.Set("Authorization", "Bearer dev")
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, first)
		done <- rec.Code
	}()
	part, _ := mw.CreateFormFile("scan", "scan.dcm")
	part.Write([]byte("partial")) // blocks until the server reads it
	second := httptest.NewRequest(http.MethodPost, "/v1/exams", strings.NewReader("{}"))
	second.Header.Set("Content-Type", "application/json")
	second.Header.Set("Authorization", "Bearer dev")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, second)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("second upload while the first holds the slot: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	pw.CloseWithError(errors.New("device went away"))
	if code := <-done; code != http.StatusBadRequest {
		t.Errorf("stalled upload ended with %d, want 400", code)
	}
	// The slot is free again.
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, second)
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("after the slot freed: %d", rec.Code)
	}
}

// newServer builds a gateway for a test, under the production policy
// unless the test sets one.
func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Policy.MaxAttempts == 0 {
		cfg.Policy = exam.DefaultPolicy()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
