package e2e

// A campus is a tenant, and what is stored about a patient names no one.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"octflow/api"
	"octflow/api/apitest"
	"octflow/api/intake"
	"octflow/codec"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
)

func TestCampusesAreTenants(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	s := h.sys.Secrets
	a, b := s.Campus, devsystem.SecondCampus
	deviceA, deviceB := h.device, &api.Client{Base: h.sys.App.APIURL(), Token: s.Devices[1].Token}
	clinA, clinB := h.clin, &api.Client{Base: h.sys.App.APIURL(), Token: s.Clinicians[1].Token}

	// Both campuses number an exam E-0001; they are two exams.
	_, scanA := phantomDICOM(t, tiny(231))
	_, scanB := phantomDICOM(t, tiny(232))
	for _, d := range []struct {
		c    *api.Client
		scan []byte
	}{{deviceA, scanA}, {deviceB, scanB}} {
		if _, code, err := d.c.Submit(ctx, intake.Meta{ExamID: "E-0001", Priority: "urgent"}, d.scan); code != http.StatusAccepted {
			t.Fatalf("submit E-0001: %d %v", code, err)
		}
	}
	for _, c := range []*api.Client{clinA, clinB} {
		if st := h.waitForClient(c, "E-0001", func(s *api.ExamStatus) bool { return s.State.Terminal() }); st.State != lifecycle.Completed {
			t.Fatalf("E-0001 ended %s", st.State)
		}
	}
	stA, _ := clinA.Status(ctx, "E-0001")
	stB, _ := clinB.Status(ctx, "E-0001")
	if stA.Campus != a || stB.Campus != b || stA.Report.JSONKey == stB.Report.JSONKey {
		t.Errorf("each campus's E-0001: %s %s, %s %s", stA.Campus, stA.Report.JSONKey, stB.Campus, stB.Report.JSONKey)
	}
	// Another campus's scan under a taken ID is not a conflict there.
	if _, code, _ := deviceB.Submit(ctx, intake.Meta{ExamID: "E-0001", Priority: "urgent"}, scanB); code != http.StatusOK {
		t.Errorf("campus B's resend: %d, want 200", code)
	}

	// An exam only campus A has: campus B's device and clinician get the
	// same 404 as for an exam that does not exist, for everything.
	if _, code, err := deviceA.Submit(ctx, intake.Meta{ExamID: "A-only"}, scanA); code != http.StatusAccepted {
		t.Fatalf("submit A-only: %d %v", code, err)
	}
	h.waitFor("A-only", 2*60e9, func(s *api.ExamStatus) bool { return s.State.Terminal() })
	for _, c := range []struct {
		who          *api.Client
		method, path string
	}{
		{deviceB, http.MethodGet, "/v1/exams/A-only"},
		{clinB, http.MethodGet, "/v1/exams/A-only"},
		{clinB, http.MethodGet, "/v1/exams/A-only?campus=" + a},
		{clinB, http.MethodGet, "/v1/exams/A-only/events"},
		{clinB, http.MethodGet, "/v1/exams/A-only/report?format=json"},
		{clinB, http.MethodGet, "/v1/exams/A-only/report?campus=" + a},
		{clinB, http.MethodPost, "/v1/exams/A-only/review"},
		{clinB, http.MethodGet, "/v1/notifications?campus=" + a},
		{clinB, http.MethodGet, "/v1/exams/never-was"},
	} {
		var body io.Reader
		if c.method == http.MethodPost {
			body = strings.NewReader(`{"decision":"approve"}`)
		}
		req, _ := http.NewRequest(c.method, c.who.Base+c.path, body)
		req.Header.Set("Content-Type", "application/json")
		code, _ := c.who.Do(req, nil)
		if code != http.StatusNotFound {
			t.Errorf("%s %s by another campus: %d, want 404", c.method, c.path, code)
		}
	}
	// A resend of A's exam ID from campus B is a new exam of campus B,
	// not a conflict (which would tell B that A uses the ID).
	if _, code, _ := deviceB.Submit(ctx, intake.Meta{ExamID: "A-only"}, scanB); code != http.StatusAccepted {
		t.Errorf("campus B submitting A's exam ID: %d, want 202 (a different exam)", code)
	}
	// An admin sees every campus, and says which.
	admin := &api.Client{Base: h.sys.App.APIURL(), Token: s.Admin}
	for _, campus := range []string{a, b} {
		var st api.ExamStatus
		if err := admin.Get(ctx, "/v1/exams/E-0001?campus="+campus, &st); err != nil || st.Campus != campus {
			t.Errorf("admin reading %s's E-0001: %v %+v", campus, err, st)
		}
	}
	if err := admin.Get(ctx, "/v1/exams/E-0001", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("admin without a campus: %v, want 400", err)
	}
}

// waitForClient polls an exam through c until cond holds.
func (h *harness) waitForClient(c *api.Client, examID string, cond func(*api.ExamStatus) bool) *api.ExamStatus {
	h.t.Helper()
	return waitExam(h.t, c, examID, 2*time.Minute, cond)
}

// TestNothingIdentifyingIsStoredLoggedOrSentToTemporal submits a scan
// whose header names the patient and the visit, with a callback URL and a
// review note, and then searches every stored object, Temporal's
// database and every log line for any of it.
func TestNothingIdentifyingIsStoredLoggedOrSentToTemporal(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	p := imaging.NewPhantom(tiny(241))
	id := &octdicom.DeviceIdentity{PatientName: "DOE^JANE^Q", PatientBirthDate: "19580214", OtherPatientIDs: "NHS-943-476-5919",
		AccessionNumber: "ACC-20261130-0042", InstitutionName: "St Elsewhere Eye Hospital", ReferringPhysician: "HOUSE^GREGORY",
		OperatorsName: "NURSE^RATCHED", StudyDescription: "Jane Doe follow-up", StudyDate: "20261130", DeviceSerialNumber: "SN-77-1234"}
	h0 := octdicom.Header{SOPInstanceUID: "1.3.6.1.4.1.9590.100.1.2.1111", StudyInstanceUID: "1.3.6.1.4.1.9590.100.1.2.2222",
		SeriesInstanceUID: "1.3.6.1.4.1.9590.100.1.2.3333", PatientID: "MRN-4471982", Identity: id}
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, p.Volume, h0); err != nil {
		t.Fatal(err)
	}
	ws := httptestServer(t)
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "phi-1", CallbackURL: ws + "/hook-phi"}, scan.Bytes()); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if st := h.waitTerminal("phi-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	note := "Follow-up for Mrs Doe in 6 months"
	h.review(h.sys.Secrets.Clinician, "phi-1", "approve", note, http.StatusOK)

	identifying := []string{h0.PatientID, "4471982", id.PatientName, "DOE^JANE", id.PatientBirthDate, id.OtherPatientIDs, id.AccessionNumber,
		id.InstitutionName, id.ReferringPhysician, id.OperatorsName, id.StudyDescription, id.DeviceSerialNumber,
		h0.SOPInstanceUID, h0.StudyInstanceUID, h0.SeriesInstanceUID}
	// 1. Every stored object.
	keys, err := h.store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		b, err := h.store.ReadAll(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range identifying {
			if bytes.Contains(b, []byte(v)) || strings.Contains(k, v) {
				t.Errorf("stored object %s holds %q", k, v)
			}
		}
	}
	// 2. Temporal's database: nothing identifying, and no payload in
	// clear, not even what is only confidential (the callback URL, the
	// note, the pseudonym).
	var st api.ExamStatus
	if err := h.clin.Get(ctx, "/v1/exams/phi-1", &st); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		PatientRef string `json:"patientRef"`
	}
	if b, err := h.store.ReadAll(ctx, st.Report.JSONKey); err != nil || json.Unmarshal(b, &rep) != nil || !strings.HasPrefix(rep.PatientRef, "pt-") {
		t.Fatalf("report's pseudonym: %q %v", rep.PatientRef, err)
	}
	raw := readDatabase(t, h.sys.Stack.DataDir())
	for _, v := range append(identifying, ws+"/hook-phi", note, "centralSubfieldThicknessUm", rep.PatientRef) {
		if bytes.Contains(raw, []byte(v)) {
			t.Errorf("Temporal's database holds %q in clear", v)
		}
	}
	// 3. Every log line, at debug level.
	logs := h.logs.String()
	for _, v := range append(identifying, note) {
		if strings.Contains(logs, v) {
			t.Errorf("the logs hold %q", v)
		}
	}
	// The audit trail (the dev stack's audit.log) names who read and
	// reviewed which exam, and no patient.
	trail, err := os.ReadFile(filepath.Join(h.sys.Stack.DataDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(trail), `"action":"review"`) || !strings.Contains(string(trail), `/`+h.ref("phi-1").ID+`"`) {
		t.Error("the review is not in the audit trail")
	}
	for _, v := range append(identifying, note) {
		if strings.Contains(string(trail), v) {
			t.Errorf("the audit trail holds %q", v)
		}
	}

	// History payloads are ciphertext; the codec endpoint opens them for
	// a clinician (as the Web UI does, by its cookie) and nobody else.
	sealed := h.firstInput(t, "phi-1")
	if enc := string(sealed.GetMetadata()["encoding"]); enc != codec.Encoding {
		t.Fatalf("the exam's input is stored as %q, not sealed", enc)
	}
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, sealed))}})
	decode := func(c *http.Client, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/codec/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", h.sys.Stack.UIURL())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if origin := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode == http.StatusOK && origin != h.sys.Stack.UIURL() {
			t.Errorf("the codec does not allow the Web UI's origin: %q", origin)
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := decode(h.http, ""); code != http.StatusUnauthorized {
		t.Errorf("codec without a token: %d", code)
	}
	if code, _ := decode(h.http, h.sys.Secrets.Device); code != http.StatusForbidden {
		t.Errorf("codec for a device: %d", code)
	}
	jar, _ := cookiejar.New(nil)
	browser := apitest.Client(t, &http.Client{Jar: jar})
	resp, err := browser.PostForm(h.sys.App.APIURL()+"/codec/login", url.Values{"token": {h.sys.Secrets.Clinician}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("codec sign-in: %v %v", err, resp)
	}
	resp.Body.Close()
	code, opened := decode(browser, "")
	var answer struct {
		Payloads []struct {
			Metadata map[string][]byte `json:"metadata"`
			Data     []byte            `json:"data"`
		} `json:"payloads"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(opened), &answer) != nil || len(answer.Payloads) != 1 ||
		string(answer.Payloads[0].Metadata["encoding"]) != "json/plain" || !bytes.Contains(answer.Payloads[0].Data, []byte(`"examId":"`+h.ref("phi-1").ID+`"`)) {
		t.Fatalf("codec for a signed-in clinician: %d %s", code, opened)
	}
	// The Web UI is told to use it, with the browser's credentials.
	var settings struct {
		Codec struct {
			Endpoint           string
			IncludeCredentials bool
		}
	}
	sresp, err := http.Get(h.sys.Stack.UIURL() + "/api/v1/settings")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(sresp.Body).Decode(&settings)
	sresp.Body.Close()
	if settings.Codec.Endpoint != h.sys.App.APIURL()+"/codec" || !settings.Codec.IncludeCredentials {
		t.Errorf("Web UI codec settings %+v", settings.Codec)
	}
}

// httptestServer is a workstation on loopback that accepts events.
func httptestServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// readDatabase reads Temporal's SQLite files (databases and journals).
func readDatabase(t *testing.T, dataDir string) []byte {
	t.Helper()
	var all []byte
	// The main store and the visibility store, each with its journal.
	files, err := filepath.Glob(filepath.Join(dataDir, "temporal*.db*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if len(all) == 0 {
		t.Fatal("Temporal's database is empty")
	}
	return all
}

// firstInput is the exam's workflow input as Temporal stores it (the
// history iterator hands payloads over as stored).
func (h *harness) firstInput(t *testing.T, examID string) *commonpb.Payload {
	t.Helper()
	it := h.sys.App.Client().GetWorkflowHistory(context.Background(), h.examWF(examID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			return a.GetInput().GetPayloads()[0]
		}
	}
	t.Fatal("no start event")
	return nil
}

// mustProtoJSON is a payload as the codec protocol carries it.
func mustProtoJSON(t *testing.T, p *commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
