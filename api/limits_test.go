package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"

	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/storage/storagetest"
)

// padded is a multipart body (boundary B) whose preamble, which a
// multipart reader skips, is at least n bytes of short lines, followed
// by parts: every part is
// small, so only the request's own limit can refuse it.
func padded(n int, parts ...string) []byte {
	var b bytes.Buffer
	line := strings.Repeat("p", 62) + "\r\n"
	b.WriteString(strings.Repeat(line, n/len(line)+1))
	mw := multipart.NewWriter(&b)
	mw.SetBoundary("B")
	for i := 0; i+1 < len(parts); i += 2 {
		h := textproto.MIMEHeader{"Content-Type": {"application/dicom"}}
		if parts[i] != "" {
			h.Set("Content-Disposition", `form-data; name="`+parts[i]+`"; filename="f"`)
		}
		w, _ := mw.CreatePart(h)
		w.Write([]byte(parts[i+1]))
	}
	mw.Close()
	return b.Bytes()
}

func TestEveryUploadRouteBoundsItsRequestNotOnlyItsScan(t *testing.T) {
	const scanCap = 1 << 10 // the request may be the scan cap and 1 MiB
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		route, contentType string
		parts              []string
	}{
		{"/v1/exams", "multipart/form-data; boundary=B", []string{"meta", `{"examId":"E1"}`, "scan", "x"}},
		{"/dicom-web/studies", `multipart/related; type="application/dicom"; boundary=B`, []string{"", "x"}},
	} {
		for _, pad := range []int{scanCap + 1<<20 + 1, 4 << 20} {
			srv := newServer(t, Config{Tokens: tokens, MaxScanBytes: scanCap, SpoolDir: t.TempDir()})
			req := httptest.NewRequest(http.MethodPost, tc.route, bytes.NewReader(padded(pad, tc.parts...)))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("Authorization", "Bearer dev")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			var p problems.Problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if rec.Code != http.StatusRequestEntityTooLarge || p.Type != "urn:octflow:problem:too-large" {
				t.Errorf("%s: a request of %d bytes whose scan is within the cap: %d %s (%s), want 413: the request's own bound",
					tc.route, pad, rec.Code, p.Type, p.Detail)
			}
		}
	}
}

// stowParts is a STOW-RS request (boundary B) of n parts.
func stowParts(n int) []byte {
	var parts []string
	for range n {
		parts = append(parts, "", "not DICOM")
	}
	return padded(0, parts...)
}

func TestADevicesRateCountsExamsOverBothRoutes(t *testing.T) {
	// Devices dev-a and dev-b (twoDevices), at rate.
	server := func(rate intake.RateLimit) *Server {
		return twoDevices(t, Config{SpoolDir: t.TempDir(), DeviceRate: rate})
	}
	stow := func(srv *Server, token string, instances int) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/dicom-web/studies", bytes.NewReader(stowParts(instances)))
		req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=B`)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	submit := func(srv *Server, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/exams", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json") // refused with 415 when admitted
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	limited := func(rec *httptest.ResponseRecorder) bool {
		return rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != ""
	}
	t.Run("STOW-RS requests are limited", func(t *testing.T) {
		srv := server(intake.RateLimit{PerMinute: 2, Burst: 2})
		for i := range 2 {
			if rec := stow(srv, "dev-a", 1); limited(rec) {
				t.Fatalf("STOW-RS request %d within the burst: %d", i, rec.Code)
			}
		}
		if rec := stow(srv, "dev-a", 1); !limited(rec) {
			t.Errorf("a third one-instance STOW-RS request within the burst of 2: %d, want 429 with Retry-After", rec.Code)
		}
		if rec := stow(srv, "dev-b", 1); limited(rec) {
			t.Errorf("another device was limited too: %d", rec.Code)
		}
	})
	t.Run("one bucket for both routes", func(t *testing.T) {
		srv := server(intake.RateLimit{PerMinute: 2, Burst: 2})
		if rec := submit(srv, "dev-a"); limited(rec) {
			t.Fatalf("first upload: %d", rec.Code)
		}
		if rec := stow(srv, "dev-a", 1); limited(rec) {
			t.Fatalf("then a STOW-RS request: %d", rec.Code)
		}
		if rec := submit(srv, "dev-a"); !limited(rec) {
			t.Errorf("a third exam by the other route within a burst of 2: %d, want 429", rec.Code)
		}
	})
	t.Run("each instance counts", func(t *testing.T) {
		srv := server(intake.RateLimit{PerMinute: 60, Burst: 64})
		if rec := stow(srv, "dev-a", 64); limited(rec) {
			t.Fatalf("a 64-instance request within a burst of 64: %d", rec.Code)
		}
		rec := submit(srv, "dev-a")
		if !limited(rec) {
			t.Fatalf("after 64 instances in one STOW-RS request the device's burst of 64 is spent, but the next upload got %d", rec.Code)
		}
		if ra := rec.Header().Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("Retry-After %q", ra)
		}
	})
	t.Run("a request over the burst is served once, then paid for", func(t *testing.T) {
		srv := server(intake.RateLimit{PerMinute: 60, Burst: 20})
		if rec := stow(srv, "dev-a", 64); limited(rec) {
			t.Fatalf("a 64-instance request from a device with a burst of 20: %d, want it served", rec.Code)
		}
		// 1 token a second: 44 seconds in debt, then a second to earn one.
		if rec := stow(srv, "dev-a", 1); !limited(rec) || retryAfterSeconds(rec) < 40 {
			t.Errorf("the next request: %d, Retry-After %q; want 429 for about 45 s", rec.Code, rec.Header().Get("Retry-After"))
		}
	})
}

func retryAfterSeconds(rec *httptest.ResponseRecorder) int {
	n, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	return n
}

func TestUrgentIsTakenOnlyFromDevicesAllowedToSendIt(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("plain"), Principal: auth.Principal{Name: "p", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("er"), Principal: auth.Principal{Name: "er", Role: auth.RoleDevice, DeviceID: "oct-er", Campus: "north", Urgent: true}},
		{SHA256: auth.HashToken("router"), Principal: auth.Principal{Name: "r", Role: auth.RoleRouter, DeviceID: "orthanc", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, SpoolDir: t.TempDir()})
	for _, tc := range []struct {
		name, token, route, priority string
		warned                       bool
	}{
		{"a device that may not", "plain", "/v1/exams", "urgent", true},
		{"a device that may not, by STOW-RS", "plain", "/dicom-web/studies", "urgent", true},
		{"a router that may not", "router", "/dicom-web/studies", "urgent", true},
		{"a device that may", "er", "/v1/exams", "urgent", false},
		{"a device that may, by STOW-RS", "er", "/dicom-web/studies", "urgent", false},
		{"normal from a device that may not", "plain", "/v1/exams", "normal", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *http.Request
			if tc.route == "/v1/exams" {
				ct, body := form("meta", `{"examId":"E1","priority":"`+tc.priority+`"}`, "scan", "not DICOM")
				req = httptest.NewRequest(http.MethodPost, tc.route, bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
			} else {
				req = httptest.NewRequest(http.MethodPost, tc.route, bytes.NewReader(stowParts(1)))
				req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=B`)
				req.Header.Set(PriorityHeader, tc.priority)
			}
			req.Header.Set("Authorization", "Bearer "+tc.token)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code >= 500 || rec.Code == http.StatusBadRequest {
				t.Fatalf("%d: %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get(intake.WarningHeader) != ""; got != tc.warned {
				t.Errorf("%s %s: warned %v (%q), want %v: urgent is taken only from a device allowed to send it",
					tc.priority, tc.route, got, rec.Header().Get(intake.WarningHeader), tc.warned)
			}
		})
	}
}

// startRecorder is a Temporal that knows no exam and notes the exam
// workflow a start asks for, then fails the start.
type startRecorder struct {
	conflictTemporal
	mu     sync.Mutex
	inputs []contract.ExamInput
}

func (s *startRecorder) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := args[0].(contract.ExamInput); ok {
		s.inputs = append(s.inputs, in)
	}
	return nil, errors.New("recorded, not started")
}

func TestAnUrgentExamFromADeviceThatMayNotSendItStartsAsNormal(t *testing.T) {
	var scan bytes.Buffer
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	if err := octdicom.WriteDICOM(&scan, p.Volume, octdicom.Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("plain"), Principal: auth.Principal{Name: "p", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("er"), Principal: auth.Principal{Name: "er", Role: auth.RoleDevice, DeviceID: "oct-er", Campus: "north", Urgent: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  exam.Priority
	}{{"plain", exam.Normal}, {"er", exam.Urgent}} {
		temporal := &startRecorder{}
		srv := newServer(t, Config{Tokens: tokens, SpoolDir: t.TempDir(), MaxScanBytes: 32 << 20,
			Temporal: temporal, Store: &storagetest.Memory{}})
		contentType, body := Multipart(intake.Meta{ExamID: "E-" + tc.token, Priority: "urgent"}, scan.Bytes())
		req := httptest.NewRequest(http.MethodPost, "/v1/exams", body)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		srv.ServeHTTP(httptest.NewRecorder(), req)
		temporal.mu.Lock()
		if len(temporal.inputs) != 1 || temporal.inputs[0].Submission.Priority != tc.want {
			t.Errorf("%s sent urgent: the exam was started as %+v, want %s", tc.token, temporal.inputs, tc.want)
		}
		temporal.mu.Unlock()
	}
}
