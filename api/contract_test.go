package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/encoding/protojson"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/codec"
	"octflow/exam"
)

// The real gateway behind httptest, on the routes that need no Temporal,
// with every request and answer held to api/openapi.yaml by
// apitest.Transport.
func TestGatewayAnswersAsItsContractSays(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("admin"), Principal: auth.Principal{Name: "a", Role: auth.RoleAdmin}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "north"}},
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := codec.NewKeys("k")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := api.New(api.Config{
		Tokens: tokens, PayloadCodec: sealer, Policy: exam.DefaultPolicy(),
		Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		AuditTrail:    audit.NewLogSink(zapcore.AddSync(io.Discard), audit.Source{ID: "api"}),
		SpoolDir:      t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	client := &http.Client{Transport: apitest.Transport(t, srv.Client().Transport)}

	call := func(method, path, token, contentType string, body []byte, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}

	call("GET", "/healthz", "", "", nil, 200)
	call("GET", "/openapi.yaml", "", "", nil, 200)

	// Auth failures are problems.
	call("GET", "/v1/nodes", "", "", nil, 401)
	call("GET", "/v1/nodes", "not-a-token", "", nil, 401)
	call("GET", "/v1/queues", "dev", "", nil, 403)
	call("GET", "/v1/exams/E-1/events", "dev", "", nil, 403)
	call("POST", "/v1/exams/E-1/rerun", "clin", "", nil, 403)
	// A supersede without its reason, with a reason too long or not one
	// line, a reason without supersede, a field the body has not: 400,
	// before the exam is looked up.
	for _, body := range []string{`{"supersede":true}`, `{"supersede":true,"reason":"  "}`,
		`{"supersede":true,"reason":"` + strings.Repeat("x", 201) + `"}`, `{"supersede":true,"reason":"a\nb"}`,
		`{"reason":"wrong eye"}`, `{"supersede":true,"reason":"wrong eye","by":"me"}`, `{"supersede":"yes"}`, `[`} {
		call("POST", "/v1/exams/E-1/rerun", "admin", "application/json", []byte(body), 400)
	}
	call("POST", "/v1/exams/E-1/review", "admin", "application/json", []byte(`{"decision":"approve"}`), 403)
	call("POST", "/v1/nodes/n1/breaker/reset", "clin", "", nil, 403)
	call("GET", "/v1/notifications", "admin", "", nil, 403)

	// Routes the gateway does not have.
	call("GET", "/v1/nowhere", "admin", "", nil, 404)
	call("DELETE", "/v1/exams", "dev", "", nil, 405)

	// Uploads refused before anything is stored.
	call("POST", "/v1/exams", "dev", "application/json", []byte(`{}`), 415)
	ct, body := upload(t, `{"examId":"E-1"}`, false)
	call("POST", "/v1/exams", "dev", ct, body, 400) // no scan part
	ct, body = upload(t, `{"examId":"E-1","colour":"red"}`, true)
	call("POST", "/v1/exams", "dev", ct, body, 400) // a field meta does not have
	ct, body = upload(t, `{"examId":"ex-0123456789abcdef01234567"}`, true)
	call("POST", "/v1/exams", "dev", ct, body, 400) // a reference's form
	ct, body = upload(t, `{"examId":"E-1","priority":"urgent","eye":"OD"}`, true)
	call("POST", "/v1/exams", "dev", ct, body, 422) // not a DICOM volume

	// The codec.
	payload := `{"payloads":[{"metadata":{"encoding":"anNvbi9wbGFpbg=="},"data":"eyJhIjoxfQ=="}]}`
	sealed := call("POST", "/codec/encode", "admin", "application/json", []byte(payload), 200)
	opened := call("POST", "/codec/decode", "clin", "application/json", sealed, 403) // the system's scope
	opened = call("POST", "/codec/decode", "admin", "application/json", sealed, 200)
	var ps commonpb.Payloads
	if err := protojson.Unmarshal(opened, &ps); err != nil || len(ps.GetPayloads()) != 1 || string(ps.GetPayloads()[0].GetData()) != `{"a":1}` {
		t.Errorf("decode: %s (%v)", opened, err)
	}
	call("POST", "/codec/decode", "admin", "text/plain", []byte(payload), 415)
	call("POST", "/codec/decode", "", "application/json", []byte(payload), 401)
	call("GET", "/codec/login", "", "", nil, 200)
	call("POST", "/codec/login", "", "application/x-www-form-urlencoded", []byte(url.Values{"token": {"dev"}}.Encode()), 401)
	call("POST", "/codec/login", "", "application/x-www-form-urlencoded", []byte(url.Values{"token": {"clin"}}.Encode()), 200)
	call("POST", "/codec/logout", "", "", nil, 204)
	call("OPTIONS", "/codec/decode", "", "", nil, 204)
}

// upload is a submission's multipart body: meta and, when scan, a scan
// that is no DICOM.
func upload(t *testing.T, meta string, scan bool) (contentType string, body []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part := func(disposition, contentType, data string) {
		h := map[string][]string{"Content-Disposition": {disposition}, "Content-Type": {contentType}}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, data)
	}
	part(`form-data; name="meta"`, "application/json", meta)
	if scan {
		part(`form-data; name="scan"; filename="scan.dcm"`, "application/dicom", strings.Repeat("not a DICOM file ", 64))
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// recorder is a testing.TB that keeps what would fail the test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

// A server that answers otherwise than the document says fails the test.
func TestTransportFailsAnAnswerTheContractDoesNotAllow(t *testing.T) {
	for _, c := range []struct {
		name          string
		method, path  string
		contentType   string
		body          string
		status        int
		answerType    string
		answer        string
		wantViolation string // "" when the exchange keeps the contract
	}{
		{name: "as documented", method: "GET", path: "/healthz", status: 200, answerType: "application/json", answer: `{"status":"ok"}`},
		{name: "a field the schema does not have", method: "GET", path: "/healthz", status: 200, answerType: "application/json",
			answer: `{"status":"ok","uptime":3}`, wantViolation: "uptime"},
		{name: "a status the operation does not declare", method: "GET", path: "/healthz", status: 418, answerType: "application/problem+json",
			answer: `{"type":"urn:octflow:problem:teapot","title":"t","status":418}`, wantViolation: "status is not supported"},
		{name: "an error that is no problem", method: "GET", path: "/v1/exams/E-1", status: 404, answerType: "application/json",
			answer: `{"error":"no such exam"}`, wantViolation: "application/json"},
		{name: "a problem missing its type", method: "GET", path: "/v1/exams/E-1", status: 404, answerType: "application/problem+json",
			answer: `{"title":"No such resource","status":404}`, wantViolation: "type"},
		{name: "a status that is no reference", method: "GET", path: "/v1/exams/E-1", status: 200, answerType: "application/json",
			answer: `{"examId":"E-1","campus":"north","state":"QUEUED","priority":"normal","effectivePriority":"normal","attempt":1,` +
				`"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z"}`, wantViolation: "examId"},
		{name: "a state the lifecycle does not have", method: "GET", path: "/v1/exams/E-1", status: 200, answerType: "application/json",
			answer: `{"examId":"ex-0123456789abcdef01234567","campus":"north","state":"PAUSED","priority":"normal","effectivePriority":"normal",` +
				`"attempt":1,"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z"}`, wantViolation: "state"},
		{name: "an invalid request accepted", method: "POST", path: "/v1/exams/E-1/review", contentType: "application/json",
			body: `{"decision":"maybe"}`, status: 200, answerType: "application/json",
			answer: `{"examId":"ex-0123456789abcdef01234567","campus":"north","review":"approved"}`, wantViolation: "not a 4xx"},
		{name: "an invalid request refused", method: "POST", path: "/v1/exams/E-1/review", contentType: "application/json",
			body: `{"decision":"maybe"}`, status: 400, answerType: "application/problem+json",
			answer: `{"type":"urn:octflow:problem:malformed-request","title":"The request is malformed","status":400}`},
		{name: "an invalid upload accepted", method: "POST", path: "/v1/exams", contentType: "multipart",
			body: `{"examId":"E-1","priority":"asap"}`, status: 202, answerType: "application/json",
			answer: `{"examId":"ex-0123456789abcdef01234567","campus":"north","state":"CREATED","priority":"normal","effectivePriority":"normal",` +
				`"attempt":0,"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z"}`, wantViolation: "priority"},
		{name: "a route the document lacks answered", method: "GET", path: "/v1/secret", status: 200, answerType: "application/json",
			answer: `{}`, wantViolation: "no operation"},
		{name: "events as documented", method: "GET", path: "/v1/notifications?campus=north", status: 200, answerType: "text/event-stream",
			answer: ": keepalive\n\nid: 1\nevent: report-ready\ndata: " +
				`{"seq":1,"at":"2026-01-02T03:04:05Z","examId":"ex-0123456789abcdef01234567","campus":"north","priority":"urgent",` +
				`"eye":"OD","summary":{"scanType":"cube","lesions":2}}` + "\n\n"},
		{name: "an event that is no ReportReadyEvent", method: "GET", path: "/v1/notifications", status: 200, answerType: "text/event-stream",
			answer: "id: 1\nevent: report-ready\ndata: {\"seq\":1}\n\n", wantViolation: "ReportReadyEvent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.answerType)
				w.WriteHeader(c.status)
				io.WriteString(w, c.answer)
			}))
			defer srv.Close()
			rec := &recorder{TB: t}
			client := &http.Client{Transport: apitest.Transport(rec, nil)}
			contentType, body := c.contentType, []byte(c.body)
			if contentType == "multipart" {
				contentType, body = upload(t, c.body, true)
			}
			req, err := http.NewRequestWithContext(context.Background(), c.method, srv.URL+c.path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer x")
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != c.answer {
				t.Errorf("the test read %q, the server sent %q", b, c.answer)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			got := strings.Join(rec.failed, "\n")
			t.Logf("the transport said:\n%s", got)
			switch {
			case c.wantViolation == "" && got != "":
				t.Errorf("the exchange keeps the contract, yet the transport failed it:\n%s", got)
			case c.wantViolation != "" && !strings.Contains(got, c.wantViolation):
				t.Errorf("the transport failed with\n%s\nwant a failure naming %q", got, c.wantViolation)
			}
		})
	}
}
