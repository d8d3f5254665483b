package api

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http/httptest"
	"strings"
	"testing"

	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/callback"
)

// marker is what a hostile client puts in every field it controls; it is
// a valid campus name and a valid exam ID, so it reaches every check.
const marker = "qqechoqq"

// form is a multipart/form-data body of parts (name, content).
func form(parts ...string) (contentType string, body []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(parts); i += 2 {
		w, _ := mw.CreateFormFile(parts[i], parts[i])
		io.WriteString(w, parts[i+1])
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// poisoned is a multipart body whose one part header is a 1.1 MiB line
// without a colon: Go's multipart reader quotes such a line in its error.
func poisoned() []byte {
	line := strings.Repeat(marker, (1100<<10)/len(marker))
	return []byte("--B\r\n" + line + "\r\n\r\nx\r\n--B--\r\n")
}

// echoServer is a gateway with a device, a clinician and an admin of
// campus north, a recording trail and a callback guard.
func echoServer(t *testing.T) (*Server, *recordingTrail) {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "oct-1", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := callback.New("")
	if err != nil {
		t.Fatal(err)
	}
	trail := &recordingTrail{}
	srv := newServer(t, Config{Tokens: tokens, AuditTrail: trail, Callbacks: guard, MaxScanBytes: 4 << 20,
		SpoolDir: t.TempDir(), DeviceRate: intake.RateLimit{PerMinute: 600, Burst: 100}})
	return srv, trail
}

func TestProblemsAndAuditEntriesNameTheFaultNotTheRequestsBytes(t *testing.T) {
	meta := func(json string) func() (string, []byte) {
		return func() (string, []byte) { return form("meta", json, "scan", "x") }
	}
	raw := func(ct string, body []byte) func() (string, []byte) {
		return func() (string, []byte) { return ct, body }
	}
	jsonBody := func(s string) func() (string, []byte) { return raw("application/json", []byte(s)) }
	const related = `multipart/related; type="application/dicom"; boundary=B`
	for _, tc := range []struct {
		name, method, path, token string
		header                    []string
		body                      func() (string, []byte)
		status                    int
	}{
		{"a priority", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","priority":"` + marker + `"}`), 400},
		{"an eye", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","eye":"` + marker + `"}`), 400},
		{"a scan type", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","scanType":"` + marker + `"}`), 400},
		{"an unknown meta field", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","` + marker + `":1}`), 400},
		{"meta that is not JSON", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1",` + marker + `}`), 400},
		{"a meta field of the wrong type", "POST", "/v1/exams", "dev", nil, meta(`{"examId":["` + marker + `"]}`), 400},
		{"an unexpected part", "POST", "/v1/exams", "dev", nil, func() (string, []byte) { return form("meta", `{"examId":"E1"}`, marker, "x") }, 400},
		{"a callback host", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","callbackUrl":"https://` + marker + `.local/hook"}`), 422},
		{"a callback port", "POST", "/v1/exams", "dev", nil, meta(`{"examId":"E1","callbackUrl":"https://example.org:4` + strings.Repeat("4", 3) + `/` + marker + `"}`), 422},
		{"a part header of 1.1 MiB", "POST", "/v1/exams", "dev", nil, raw("multipart/form-data; boundary=B", poisoned()), 400},
		{"a STOW-RS part header of 1.1 MiB", "POST", "/dicom-web/studies", "dev", nil, raw(related, poisoned()), 400},
		{"a STOW-RS priority", "POST", "/dicom-web/studies", "dev", []string{PriorityHeader, marker}, raw(related, poisoned()), 400},
		{"a report format", "GET", "/v1/exams/E1/report?format=" + marker, "clin", nil, nil, 400},
		{"a campus", "GET", "/v1/notifications?campus=" + marker, "clin", nil, nil, 404},
		{"a review decision", "POST", "/v1/exams/E1/review", "clin", nil, jsonBody(`{"decision":"` + marker + `"}`), 400},
		{"a review field", "POST", "/v1/exams/E1/review", "clin", nil, jsonBody(`{"` + marker + `":"approve"}`), 400},
		{"a review that is not JSON", "POST", "/v1/exams/E1/review", "clin", nil, jsonBody(`{"decision":` + marker + `}`), 400},
		{"an unknown route", "GET", "/v1/" + marker + "/" + strings.Repeat(marker, 1000), "", nil, nil, 404},
		{"a refused method", "PUT", "/v1/exams/" + marker, "", nil, nil, 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, trail := echoServer(t)
			var body io.Reader
			ct := ""
			if tc.body != nil {
				var b []byte
				ct, b = tc.body()
				body = bytes.NewReader(b)
			}
			req := httptest.NewRequest(tc.method, tc.path, body)
			req.RemoteAddr = "192.0.2.10:5555"
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d: %.300s", rec.Code, tc.status, rec.Body)
			}
			if strings.Contains(rec.Body.String(), marker) {
				t.Errorf("the answer repeats what the client sent: %.300s", rec.Body)
			}
			if n := rec.Body.Len(); n > 2<<10 {
				t.Errorf("a problem of %d bytes", n)
			}
			trail.mu.Lock()
			defer trail.mu.Unlock()
			// An unknown route decides no access: it has no entry.
			if len(trail.events) == 0 && tc.name != "an unknown route" {
				t.Fatal("no audit entry")
			}
			for _, ev := range trail.events {
				if text := eventText(ev); strings.Contains(text, marker) {
					t.Errorf("the audit entry repeats what the client sent: %.300s", text)
				}
				if len(ev.Description) > audit.MaxDescription {
					t.Errorf("an audit description of %d bytes", len(ev.Description))
				}
			}
		})
	}
}

// eventText is every text field of an event.
func eventText(ev audit.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|", ev.Description, ev.User.ID, ev.User.Role, ev.User.Address)
	for _, o := range ev.Objects {
		fmt.Fprintf(&b, "%s|%s|", o.ID, o.Name)
		for _, d := range o.Details {
			fmt.Fprintf(&b, "%s=%s|", d.Type, d.Value)
		}
	}
	return b.String()
}
