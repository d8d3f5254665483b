package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom"
)

// A campus with a PACS (a real Orthanc with its DICOMweb plugin) gets
// every COMPLETED exam's results filed in the patient's own study: the
// report as Encapsulated PDF and, for a macular cube, the TID 2100 SR.
// The export goes on its own: with the PACS down it waits and tries
// again, and once the PACS is back it delivers, once; a PACS that
// refuses an object makes the export failed, visibly, never the exam
// DEAD; an admin sends it again once the PACS takes it.
func TestResultsGoToThePACSOnceAndAFailedExportIsSentAgain(t *testing.T) {
	plugin := needOrthanc(t)
	dir := t.TempDir()
	refuseSR := filepath.Join(dir, "refuse-sr")
	lua := filepath.Join(dir, "refuse.lua")
	if err := os.WriteFile(lua, []byte(fmt.Sprintf(`function ReceivedInstanceFilter(dicom, origin, info)
  if dicom.Modality == "SR" then
    local f = io.open(%q, "r")
    if f ~= nil then
      io.close(f)
      return false
    end
  end
  return true
end
`, refuseSR)), 0o600); err != nil {
		t.Fatal(err)
	}
	orthanc := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true},
		"LuaScripts": []string{"refuse.lua"}}, nil, lua)
	h := newHarness(t, 1, func(c *devsystem.Config) { c.PACSURL = orthanc.base + "/dicom-web" })
	ctx := context.Background()

	submit := func(id string, n int) string {
		t.Helper()
		study := fmt.Sprintf("2.25.2900%d", n)
		var scan bytes.Buffer
		if err := octdicom.WriteDICOM(&scan, imaging.NewPhantom(small(uint64(290+n))).Volume, octdicom.Header{
			SOPInstanceUID: fmt.Sprintf("2.25.2901%d", n), StudyInstanceUID: study, SeriesInstanceUID: fmt.Sprintf("2.25.2902%d", n),
			PatientID: fmt.Sprintf("EXPORT-PATIENT-%d", n)}); err != nil {
			t.Fatal(err)
		}
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: "urgent"}, scan.Bytes()); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
		return study
	}
	export := func(id string, cond func(*api.ExportInfo) bool) *api.ExamStatus {
		t.Helper()
		return h.waitFor(id, 3*time.Minute, func(s *api.ExamStatus) bool { return s.Export != nil && cond(s.Export) })
	}
	// filed lists the instances Orthanc holds in a study, by modality,
	// each checked to be filed under the study's own patient.
	filed := func(study string, n int) map[string]int {
		t.Helper()
		var ids []string
		orthanc.call(http.MethodPost, "/tools/find", strings.NewReader(fmt.Sprintf(`{"Level":"Instance","Query":{"StudyInstanceUID":%q}}`, study)), &ids)
		out := map[string]int{}
		for _, id := range ids {
			var tags map[string]any
			orthanc.call(http.MethodGet, "/instances/"+id+"/simplified-tags", nil, &tags)
			if tags["PatientID"] != fmt.Sprintf("EXPORT-PATIENT-%d", n) {
				t.Errorf("instance %s of study %s filed under patient %v", id, study, tags["PatientID"])
			}
			out[fmt.Sprint(tags["Modality"])]++
		}
		return out
	}
	wantFiled := map[string]int{"DOC": 1, "SR": 1} // the report PDF and the macular SR

	// Delivered once, in the patient's study; the exam was COMPLETED
	// whatever the PACS did.
	study1 := submit("export-1", 1)
	st := export("export-1", func(x *api.ExportInfo) bool { return x.Status != contract.ExportPending })
	if st.State != lifecycle.Completed || st.Export.Status != contract.ExportDelivered || st.Export.Instances != 2 || st.Export.DeliveredAt == nil {
		t.Fatalf("export-1: %s, export %+v", st.State, st.Export)
	}
	if got := filed(study1, 1); fmt.Sprint(got) != fmt.Sprint(wantFiled) {
		t.Errorf("Orthanc holds %v in study %s, want %v", got, study1, wantFiled)
	}
	// The clinicians' stream says so, after the report-ready event.
	kinds := map[contract.EventKind]bool{}
	for _, e := range h.readEvents(0, 2) {
		if e.event.ExamID == h.ref("export-1").ID {
			kinds[e.event.Kind] = true
		}
	}
	if !kinds[""] && !kinds[contract.EventReportReady] || !kinds[contract.EventResultsFiled] {
		t.Errorf("events of export-1 on the stream: %v, want report-ready and results-filed", kinds)
	}
	// A delivered export is not sent again.
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/exams/export-1/export?campus="+h.sys.Secrets.Campus, nil, http.StatusConflict, nil)

	// The PACS is down: the exam completes, its export waits and tries
	// again, and delivers once the PACS is back, with no duplicate.
	orthanc.stop()
	study2 := submit("export-2", 2)
	st = export("export-2", func(x *api.ExportInfo) bool { return x.Tries >= 2 })
	if st.State != lifecycle.Completed || st.Export.Status != contract.ExportPending || !strings.Contains(st.Export.Failure, "did not answer") {
		t.Fatalf("export-2 with the PACS down: %s, export %+v", st.State, st.Export)
	}
	orthanc.start()
	st = export("export-2", func(x *api.ExportInfo) bool { return x.Status != contract.ExportPending })
	if st.Export.Status != contract.ExportDelivered {
		t.Fatalf("export-2 once the PACS is back: %+v", st.Export)
	}
	if got := filed(study2, 2); fmt.Sprint(got) != fmt.Sprint(wantFiled) {
		t.Errorf("Orthanc holds %v in study %s, want %v", got, study2, wantFiled)
	}

	// The PACS refuses the SR: the export fails, visibly, the exam stays
	// COMPLETED; after the fix an admin sends it again and it delivers.
	if err := os.WriteFile(refuseSR, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	failedBefore := metricSum(t, h, "octflow_exports_total", `outcome="failed"`)
	study3 := submit("export-3", 3)
	st = export("export-3", func(x *api.ExportInfo) bool { return x.Status != contract.ExportPending })
	if st.State != lifecycle.Completed || st.Export.Status != contract.ExportFailed || !strings.Contains(st.Export.Failure, "refused") {
		t.Fatalf("export-3 refused: %s, export %+v", st.State, st.Export)
	}
	// The worker counts it: an operator's alert sees the failed export.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		after := metricSum(t, h, "octflow_exports_total", `outcome="failed"`)
		if after >= failedBefore+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("octflow_exports_total{outcome=\"failed\"} on the worker's /metrics went from %v to %v; want one more", failedBefore, after)
		}
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/export-3/events", http.StatusOK, &events)
	if last := events[len(events)-1]; last.Info["export"] != string(contract.ExportFailed) || last.To != lifecycle.Completed {
		t.Errorf("timeline ends %+v, want the failed export", last)
	}
	if err := os.Remove(refuseSR); err != nil {
		t.Fatal(err)
	}
	h.call(http.MethodPost, h.sys.Secrets.Clinician, "/v1/exams/export-3/export", nil, http.StatusForbidden, nil)
	h.call(http.MethodPost, h.sys.Secrets.Admin, "/v1/exams/export-3/export?campus="+h.sys.Secrets.Campus, nil, http.StatusAccepted, nil)
	st = export("export-3", func(x *api.ExportInfo) bool { return x.Status == contract.ExportDelivered })
	if got := filed(study3, 3); fmt.Sprint(got) != fmt.Sprint(wantFiled) {
		t.Errorf("after the rerun Orthanc holds %v in study %s, want %v", got, study3, wantFiled)
	}
	if n := h.stageRuns("export-3", "report"); n != 1 {
		t.Errorf("the report ran %d times, want once", n)
	}
}

// A campus's PACS named as production names it (OCTFLOW_PACS_FILE): an
// Orthanc that lets in only its registered user, reached over HTTPS
// through a TLS front with a certificate of the site's own CA (Debian's
// Orthanc 1.10 cannot serve TLS itself: its civetweb crashes on the
// handshake with OpenSSL 3). The export trusts that CA from the file's
// caFile and signs in with the username and password files it names:
// the results are delivered into the patient's study. A client that
// does not trust the CA does not get through the front.
func TestResultsGoToACampussPACSOverTLSWithItsCredentials(t *testing.T) {
	plugin := needOrthanc(t)
	dir := t.TempDir()
	orthanc := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true},
		"AuthenticationEnabled": true, "RegisteredUsers": map[string]string{"octflow-export": "pacs-s3cret"}}, nil)
	// Without credentials the PACS lets nobody in.
	if resp, err := http.Get(orthanc.base + "/dicom-web/studies"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Orthanc without credentials: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	back, err := url.Parse(orthanc.base)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(back))
	t.Cleanup(front.Close)
	if _, err := http.Get(front.URL + "/system"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the front's CA: %v, want a certificate error", err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})
	files := map[string][]byte{"ca.pem": ca, "user": []byte("octflow-export\n"), "password": []byte("pacs-s3cret\n")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pacsFile := filepath.Join(dir, "pacs.json")
	// The second campus names the same PACS without the site's CA: its
	// export must not get through on the system's CAs.
	writePACSFile(t, pacsFile, map[string]any{devsystem.FirstCampus: map[string]any{"url": front.URL + "/dicom-web",
		"caFile": filepath.Join(dir, "ca.pem"), "usernameFile": filepath.Join(dir, "user"), "passwordFile": filepath.Join(dir, "password")},
		devsystem.SecondCampus: map[string]any{"url": front.URL + "/dicom-web",
			"usernameFile": filepath.Join(dir, "user"), "passwordFile": filepath.Join(dir, "password")}})
	h := newHarness(t, 1, func(c *devsystem.Config) { c.PACSFile = pacsFile })
	if h.sys.Secrets.Campus != devsystem.FirstCampus {
		t.Fatalf("the dev system's campus is %q, the PACS file names %q", h.sys.Secrets.Campus, devsystem.FirstCampus)
	}
	ctx := context.Background()
	var scan bytes.Buffer
	study := "2.25.29101"
	if err := octdicom.WriteDICOM(&scan, imaging.NewPhantom(small(295)).Volume, octdicom.Header{
		SOPInstanceUID: "2.25.29102", StudyInstanceUID: study, SeriesInstanceUID: "2.25.29103", PatientID: "TLS-PATIENT-1"}); err != nil {
		t.Fatal(err)
	}
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "export-tls", Priority: "urgent"}, scan.Bytes()); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	st := h.waitFor("export-tls", 3*time.Minute, func(s *api.ExamStatus) bool {
		return s.Export != nil && s.Export.Status != contract.ExportPending
	})
	if st.Export.Status != contract.ExportDelivered || st.Export.Instances != 2 {
		t.Fatalf("export over TLS: %+v", st.Export)
	}
	var ids []string
	orthanc.call(http.MethodPost, "/tools/find", strings.NewReader(fmt.Sprintf(`{"Level":"Instance","Query":{"StudyInstanceUID":%q}}`, study)), &ids)
	if len(ids) != 2 {
		t.Errorf("Orthanc holds %d instances in the patient's study, want the report and the SR", len(ids))
	}

	// The campus without the CA: the export is tried and not delivered,
	// saying why.
	north := &api.Client{Base: h.sys.App.APIURL(), Token: h.sys.Secrets.Devices[1].Token}
	var other bytes.Buffer
	if err := octdicom.WriteDICOM(&other, imaging.NewPhantom(small(296)).Volume, octdicom.Header{
		SOPInstanceUID: "2.25.29112", StudyInstanceUID: "2.25.29111", SeriesInstanceUID: "2.25.29113", PatientID: "TLS-PATIENT-2"}); err != nil {
		t.Fatal(err)
	}
	if _, code, err := north.Submit(ctx, intake.Meta{ExamID: "export-untrusted", Priority: "urgent"}, other.Bytes()); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit to the second campus: %d %v", code, err)
	}
	northClin := &api.Client{Base: h.sys.App.APIURL(), Token: h.sys.Secrets.Clinicians[1].Token}
	st = waitExam(t, northClin, "export-untrusted", 3*time.Minute, func(s *api.ExamStatus) bool {
		return s.Export != nil && s.Export.Failure != ""
	})
	if st.Export.Status == contract.ExportDelivered || !strings.Contains(st.Export.Failure, "TLS certificate is not trusted") {
		t.Errorf("an export to a PACS whose CA the campus does not name: %+v, want it not delivered for the certificate", st.Export)
	}
}

// writePACSFile writes a PACS file (OCTFLOW_PACS_FILE) of entries.
func writePACSFile(t *testing.T, path string, entries map[string]any) {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// metricSum is the sum of the samples of the metric name whose labels
// include every one of labels on the worker's /metrics (0 where none).
func metricSum(t *testing.T, h *harness, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(h.sys.App.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, v := range metricSamples(b, name, labels...) {
		sum += v
	}
	return sum
}
