package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"math"
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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"

	"octflow/api"
	"octflow/codec"
	"octflow/devstack"
	"octflow/exam"
	"octflow/imaging"
	"octflow/lifecycle"
	"octflow/octdicom"
	"octflow/octdicom/hostile"
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
		if err := octdicom.WriteDICOM(&b, p.Volume, octdicom.Header{SOPInstanceUID: "2.25.1001", PatientID: "STOW-PATIENT-1",
			Identity: &octdicom.DeviceIdentity{DeviceSerialNumber: "SN4711"}}); err != nil {
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
	if len(stored) != 1 || stored[0].str("00081155") != "2.25.1001" || stored[0].str("00081150") != octdicom.OphthalmicTomographySOPClass {
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
		scan, err := octdicom.ParseScan(f, info.Size())
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
	confDir   string
	env       []string
	cmd       *exec.Cmd
	logs      *syncBuffer
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
	o := &orthancProc{t: t, base: "http://" + addrs[0], dicomPort: port(addrs[1]), confDir: confDir, env: env, logs: &syncBuffer{}}
	t.Cleanup(func() {
		o.stop()
		if t.Failed() {
			t.Logf("Orthanc's log:\n%s", o.logs.String())
		}
	})
	o.start()
	return o
}

// start starts Orthanc (again, on the same ports and storage) and waits
// until it answers.
func (o *orthancProc) start() {
	o.t.Helper()
	o.cmd = exec.Command("Orthanc", o.confDir)
	o.cmd.Dir = o.confDir // relative paths in the configuration (Lua scripts) are its own
	o.cmd.Env = append(os.Environ(), o.env...)
	o.cmd.Stdout, o.cmd.Stderr = o.logs, o.logs
	if err := o.cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(o.base + "/system"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("Orthanc did not come up: %s", o.logs.String())
		}
	}
}

// stop stops Orthanc outright.
func (o *orthancProc) stop() {
	if o.cmd != nil && o.cmd.Process != nil {
		_ = o.cmd.Process.Kill()
		_ = o.cmd.Wait()
		o.cmd = nil
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

// The way back: a real SPECTRALIS circle scan and a phantom macular cube,
// each naming its patient and study, are stored by STOW-RS and complete;
// each exam keeps its scan's original identity sealed with its objects,
// and nothing octflow keeps (its objects, Temporal's database, the logs)
// holds an identifier in clear. From what the exam stored (the sealed
// identity, report.json and report.pdf) octdicom builds the objects an
// export sends: Orthanc, holding the source scans, files them in each
// source study under the original patient, and the cube's Macular Grid
// SR gives the JSON report's central subfield thickness.
func TestTheResultsGoBackToThePatientsStudy(t *testing.T) {
	plugin := needOrthanc(t)
	h := newHarness(t, 1)
	ctx := context.Background()
	circle, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-2.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	p := imaging.NewPhantom(small(271))
	var cube bytes.Buffer
	if err := octdicom.WriteDICOM(&cube, p.Volume, octdicom.Header{SOPInstanceUID: "2.25.27101", StudyInstanceUID: "2.25.27102",
		SeriesInstanceUID: "2.25.27103", PatientID: "WAYBACK-PATIENT-7", Identity: &octdicom.DeviceIdentity{PatientName: "Wayback^Wilma",
			PatientBirthDate: "19480229", AccessionNumber: "WAYBACK-ACC-1", ReferringPhysician: "Referrer^Rita", StudyDate: "20261201"}}); err != nil {
		t.Fatal(err)
	}
	identifying := []string{"REALDATA-0001", "ANONYMOUS^REALDATA", "1.2.826.0.1.3680043.8.498.13019889701938346699576145289637688233",
		"WAYBACK-PATIENT-7", "Wayback^Wilma", "19480229", "WAYBACK-ACC-1", "Referrer^Rita", "2.25.27102"}

	code, a := h.stow(h.sys.Secrets.Router, "urgent", circle, cube.Bytes())
	if code != http.StatusOK || len(a.items(t, "00081199")) != 2 {
		t.Fatalf("STOW-RS of the two scans: %d %v", code, a)
	}
	orthanc := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true}}, nil)
	sealer, err := codec.Open(h.sys.Secrets.CodecKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		scan  []byte
		kinds []string
	}{
		{"the circle scan", circle, []string{"pdf"}},
		{"the cube", cube.Bytes(), []string{"pdf", "sr"}},
	} {
		id, err := octdicom.ReadIdentity(bytes.NewReader(c.scan), int64(len(c.scan)))
		if err != nil {
			t.Fatal(err)
		}
		ref := h.ref("sop:" + id.SOPInstanceUID)
		st := waitExam(t, h.clin, ref.ID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
		if st.State != lifecycle.Completed || st.Report == nil {
			t.Fatalf("%s: the exam ended %s", c.name, st.State)
		}
		// The exam's identity, sealed, under its own prefix.
		var sealed []byte
		for _, k := range h.storedKeys(exam.ScansPrefix + ref.Campus + "/" + ref.ID + "/") {
			if strings.Contains(k, "/identity-") {
				sealed = h.read(k)
			}
		}
		if sealed == nil {
			t.Fatalf("%s: the exam keeps no identity", c.name)
		}
		rep, _ := h.readReport(st.Report.JSONKey)
		objs, err := octdicom.ResultsFromSealed(sealer, ref, sealed, &rep, h.read(st.Report.PDFKey), octdicom.Software{Version: "test"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, o.Kind)
		}
		if !slices.Equal(kinds, c.kinds) {
			t.Fatalf("%s: objects %v, want %v (report: %s, %s, measurable %v)", c.name, kinds, c.kinds, rep.ScanPattern,
				rep.Quality.Gradable, rep.Measurable)
		}
		orthanc.call(http.MethodPost, "/instances", bytes.NewReader(c.scan), nil)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, o := range objs {
			w, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
			_, _ = w.Write(o.Part10)
		}
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, orthanc.base+"/dicom-web/studies", &body)
		req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var stowed stowAnswer
		if err := json.Unmarshal(answer, &stowed); err != nil || resp.StatusCode != http.StatusOK ||
			len(stowed.items(t, "00081198")) != 0 || len(stowed.items(t, "00081199")) != len(objs) {
			t.Fatalf("%s: Orthanc's STOW-RS answered %d %s", c.name, resp.StatusCode, answer)
		}
		var found []map[string]struct{ Value []any }
		orthanc.call(http.MethodGet, "/dicom-web/studies/"+id.StudyInstanceUID+"/instances?includefield=00100020", nil, &found)
		if len(found) != 1+len(objs) {
			t.Errorf("%s: the source study holds %d instances, want the scan and %d results", c.name, len(found), len(objs))
		}
		for _, f := range found {
			if v := f["00100020"].Value; len(v) != 1 || v[0] != id.PatientID {
				t.Errorf("%s: an instance of the study is filed under patient %v", c.name, v)
			}
		}
		for _, o := range objs {
			if o.Kind != "sr" {
				continue
			}
			ds, err := dicom.Parse(bytes.NewReader(o.Part10), int64(len(o.Part10)), nil)
			if err != nil {
				t.Fatal(err)
			}
			// A DS holds 16 characters: the report's figure to within them.
			got, ok := srNumber(ds.Elements, "57109-1")
			if want := rep.Measurements.CentralSubfieldThicknessUm; !ok || math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s: the SR's central subfield thickness %v (found %v), the report's %v", c.name, got, ok, want)
			}
		}
	}
	// Nothing octflow keeps holds an identifier in clear.
	keys, err := h.store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		b := h.read(k)
		for _, v := range identifying {
			if bytes.Contains(b, []byte(v)) || strings.Contains(k, v) {
				t.Errorf("stored object %s holds %q", k, v)
			}
		}
	}
	raw := readDatabase(t, h.sys.Stack.DataDir())
	logs := h.logs.String()
	for _, v := range identifying {
		if bytes.Contains(raw, []byte(v)) {
			t.Errorf("Temporal's database holds %q", v)
		}
		if strings.Contains(logs, v) {
			t.Errorf("the logs hold %q", v)
		}
	}
}

// srNumber is the Numeric Value of the first NUM content item, in an SR
// content tree, whose concept is the code value concept.
func srNumber(els []*dicom.Element, concept string) (float64, bool) {
	items := func(el *dicom.Element) [][]*dicom.Element {
		var out [][]*dicom.Element
		seq, _ := el.Value.GetValue().([]*dicom.SequenceItemValue)
		for _, it := range seq {
			if els, ok := it.GetValue().([]*dicom.Element); ok {
				out = append(out, els)
			}
		}
		return out
	}
	str := func(els []*dicom.Element, tg tag.Tag) string {
		for _, el := range els {
			if v, ok := el.Value.GetValue().([]string); ok && el.Tag == tg && len(v) > 0 {
				return strings.TrimSpace(v[0])
			}
		}
		return ""
	}
	var name bool
	var value string
	for _, el := range els {
		switch el.Tag {
		case tag.ConceptNameCodeSequence:
			for _, it := range items(el) {
				name = name || str(it, tag.CodeValue) == concept
			}
		case tag.MeasuredValueSequence:
			for _, it := range items(el) {
				value = str(it, tag.NumericValue)
			}
		}
	}
	if name && value != "" {
		v, err := strconv.ParseFloat(value, 64)
		return v, err == nil
	}
	for _, el := range els {
		if el.Tag == tag.ContentSequence {
			for _, it := range items(el) {
				if v, ok := srNumber(it, concept); ok {
					return v, true
				}
			}
		}
	}
	return 0, false
}
