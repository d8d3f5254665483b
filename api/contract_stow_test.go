package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"testing"

	"go.uber.org/zap/zapcore"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/audit"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
)

// STOW-RS refusals, answered before anything is stored, held to
// api/openapi.yaml: a request of instances none of which is DICOM is 409
// with a Failed SOP Sequence in DICOM JSON, or 400 with the same answer
// for a client that asks for it (X-Octflow-Refusal-Status).
func TestStoreInstancesAnswersAsItsContractSays(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := api.New(api.Config{
		Tokens: tokens, Policy: exam.DefaultPolicy(), SpoolDir: t.TempDir(), DeviceRate: intake.RateLimit{PerMinute: 6000, Burst: 1000},
		Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		AuditTrail:    audit.NewLogSink(zapcore.AddSync(io.Discard), audit.Source{ID: "api"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	client := apitest.Client(t, srv.Client())

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, ct := range []string{"application/dicom", "text/plain"} {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {ct}})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "no DICOM instance")
	}
	mw.Close()
	related := `multipart/related; type="application/dicom"; boundary=` + mw.Boundary()

	var refusalStatus string // X-Octflow-Refusal-Status, when set
	var accept string        // Accept, when set
	path := "/dicom-web/studies"
	store := func(token, contentType string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", contentType)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if refusalStatus != "" {
			req.Header.Set(api.RefusalStatusHeader, refusalStatus)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("POST %s (Accept %q, Content-Type %s): %d %s, want %d", path, accept, contentType, resp.StatusCode, b, want)
		}
		return b
	}
	store("clin", related, http.StatusForbidden)
	store("dev", "multipart/form-data; boundary="+mw.Boundary(), http.StatusUnsupportedMediaType)
	answer := store("dev", related, http.StatusConflict)
	var got map[string]struct {
		Value []map[string]struct{ Value []any }
	}
	if err := json.Unmarshal(answer, &got); err != nil || len(got["00081198"].Value) != 2 {
		t.Errorf("want two instances in the Failed SOP Sequence: %s (%v)", answer, err)
	}

	// A client that tells only 400 apart (Orthanc's) asks for refusals no
	// resend mends as 400: the same answer, and the same problems.
	refusalStatus = "400"
	if again := store("dev", related, http.StatusBadRequest); !bytes.Equal(again, answer) {
		t.Errorf("with %s 400: %s, want the 409's answer %s", api.RefusalStatusHeader, again, answer)
	}
	store("dev", "multipart/form-data; boundary="+mw.Boundary(), http.StatusBadRequest)
	store("clin", related, http.StatusForbidden)
	refusalStatus = ""

	// The type parameter bare, as many senders write it: the same answer.
	if bare := store("dev", "multipart/related; type=application/dicom; boundary="+mw.Boundary(), http.StatusConflict); !bytes.Equal(bare, answer) {
		t.Errorf("type=application/dicom unquoted: %s, want the quoted one's answer %s", bare, answer)
	}
	// An Accept that allows the DICOM JSON answer, and one that does not.
	for _, c := range []struct {
		accept string
		want   int
	}{
		{"application/dicom+json", http.StatusConflict},
		{"application/dicom+xml, application/dicom+json;q=0.5", http.StatusConflict},
		{"*/*", http.StatusConflict},
		{"application/dicom+xml", http.StatusConflict},
		{"application/dicom+json;q=0, application/dicom+xml", http.StatusConflict},
		{"text/html", http.StatusNotAcceptable},
		{"application/dicom+json;q=0, application/dicom+xml;q=0", http.StatusNotAcceptable},
	} {
		accept = c.accept
		store("dev", related, c.want)
	}
	accept = ""
	// The study resource: the same intake (these parts are no DICOM,
	// refused one by one), and a path that names no UID refused whole.
	path = "/dicom-web/studies/2.25.4711"
	store("dev", related, http.StatusConflict)
	path = "/dicom-web/studies/not-a-uid"
	store("dev", related, http.StatusBadRequest)
}

// A scan too large ever to validate (its header asks for more memory
// than the gateway validates at once) is refused with C000H, a refusal
// no resend mends, never A700H (out of resources), which senders send
// again and again.
func TestAScanTooLargeEverToValidateIsRefusedForGood(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := api.New(api.Config{
		Tokens: tokens, Policy: exam.DefaultPolicy(), SpoolDir: t.TempDir(),
		Uploads:       intake.Limits{ValidationBytes: 64 << 10},
		Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef")),
		AuditTrail:    audit.NewLogSink(zapcore.AddSync(io.Discard), audit.Source{ID: "api"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 128, Cols: 128}).Volume,
		octdicom.Header{SOPInstanceUID: "2.25.4242", PatientID: "BIG-1"}); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(scan.Bytes())
	mw.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/dicom-web/studies", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer dev")
	req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary())
	resp, err := apitest.Client(t, srv.Client()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]struct {
		Value []map[string]struct{ Value []any }
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatal(err)
	}
	failed := answer["00081198"].Value
	if resp.StatusCode != http.StatusConflict || len(failed) != 1 || fmt.Sprint(failed[0]["00081197"].Value) != "[49152]" {
		t.Errorf("a scan too large to validate: %d %+v, want 409 with C000H (49152)", resp.StatusCode, answer)
	}
}
