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

	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/callback"
	"octflow/exam"
)

// These cases are all refused before the gateway touches Temporal or the
// object store, which is why the server here has neither: reaching them
// would panic and show up as a 500. The end-to-end tests in cmd/octflow/e2e
// cover the same refusals against the real stack.
func TestSubmitRefusesBadRequestsBeforeStoringAnything(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev-token"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("clin-token"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := callback.New("")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")), MaxScanBytes: 1024, Callbacks: guard})

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
		{"exam id in the form of a reference", "dev-token", "", map[string]string{"meta": `{"examId":"ex-0123456789abcdef01234567"}`, "scan": "x"}, 400, "invalid-meta"},
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
			var p problems.Problem
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

func TestADeviceOverItsRateGets429WithRetryAfter(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev-a"), Principal: auth.Principal{Name: "a", Role: auth.RoleDevice, DeviceID: "oct-a", Campus: "north"}},
		{SHA256: auth.HashToken("dev-b"), Principal: auth.Principal{Name: "b", Role: auth.RoleDevice, DeviceID: "oct-b", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		DeviceRate: intake.RateLimit{PerMinute: 2, Burst: 2}})
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

// stall starts an upload from token that sends part of its scan and
// then waits; finish ends it with err and returns its status.
func stall(srv *Server, token string) (finish func(error) int) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req := httptest.NewRequest(http.MethodPost, "/v1/exams", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		done <- rec.Code
	}()
	part, _ := mw.CreateFormFile("scan", "scan.dcm")
	part.Write([]byte("partial")) // returns once the server has read it
	return func(err error) int {
		pw.CloseWithError(err)
		return <-done
	}
}

func twoDevices(t testing.TB, cfg Config) *Server {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev-a"), Principal: auth.Principal{Name: "a", Role: auth.RoleDevice, DeviceID: "oct-a", Campus: "north"}},
		{SHA256: auth.HashToken("dev-b"), Principal: auth.Principal{Name: "b", Role: auth.RoleDevice, DeviceID: "oct-b", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens, cfg.Pseudonymizer = tokens, intake.NewPseudonymizer([]byte("0123456789abcdef"))
	return newServer(t, cfg)
}

func postScan(srv *Server, token, scan string) *httptest.ResponseRecorder {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("meta", "meta")
	w.Write([]byte(`{"examId":"E1"}`))
	w, _ = mw.CreateFormFile("scan", "scan.dcm")
	w.Write([]byte(scan))
	mw.Close()
	req := httptest.NewRequest(http.MethodPost, "/v1/exams", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

func TestAStalledUploadHoldsNoValidationSlot(t *testing.T) {
	srv := twoDevices(t, Config{Uploads: intake.Limits{Validating: 1, Wait: 100 * time.Millisecond}})
	finish := stall(srv, "dev-a")
	// The only validation slot is free: b's scan is received, validated
	// and refused on its merits, not turned away.
	if rec := postScan(srv, "dev-b", "not a dicom file"); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("another device's upload while one stalls: %d, want 422 (validated)", rec.Code)
	}
	if code := finish(errors.New("device went away")); code != http.StatusBadRequest {
		t.Errorf("the stalled upload ended with %d, want 400", code)
	}
}

func TestADeviceOverItsConcurrentUploadsGets429(t *testing.T) {
	srv := twoDevices(t, Config{Uploads: intake.Limits{PerDevice: 1}})
	finish := stall(srv, "dev-a")
	rec := postScan(srv, "dev-a", "x")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a's second upload while its first runs: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := postScan(srv, "dev-b", "x"); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("device b was limited by a's upload: %d", rec.Code)
	}
	finish(errors.New("device went away"))
	if rec := postScan(srv, "dev-a", "x"); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("a's upload once its first ended: %d", rec.Code)
	}
}

func TestATrickledUploadIsCutOffWith408(t *testing.T) {
	srv := twoDevices(t, Config{Uploads: intake.Limits{Pace: intake.UploadPace{Idle: time.Minute, Grace: 200 * time.Millisecond, MinRate: 1 << 20}}})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req := httptest.NewRequest(http.MethodPost, "/v1/exams", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer dev-a")
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		done <- rec
	}()
	go func() { // a byte every 20 ms: 50 B/s against 1 MiB/s
		part, _ := mw.CreateFormFile("scan", "scan.dcm")
		for range 1000 {
			if _, err := part.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	select {
	case rec := <-done:
		var p problems.Problem
		json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != http.StatusRequestTimeout || p.Type != "urn:octflow:problem:too-slow" {
			t.Errorf("trickle answered %d %s, want 408 too-slow", rec.Code, p.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a trickle held the upload for 10 s")
	}
	pw.Close()
}

// newServer builds a gateway for a test, under the production policy
// unless the test sets one.
func newServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Policy.MaxAttempts == 0 {
		cfg.Policy = exam.DefaultPolicy()
	}
	if cfg.Pseudonymizer == nil {
		cfg.Pseudonymizer = intake.NewPseudonymizer([]byte("0123456789abcdef"))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
