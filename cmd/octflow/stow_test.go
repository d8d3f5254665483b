package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"

	"octflow/api"
	"octflow/devstack"
	"octflow/imaging"
	"octflow/imaging/hostile"
	"octflow/lifecycle"
)

// stowAnswer is a STOW-RS answer in DICOM JSON: attribute → {vr, Value}.
type stowAnswer map[string]struct {
	VR    string            `json:"vr"`
	Value []json.RawMessage `json:"Value"`
}

// items is the answer's sequence tag (e.g. 00081199) as items.
func (a stowAnswer) items(t *testing.T, seq string) []stowAnswer {
	t.Helper()
	var out []stowAnswer
	for _, raw := range a[seq].Value {
		var it stowAnswer
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatalf("%s item %s: %v", seq, raw, err)
		}
		out = append(out, it)
	}
	return out
}

// str is the item's first value of attribute tag, as a string.
func (a stowAnswer) str(tag string) string {
	if v := a[tag].Value; len(v) > 0 {
		var s string
		if json.Unmarshal(v[0], &s) == nil {
			return s
		}
		return string(v[0])
	}
	return ""
}

// stow sends parts (each one DICOM instance) to POST /dicom-web/studies.
func (h *harness) stow(token, priority string, parts ...[]byte) (int, stowAnswer) {
	h.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
		if err != nil {
			h.t.Fatal(err)
		}
		_, _ = w.Write(p)
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/dicom-web/studies", &body)
	req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary())
	req.Header.Set("Authorization", "Bearer "+token)
	if priority != "" {
		req.Header.Set(api.PriorityHeader, priority)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a stowAnswer
	if resp.Header.Get("Content-Type") == "application/dicom+json" {
		if err := json.Unmarshal(b, &a); err != nil {
			h.t.Fatalf("answer %s: %v", b, err)
		}
	}
	return resp.StatusCode, a
}

// ctInstance is a small CT Image object: DICOM, readable, not OCT.
func ctInstance(t *testing.T) []byte {
	t.Helper()
	el := func(tg tag.Tag, v any) *dicom.Element {
		e, err := dicom.NewElement(tg, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	const ct = "1.2.840.10008.5.1.4.1.1.2"
	ds := dicom.Dataset{Elements: []*dicom.Element{
		el(tag.MediaStorageSOPClassUID, []string{ct}), el(tag.MediaStorageSOPInstanceUID, []string{"2.25.2002"}),
		el(tag.TransferSyntaxUID, []string{uid.ExplicitVRLittleEndian}),
		el(tag.SOPClassUID, []string{ct}), el(tag.SOPInstanceUID, []string{"2.25.2002"}), el(tag.Modality, []string{"CT"}),
		el(tag.PatientID, []string{"CT-PATIENT-9"}),
	}}
	var b bytes.Buffer
	if err := dicom.Write(&b, ds); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A router stores a request mixing an OCT instance, a CT instance and a
// part that is no DICOM: the OCT instance becomes one exam and runs to a
// report; the other two are refused one by one with their reasons. The
// same instance sent again is the same exam; other bytes under its SOP
// Instance UID are refused.
func TestSTOWRSStoresEachOCTInstanceAsOneExam(t *testing.T) {
	h := newHarness(t, 1)
	oct := func(seed uint64) []byte {
		p := imaging.NewPhantom(tiny(seed))
		var b bytes.Buffer
		if err := imaging.WriteDICOM(&b, p.Volume, imaging.Header{SOPInstanceUID: "2.25.1001", PatientID: "STOW-PATIENT-1",
			Identity: &imaging.Identity{DeviceSerialNumber: "SN4711"}}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	scan := oct(251)

	code, a := h.stow(h.sys.Secrets.Router, "urgent", scan, ctInstance(t), []byte("not a DICOM object"))
	if code != http.StatusAccepted {
		t.Fatalf("a request with one storable instance of three: %d %v, want 202", code, a)
	}
	stored := a.items(t, "00081199")
	if len(stored) != 1 || stored[0].str("00081155") != "2.25.1001" || stored[0].str("00081150") != imaging.OphthalmicTomographySOPClass {
		t.Fatalf("referenced %v, want the OCT instance", stored)
	}
	var reasons []string
	for _, f := range a.items(t, "00081198") {
		reasons = append(reasons, f.str("00081197"))
	}
	slices.Sort(reasons)
	// 0x0122 (290): SOP class not supported; 0xC000 (49152): cannot understand.
	if want := []string{"290", "49152"}; !slices.Equal(reasons, want) {
		t.Errorf("failure reasons %v, want %v", reasons, want)
	}
	ref := h.ref("sop:2.25.1001")
	if loc := stored[0].str("00081190"); !strings.Contains(loc, "/v1/exams/"+ref.ID) {
		t.Errorf("retrieve URL %q does not name the exam %s", loc, ref.ID)
	}

	// Sent again: the same exam, counted as stored.
	if code, a := h.stow(h.sys.Secrets.Router, "", scan); code != http.StatusOK || len(a.items(t, "00081199")) != 1 {
		t.Errorf("the same instance again: %d %v, want 200 with it stored", code, a)
	}
	// Other bytes under its SOP Instance UID: refused, the first kept.
	if code, a := h.stow(h.sys.Secrets.Router, "", oct(252)); code != http.StatusConflict ||
		len(a.items(t, "00081198")) != 1 || a.items(t, "00081198")[0].str("00081197") != "273" {
		t.Errorf("another instance under a stored SOP Instance UID: %d %v, want 409 with reason 0x0111", code, a)
	}
	// The hostile corpus, every file a part of one request: each is
	// refused on its own (unreadable, or too large to validate), nothing
	// is stored, and the gateway goes on.
	var corpus [][]byte
	for _, f := range hostile.Files() {
		corpus = append(corpus, f.Data)
	}
	code, a = h.stow(h.sys.Secrets.Router, "", corpus...)
	if failed := a.items(t, "00081198"); code != http.StatusConflict || len(failed) != len(corpus) || len(a.items(t, "00081199")) != 0 {
		t.Errorf("the hostile corpus: %d, %d failed of %d, want 409 and every one failed", code, len(failed), len(corpus))
	} else {
		for i, f := range failed {
			if r := f.str("00081197"); r != "49152" && r != "42752" {
				t.Errorf("%s: failure reason %s, want C000H or A700H", hostile.Files()[i].Name, r)
			}
		}
	}
	// A body cut short after a stored instance: the request fails as a
	// whole (400), never a 200 that names only what was read.
	var cut bytes.Buffer
	mw := multipart.NewWriter(&cut)
	w, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
	_, _ = w.Write(scan)
	req, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/dicom-web/studies", bytes.NewReader(cut.Bytes()))
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Router)
	req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary())
	if resp, err := h.http.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a cut body: %v %v, want 400", resp, err)
	} else {
		resp.Body.Close()
	}
	// Not STOW-RS at all.
	req, _ = http.NewRequest(http.MethodPost, h.sys.App.APIURL()+"/dicom-web/studies", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+h.sys.Secrets.Router)
	req.Header.Set("Content-Type", "application/dicom")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a bare DICOM body: %v %v, want 415", resp, err)
	} else {
		resp.Body.Close()
	}

	st := waitExam(t, h.clin, ref.ID, 2*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
	if st.State != lifecycle.Completed || st.Report == nil || st.Priority != "urgent" || st.Runs != 1 {
		t.Fatalf("the stored instance's exam: %+v", st)
	}
	rep, _ := h.readReport(st.Report.JSONKey)
	if rep.DeviceID != "demo-router.SN4711" {
		t.Errorf("the exam's device %q, want the router's ID and the instance's Device Serial Number", rep.DeviceID)
	}
	if n := h.executions("sop:2.25.1001"); n != 1 {
		t.Errorf("the instance ran %d times", n)
	}
}

// Orthanc, a real PACS and DICOM router, stores a real SPECTRALIS scan
// in octflow with its DICOMweb client (STOW-RS, a router token): the
// exam completes with an RNFL report.
func TestOrthancStoresARealScanThroughSTOWRS(t *testing.T) {
	plugin := needOrthanc(t)
	h := newHarness(t, 1)
	scan, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-2.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	orthanc := startOrthanc(t, map[string]any{
		"Plugins": []string{plugin},
		"DicomWeb": map[string]any{"Enable": true, "Servers": map[string]any{
			"octflow": map[string]any{"Url": h.sys.App.APIURL() + "/dicom-web/", "HttpHeaders": map[string]string{
				"Authorization": "Bearer " + h.sys.Secrets.Router, api.PriorityHeader: "urgent"}},
		}},
	}, nil)

	var uploaded struct{ ID string }
	orthanc.call(http.MethodPost, "/instances", bytes.NewReader(scan), &uploaded)
	var tags map[string]any
	orthanc.call(http.MethodGet, "/instances/"+uploaded.ID+"/simplified-tags", nil, &tags)
	sop, _ := tags["SOPInstanceUID"].(string)
	if uploaded.ID == "" || sop == "" {
		t.Fatalf("Orthanc took the scan as %q (SOP Instance %q)", uploaded.ID, sop)
	}
	var job map[string]any
	orthanc.call(http.MethodPost, "/dicom-web/servers/octflow/stow", strings.NewReader(`{"Resources": ["`+uploaded.ID+`"], "Synchronous": true}`), &job)

	ref := h.ref("sop:" + sop)
	st := waitExam(t, h.clin, ref.ID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
	if st.State != lifecycle.Completed || st.Report == nil || st.Report.Summary.RNFLGlobalUm == nil || st.Priority != "urgent" {
		t.Fatalf("the exam Orthanc stored: %+v", st)
	}
	t.Logf("Orthanc's STOW-RS: %v; exam %s %s, RNFL global %.1f µm", job, ref.ID, st.State, *st.Report.Summary.RNFLGlobalUm)
}

// orthancRecipe is the shipped Orthanc recipe (read before a test moves
// the working directory).
var orthancRecipe, _ = filepath.Abs("../../deploy/orthanc")

// needOrthanc skips (fails in CI) without Orthanc and its DICOMweb
// plugin, and returns the plugin's path.
func needOrthanc(t *testing.T) string {
	t.Helper()
	plugin := "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"
	if _, err := exec.LookPath("Orthanc"); err != nil || !fileExists(plugin) {
		if os.Getenv("CI") != "" {
			t.Fatal("Orthanc or its DICOMweb plugin missing: .ci/run should have installed orthanc and orthanc-dicomweb")
		}
		t.Skip("Orthanc not installed (apt-get install orthanc orthanc-dicomweb)")
	}
	return plugin
}

// A device sends real scans by C-STORE (DCMTK's storescu) to an Orthanc
// configured with the shipped recipe (deploy/orthanc): Orthanc forwards
// each OCT instance to octflow by STOW-RS with a router token. octflow is
// away when the first forward comes (its load balancer answers 503): the
// recipe's job retry sends it again, and every exam completes, once.
func TestARouterForwardsDeviceCStoresToOctflow(t *testing.T) {
	needOrthanc(t)
	if _, err := exec.LookPath("storescu"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("storescu missing: .ci/run should have installed dcmtk")
		}
		t.Skip("storescu not installed (apt-get install dcmtk)")
	}
	h := newHarness(t, 1)
	// octflow's front: away for the first STOW-RS requests, then through.
	target, err := url.Parse(h.sys.App.APIURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused.Load() < 2 {
			refused.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "octflow is being deployed", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	recipe := func(name string) string { return filepath.Join(orthancRecipe, name) }
	orthanc := startOrthanc(t, map[string]any{}, []string{
		"OCTFLOW_DICOMWEB_URL=" + front.URL + "/dicom-web/", "OCTFLOW_ROUTER_TOKEN=" + h.sys.Secrets.Router,
		"OCTFLOW_RETRY_PAUSE_S=1",
	}, recipe("octflow.json"), recipe("octflow-forward.lua"))

	names := []string{"spectralis-circle-2.dcm", "spectralis-line-0.dcm"}
	var files, sops []string
	for _, n := range names {
		path := filepath.Join(realData, n)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := f.Stat()
		scan, err := imaging.ParseScan(f, info.Size())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		files, sops = append(files, path), append(sops, scan.Header.SOPInstanceUID)
	}
	// What a device does: one association, C-STORE of each scan.
	out, err := exec.Command("storescu", append([]string{"-aec", "ORTHANC", "127.0.0.1", orthanc.dicomPort}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("storescu: %v\n%s", err, out)
	}
	for i, sop := range sops {
		ref := h.ref("sop:" + sop)
		st := waitExam(t, h.clin, ref.ID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
		if st.State != lifecycle.Completed || st.Report == nil {
			t.Fatalf("%s: the exam ended %s: %+v", names[i], st.State, st.LastFailure)
		}
		if n := h.executions("sop:" + sop); n != 1 {
			t.Errorf("%s ran %d times", names[i], n)
		}
	}
	if refused.Load() < 2 {
		t.Errorf("octflow's front refused %d forwards; the retry was not exercised", refused.Load())
	}

	// A refusal no try can mend (a wrong token) is not retried.
	wrong := startOrthanc(t, map[string]any{}, []string{
		"OCTFLOW_DICOMWEB_URL=" + h.sys.App.APIURL() + "/dicom-web/", "OCTFLOW_ROUTER_TOKEN=not-a-token",
		"OCTFLOW_RETRY_PAUSE_S=1",
	}, recipe("octflow.json"), recipe("octflow-forward.lua"))
	if out, err := exec.Command("storescu", "-aec", "ORTHANC", "127.0.0.1", wrong.dicomPort, files[0]).CombinedOutput(); err != nil {
		t.Fatalf("storescu: %v\n%s", err, out)
	}
	var jobs []struct {
		Type, State string
		Content     struct{ FunctionErrorCode int }
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		wrong.call(http.MethodGet, "/jobs?expand", nil, &jobs)
		if len(jobs) > 0 && jobs[0].State == "Failure" || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(3 * time.Second) // a retry would come after 1 s
	wrong.call(http.MethodGet, "/jobs?expand", nil, &jobs)
	if len(jobs) != 1 || jobs[0].State != "Failure" || jobs[0].Content.FunctionErrorCode != 29 {
		t.Errorf("with a wrong token: jobs %+v, want one failed STOW-RS job (Unauthorized) and no retry", jobs)
	}
}

// orthancProc is an Orthanc started by a test, reached on its REST API
// and its DICOM port.
type orthancProc struct {
	t         *testing.T
	base      string
	dicomPort string
}

// startOrthanc runs Orthanc on loopback ports in the test's directory,
// configured by conf (ports and storage added) and the configuration
// files and scripts files (copied beside it), with env added to its
// environment; it stops with the test.
func startOrthanc(t *testing.T, conf map[string]any, env []string, files ...string) *orthancProc {
	t.Helper()
	addrs, err := devstack.FreeAddrs("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	dir := t.TempDir()
	maps.Copy(conf, map[string]any{
		"Name": "octflow-test", "StorageDirectory": filepath.Join(dir, "db"), "IndexDirectory": filepath.Join(dir, "db"),
		"HttpPort": json.Number(port(addrs[0])), "DicomPort": json.Number(port(addrs[1])),
		"RemoteAccessAllowed": false, "AuthenticationEnabled": false,
	})
	b, _ := json.Marshal(conf)
	confDir := filepath.Join(dir, "conf")
	if err := os.Mkdir(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "test.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(confDir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	cmd := exec.Command("Orthanc", confDir)
	cmd.Dir = confDir // relative paths in the configuration (Lua scripts) are its own
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("Orthanc's log:\n%s", logs.String())
		}
	})
	o := &orthancProc{t: t, base: "http://" + addrs[0], dicomPort: port(addrs[1])}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(o.base + "/system"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return o
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Orthanc did not come up: %s", logs.String())
		}
	}
}

// call makes a request of Orthanc's REST API and decodes its JSON answer.
func (o *orthancProc) call(method, path string, body io.Reader, v any) {
	o.t.Helper()
	req, _ := http.NewRequest(method, o.base+path, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		o.t.Fatalf("Orthanc %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			o.t.Fatalf("Orthanc %s %s: %s: %v", method, path, b, err)
		}
	}
}
