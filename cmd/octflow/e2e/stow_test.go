package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"

	"octflow/api"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
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
	return h.stowTo("/dicom-web/studies", token, priority, parts...)
}

// stowTo sends parts (each one DICOM instance) to POST path.
func (h *harness) stowTo(path, token, priority string, parts ...[]byte) (int, stowAnswer) {
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
	req, _ := http.NewRequest(http.MethodPost, h.sys.App.APIURL()+path, &body)
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
	octAs := func(seed uint64, sop string) []byte {
		p := imaging.NewPhantom(tiny(seed))
		var b bytes.Buffer
		if err := octdicom.WriteDICOM(&b, p.Volume, octdicom.Header{SOPInstanceUID: sop, PatientID: "STOW-PATIENT-1",
			Identity: &octdicom.DeviceIdentity{DeviceSerialNumber: "SN4711"}}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	oct := func(seed uint64) []byte { return octAs(seed, "2.25.1001") }
	scan := oct(251)

	code, a := h.stow(h.sys.Secrets.Router, "urgent", scan, ctInstance(t), []byte("not a DICOM object"))
	if code != http.StatusAccepted {
		t.Fatalf("a request with one storable instance of three: %d %v, want 202", code, a)
	}
	stored := a.items(t, "00081199")
	if len(stored) != 1 || stored[0].str("00081155") != "2.25.1001" || stored[0].str("00081150") != octdicom.OphthalmicTomographySOPClass {
		t.Fatalf("referenced %v, want the OCT instance", stored)
	}
	// Each refusal names its instance where it is DICOM (PS3.18 §10.5.3:
	// Referenced SOP Class and Instance UIDs), and none where it is not.
	var reasons []string
	for _, f := range a.items(t, "00081198") {
		reasons = append(reasons, f.str("00081197"))
		switch f.str("00081197") {
		case "290": // 0x0122: SOP class not supported (the CT)
			if f.str("00081150") != "1.2.840.10008.5.1.4.1.1.2" || f.str("00081155") != "2.25.2002" {
				t.Errorf("the CT's Failed SOP item %v does not name it", f)
			}
		case "49152": // 0xC000: cannot understand (not DICOM)
			if _, class := f["00081150"]; class || f["00081155"].Value != nil {
				t.Errorf("the part that is no DICOM is named: %v", f)
			}
		}
	}
	slices.Sort(reasons)
	if want := []string{"290", "49152"}; !slices.Equal(reasons, want) {
		t.Errorf("failure reasons %v, want %v", reasons, want)
	}
	// The stored instance: its exam's status in octflow's private
	// attribute, the coercion declared (B000H: the copy kept is
	// de-identified), the Retrieve URLs present and empty (no WADO-RS).
	ref := h.ref("sop:2.25.1001")
	front, _ := url.Parse(h.sys.App.APIURL())
	if stored[0].str("00090010") != "OCTFLOW" {
		t.Errorf("private creator %q, want OCTFLOW", stored[0].str("00090010"))
	}
	if loc, err := url.Parse(stored[0].str("00091001")); err != nil || !loc.IsAbs() || loc.Host != front.Host ||
		loc.Path != "/v1/exams/"+ref.ID {
		t.Errorf("exam status URL %q is not the absolute URL of the exam %s at %s", stored[0].str("00091001"), ref.ID, front.Host)
	}
	if w := stored[0].str("00081196"); w != "45056" {
		t.Errorf("warning reason %q, want 45056 (B000H, coercion)", w)
	}
	for _, at := range []stowAnswer{a, stored[0]} {
		if r, ok := at["00081190"]; !ok || r.VR != "UR" || len(r.Value) != 0 {
			t.Errorf("retrieve URL %+v (present %v), want present and empty", r, ok)
		}
	}

	// More instances than one request may carry: refused before any is
	// taken (the OCT instance first in it starts no exam), so a resend
	// in smaller requests is not refused for what the first started.
	over := [][]byte{octAs(253, "2.25.1003")}
	for len(over) <= 64 {
		over = append(over, []byte("not a DICOM object"))
	}
	if code, _ := h.stow(h.sys.Secrets.Router, "", over...); code != http.StatusRequestEntityTooLarge {
		t.Errorf("65 instances in one request: %d, want 413", code)
	}
	if n := h.executions("sop:2.25.1003"); n != 0 {
		t.Errorf("a request refused as too large started %d exams", n)
	}
	if code, _ := h.stow(h.sys.Secrets.Router, "", over[:64]...); code != http.StatusAccepted {
		t.Errorf("the first 64 of them again: %d, want 202", code)
	}
	if n := h.executions("sop:2.25.1003"); n != 1 {
		t.Errorf("the instance of the request refused as too large, sent again, ran %d times; want once", n)
	}

	// To a study's resource: an instance of that study is stored, one of
	// another study refused with C409H, starting nothing.
	ofStudy := func(seed uint64, sop, study string) []byte {
		p := imaging.NewPhantom(tiny(seed))
		var b bytes.Buffer
		if err := octdicom.WriteDICOM(&b, p.Volume, octdicom.Header{SOPInstanceUID: sop, StudyInstanceUID: study, PatientID: "STOW-PATIENT-1"}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if code, a := h.stowTo("/dicom-web/studies/2.25.4711", h.sys.Secrets.Router, "", ofStudy(254, "2.25.1004", "2.25.4711")); code != http.StatusOK ||
		len(a.items(t, "00081199")) != 1 {
		t.Errorf("an instance to its own study's resource: %d %v, want 200 with it stored", code, a)
	}
	code, a = h.stowTo("/dicom-web/studies/2.25.4711", h.sys.Secrets.Router, "", ofStudy(255, "2.25.1005", "2.25.4712"))
	if failed := a.items(t, "00081198"); code != http.StatusConflict || len(failed) != 1 || failed[0].str("00081197") != "50185" ||
		failed[0].str("00081155") != "2.25.1005" {
		t.Errorf("an instance to another study's resource: %d %v, want 409 with it refused C409H", code, a)
	}
	if n := h.executions("sop:2.25.1005"); n != 0 {
		t.Errorf("an instance refused for its study started %d exams", n)
	}

	// An OCT instance in a transfer syntax octflow does not read: C122H.
	compressed := oct(256)
	if i := bytes.Index(compressed, []byte("1.2.840.10008.1.2.1")); i < 0 {
		t.Fatal("no Explicit VR Little Endian transfer syntax in the file meta")
	} else {
		compressed = slices.Concat(compressed[:i], []byte("1.2.840.10008.1.2.2"), compressed[i+len("1.2.840.10008.1.2.1"):])
	}
	if code, a := h.stow(h.sys.Secrets.Router, "", compressed); code != http.StatusConflict || len(a.items(t, "00081198")) != 1 ||
		a.items(t, "00081198")[0].str("00081197") != "49442" {
		t.Errorf("an instance in Explicit VR Big Endian: %d %v, want 409 with reason C122H", code, a)
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
			// Unreadable or too large ever to validate, each refusal is
			// final: C000H, never A700H (out of resources), which a
			// sender sends again.
			if r := f.str("00081197"); r != "49152" {
				t.Errorf("%s: failure reason %s, want C000H", hostile.Files()[i].Name, r)
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
	if resp, err := h.http.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
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

// orthancRecipe is the shipped Orthanc recipe (read before a test moves
// the working directory).
var orthancRecipe, _ = filepath.Abs("../../../deploy/orthanc")

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
	storescu := needTool(t, "storescu", "dcmtk")
	h := newHarness(t, 1)
	// octflow's front: away for the first STOW-RS requests, then through.
	target, err := url.Parse(h.sys.App.APIURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	// The front serves HTTPS with a certificate of the site's own CA,
	// which the routers trust (OCTFLOW_CA_FILE) and nothing else does.
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused.Load() < 2 {
			refused.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "octflow is being deployed", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	recipe := func(name string) string { return filepath.Join(orthancRecipe, name) }
	// The devices a router takes C-STOREs from: storescu's AE title, from
	// this host. The recipe lets no other AE store.
	devices := func() map[string]any {
		return map[string]any{"DicomModalities": map[string]any{"oct-device": []any{"STORESCU", "127.0.0.1", 104}}}
	}
	routerEnv := func(token, pause string) []string {
		return []string{"OCTFLOW_DICOMWEB_URL=" + front.URL + "/dicom-web/", "OCTFLOW_ROUTER_TOKEN=" + token,
			"OCTFLOW_RETRY_PAUSE_S=" + pause, "OCTFLOW_CA_FILE=" + caFile}
	}
	orthanc := startOrthanc(t, devices(), routerEnv(h.sys.Secrets.Router, "1"), recipe("octflow.json"), recipe("octflow-forward.lua"))
	// An AE the router does not know stores nothing.
	if out, err := exec.Command(storescu, "-aet", "INTRUDER", "-aec", "ORTHANC", "127.0.0.1", orthanc.dicomPort,
		filepath.Join(realData, "spectralis-circle-2.dcm")).CombinedOutput(); err == nil {
		t.Errorf("storescu as an unknown AE: stored (%s), want the association refused", out)
	}
	var held []string
	if orthanc.call(http.MethodGet, "/instances", nil, &held); len(held) != 0 {
		t.Errorf("the router holds %d instances an unknown AE sent", len(held))
	}

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
	out, err := exec.Command(storescu, append([]string{"-aec", "ORTHANC", "127.0.0.1", orthanc.dicomPort}, files...)...).CombinedOutput()
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
	// Stored by octflow, the router's copies are deleted.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		orthanc.call(http.MethodGet, "/instances", nil, &held)
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the router still holds %d instances octflow stored", len(held))
			break
		}
	}
	// An instance that came another way than a device's C-STORE (here
	// Orthanc's REST API: an Orthanc that is an archive too) is
	// forwarded, and kept.
	var uploaded bytes.Buffer
	if err := octdicom.WriteDICOM(&uploaded, imaging.NewPhantom(tiny(257)).Volume, octdicom.Header{SOPInstanceUID: "2.25.2571",
		StudyInstanceUID: "2.25.2572", SeriesInstanceUID: "2.25.2573", PatientID: "ROUTER-REST-1"}); err != nil {
		t.Fatal(err)
	}
	orthanc.call(http.MethodPost, "/instances", bytes.NewReader(uploaded.Bytes()), nil)
	st := waitExam(t, h.clin, h.ref("sop:2.25.2571").ID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
	if st.State != lifecycle.Completed {
		t.Fatalf("the instance uploaded to the router's REST API ended %s", st.State)
	}
	time.Sleep(2 * time.Second) // OnJobSuccess has run
	if orthanc.call(http.MethodGet, "/instances", nil, &held); len(held) != 1 {
		t.Errorf("the router holds %d instances after forwarding one uploaded by REST, want it kept", len(held))
	}

	// A refusal no try can mend (a wrong token) is not retried.
	wrong := startOrthanc(t, devices(), routerEnv("not-a-token", "1"), recipe("octflow.json"), recipe("octflow-forward.lua"))
	if out, err := exec.Command(storescu, "-aec", "ORTHANC", "127.0.0.1", wrong.dicomPort, files[0]).CombinedOutput(); err != nil {
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

	// octflow refusing the instance itself is final too: the same SOP
	// Instance UID as a stored scan with another data set (409, which the
	// recipe asks octflow to answer 400) is not retried (its first retry
	// would come after 30 s to a minute here), and an instance sent after
	// it is forwarded at once.
	refusing := startOrthanc(t, devices(), routerEnv(h.sys.Secrets.Router, "60"), recipe("octflow.json"), recipe("octflow-forward.lua"))
	dir := t.TempDir()
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1 // a pixel: another data set under the stored scan's SOP Instance UID
	conflicting := filepath.Join(dir, "conflicting.dcm")
	if err := os.WriteFile(conflicting, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(realData, "spectralis-circle-4.dcm") // not sent yet
	f, err := os.Open(next)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	nextScan, err := octdicom.ParseScan(f, info.Size())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		ID, State string
		Content   struct{ FunctionErrorCode int }
	}
	jobsNow := func() []job {
		var js []job
		refusing.call(http.MethodGet, "/jobs?expand", nil, &js)
		return js
	}
	if out, err := exec.Command(storescu, "-aec", "ORTHANC", "127.0.0.1", refusing.dicomPort, conflicting).CombinedOutput(); err != nil {
		t.Fatalf("storescu: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if js := jobsNow(); len(js) > 0 && js[0].State == "Failure" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conflicting instance's forward did not fail: jobs %+v", jobsNow())
		}
	}
	time.Sleep(time.Second) // OnJobFailure has run
	sent := time.Now()
	if out, err := exec.Command(storescu, "-aec", "ORTHANC", "127.0.0.1", refusing.dicomPort, next).CombinedOutput(); err != nil {
		t.Fatalf("storescu: %v\n%s", err, out)
	}
	var js []job
	for deadline := sent.Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		js = jobsNow()
		if slices.ContainsFunc(js, func(j job) bool { return j.State == "Success" }) || time.Now().After(deadline) {
			break
		}
	}
	failed := slices.DeleteFunc(slices.Clone(js), func(j job) bool { return j.State != "Failure" })
	if len(js) != 2 || len(failed) != 1 || failed[0].Content.FunctionErrorCode != 8 {
		t.Errorf("a refused instance, then another (its forward looked for %s): jobs %+v; want the refusal's job failed (Bad Request) and not retried, the next one's done",
			time.Since(sent).Round(time.Second), js)
	}
	if n := h.executions("sop:" + nextScan.Header.SOPInstanceUID); n != 1 {
		t.Errorf("the instance sent after the refused one ran %d times, want once", n)
	}
	if !strings.Contains(refusing.logs.String(), "refused for good") {
		t.Error("Orthanc's log does not say the refused instance is left for an operator")
	}
	// The refused instance stays for that operator; the one octflow
	// stored goes.
	var left []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		refusing.call(http.MethodGet, "/instances", nil, &left)
		if len(left) <= 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) != 1 {
		t.Errorf("the router holds %d instances, want the refused one only", len(left))
	}
}

// While octflow is away, the recipe's retries wait outside Orthanc's one
// Lua engine. A first scan's forward is refused (503); a second scan
// sent a second later is still forwarded at once, not after the first
// one's retry pause (16 s here, which the old recipe slept in the Lua
// engine, holding every other callback). No retry comes before half its
// pause. Once octflow is back, the retries, woken by nothing but the
// recipe's own timer, store both, each once, and the router deletes its
// copies. A router that never reaches octflow gives an instance up after
// OCTFLOW_MAX_TRIES tries: logged, kept, and not tried again.
func TestARouterRetriesWithoutHoldingItsLuaEngine(t *testing.T) {
	needOrthanc(t)
	storescu := needTool(t, "storescu", "dcmtk")
	needTool(t, "findscu", "dcmtk") // the recipe's wake-up
	h := newHarness(t, 1)
	target, err := url.Parse(h.sys.App.APIURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var away atomic.Bool
	away.Store(true)
	// hits are the forwards octflow's front saw, and whether each went
	// through; /gone/ is an octflow that never comes back.
	type hit struct {
		at      time.Time
		through bool
	}
	var mu sync.Mutex
	var hits []hit
	var gone atomic.Int32
	hitsNow := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(hits)
	}
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/gone/") {
			gone.Add(1)
			http.Error(w, "octflow is away", http.StatusServiceUnavailable)
			return
		}
		through := !away.Load()
		mu.Lock()
		hits = append(hits, hit{time.Now(), through})
		mu.Unlock()
		if !through {
			http.Error(w, "octflow is being deployed", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	recipe := func(name string) string { return filepath.Join(orthancRecipe, name) }
	devices := func() map[string]any {
		return map[string]any{"DicomModalities": map[string]any{"oct-device": []any{"STORESCU", "127.0.0.1", 104}}}
	}
	env := func(root string, more ...string) []string {
		return append([]string{"OCTFLOW_DICOMWEB_URL=" + front.URL + root, "OCTFLOW_ROUTER_TOKEN=" + h.sys.Secrets.Router,
			"OCTFLOW_CA_FILE=" + caFile}, more...)
	}
	sopOf := func(path string) string {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		info, _ := f.Stat()
		scan, err := octdicom.ParseScan(f, info.Size())
		if err != nil {
			t.Fatal(err)
		}
		return scan.Header.SOPInstanceUID
	}
	send := func(o *orthancProc, aet, path string) error {
		out, err := exec.Command(storescu, "-aet", aet, "-aec", "ORTHANC", "127.0.0.1", o.dicomPort, path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("storescu: %v\n%s", err, out)
		}
		return nil
	}
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after %s: %s", within, what)
			}
		}
	}

	router := startOrthanc(t, devices(), env("/dicom-web/", "OCTFLOW_RETRY_PAUSE_S=16"), recipe("octflow.json"), recipe("octflow-forward.lua"))
	first, second := filepath.Join(realData, "spectralis-circle-2.dcm"), filepath.Join(realData, "spectralis-circle-4.dcm")
	if err := send(router, "STORESCU", first); err != nil {
		t.Fatal(err)
	}
	waitFor("the first scan's forward did not come", 30*time.Second, func() bool { return len(hitsNow()) == 1 })
	failedAt := hitsNow()[0].at
	time.Sleep(time.Second) // its failure is handled: the retry is waiting
	sent := time.Now()
	if err := send(router, "STORESCU", second); err != nil {
		t.Fatal(err)
	}
	waitFor("the second scan's forward did not come", 30*time.Second, func() bool { return len(hitsNow()) >= 2 })
	if took := hitsNow()[1].at.Sub(sent); took > 5*time.Second {
		t.Errorf("the second scan was forwarded %s after it came, during the first one's retry pause: the Lua engine was held", took.Round(100*time.Millisecond))
	}
	// No retry before half its pause (8 s).
	time.Sleep(time.Until(failedAt.Add(7 * time.Second)))
	if hs := hitsNow(); len(hs) != 2 {
		t.Errorf("%d forwards within 7 s of the first failure, want the two first tries only", len(hs))
	}
	away.Store(false) // octflow is back; nothing else happens on the router
	for _, path := range []string{first, second} {
		sop := sopOf(path)
		st := waitExam(t, h.clin, h.ref("sop:"+sop).ID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
		if st.State != lifecycle.Completed {
			t.Fatalf("%s: the exam ended %s: %+v", filepath.Base(path), st.State, st.LastFailure)
		}
		if n := h.executions("sop:" + sop); n != 1 {
			t.Errorf("%s ran %d times", filepath.Base(path), n)
		}
	}
	var held []string
	waitFor("the router still holds the instances octflow stored", 30*time.Second, func() bool {
		router.call(http.MethodGet, "/instances", nil, &held)
		return len(held) == 0
	})
	time.Sleep(3 * time.Second) // a duplicate forward would come now
	through := 0
	for _, x := range hitsNow() {
		if x.through {
			through++
		}
	}
	if through != 2 {
		t.Errorf("octflow took %d forwards, want each scan once: %+v", through, hitsNow())
	}
	// The wake-up's AE may only C-FIND (and finds nothing): it stores nothing.
	if err := send(router, "OCTFLOWTICK", first); err == nil {
		t.Error("storescu as the recipe's wake-up AE: stored, want it refused")
	}
	if router.call(http.MethodGet, "/instances", nil, &held); len(held) != 0 {
		t.Errorf("the router holds %d instances the wake-up AE sent", len(held))
	}

	// An octflow that never comes back: three tries, then the instance is
	// given up, logged and kept.
	giving := startOrthanc(t, devices(), env("/gone/dicom-web/", "OCTFLOW_RETRY_PAUSE_S=1", "OCTFLOW_MAX_TRIES=3"),
		recipe("octflow.json"), recipe("octflow-forward.lua"))
	if err := send(giving, "STORESCU", filepath.Join(realData, "spectralis-line-0.dcm")); err != nil {
		t.Fatal(err)
	}
	waitFor("the router did not give the instance up", 60*time.Second, func() bool {
		return strings.Contains(giving.logs.String(), "gave up, kept in Orthanc")
	})
	time.Sleep(4 * time.Second) // a fourth try would come now
	if n := gone.Load(); n != 3 {
		t.Errorf("%d tries of an octflow that never answers, want OCTFLOW_MAX_TRIES (3)", n)
	}
	if giving.call(http.MethodGet, "/instances", nil, &held); len(held) != 1 {
		t.Errorf("the router holds %d instances after giving one up, want it kept", len(held))
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
	// client reaches its REST API, as its registered user where conf
	// names one.
	client     *http.Client
	user, pass string
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
	if _, ok := conf["AuthenticationEnabled"]; !ok {
		conf["AuthenticationEnabled"] = false
	}
	maps.Copy(conf, map[string]any{
		"Name": "octflow-test", "StorageDirectory": filepath.Join(dir, "db"), "IndexDirectory": filepath.Join(dir, "db"),
		"HttpPort": json.Number(port(addrs[0])), "DicomPort": json.Number(port(addrs[1])),
		"RemoteAccessAllowed": false,
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
	o := &orthancProc{t: t, base: "http://" + addrs[0], dicomPort: port(addrs[1]), confDir: confDir, env: env, logs: &syncBuffer{},
		client: http.DefaultClient}
	if users, ok := conf["RegisteredUsers"].(map[string]string); ok {
		for u, p := range users {
			o.user, o.pass = u, p
		}
	}
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
		req, _ := http.NewRequest(http.MethodGet, o.base+"/system", nil)
		if o.user != "" {
			req.SetBasicAuth(o.user, o.pass)
		}
		resp, err := o.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("Orthanc did not come up (%v): %s", err, o.logs.String())
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
	if o.user != "" {
		req.SetBasicAuth(o.user, o.pass)
	}
	resp, err := o.client.Do(req)
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

// The "Done when", end to end, with a hospital's two Orthancs: a
// router configured with the shipped recipe (deploy/orthanc) and the
// PACS, the campus's configured export target. A real SPECTRALIS circle
// scan and a phantom macular cube, each naming its patient and study, go
// by C-STORE (DCMTK's storescu) to the router, which forwards them to
// octflow by STOW-RS, and to the PACS, which archives them; the same
// files go by direct STOW-RS too, and are the same instances, so the
// same exams: each runs once and completes, and its stored de-identified
// copy has no dciodvfy error its source has not. The export stage then files
// the results in each source study on the PACS, under the original
// Patient ID and Study Instance UID: the report as an Encapsulated PDF
// and, for the cube, the Macular Grid SR, whose central subfield
// thickness is the JSON report's. Every object fetched back by WADO-RS
// passes dciodvfy, and nothing octflow keeps (its objects, Temporal's
// database, the logs) holds an original identifier.
func TestTheResultsGoBackToThePatientsStudy(t *testing.T) {
	plugin := needOrthanc(t)
	storescu := needTool(t, "storescu", "dcmtk")
	dciodvfy := needTool(t, "dciodvfy", "dicom3tools")
	pacs := startOrthanc(t, map[string]any{"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true}}, nil)
	h := newHarness(t, 1, func(c *devsystem.Config) { c.PACSURL = pacs.base + "/dicom-web" })
	recipe := func(name string) string { return filepath.Join(orthancRecipe, name) }
	// The router takes C-STOREs from storescu's AE title on this host,
	// and reaches octflow over plain HTTP on loopback (no CA file).
	router := startOrthanc(t, map[string]any{"DicomModalities": map[string]any{"oct-device": []any{"STORESCU", "127.0.0.1", 104}}}, []string{
		"OCTFLOW_DICOMWEB_URL=" + h.sys.App.APIURL() + "/dicom-web/", "OCTFLOW_ROUTER_TOKEN=" + h.sys.Secrets.Router,
		"OCTFLOW_RETRY_PAUSE_S=1",
	}, recipe("octflow.json"), recipe("octflow-forward.lua"))
	ctx := context.Background()

	circlePath := filepath.Join(realData, "spectralis-circle-2.dcm")
	circle, err := os.ReadFile(circlePath)
	if err != nil {
		t.Fatal(err)
	}
	var cube bytes.Buffer
	if err := octdicom.WriteDICOM(&cube, imaging.NewPhantom(small(271)).Volume, octdicom.Header{SOPInstanceUID: "2.25.27101",
		StudyInstanceUID: "2.25.27102", SeriesInstanceUID: "2.25.27103", PatientID: "WAYBACK-PATIENT-7",
		Identity: &octdicom.DeviceIdentity{PatientName: "Wayback^Wilma", PatientBirthDate: "19480229", AccessionNumber: "WAYBACK-ACC-1",
			ReferringPhysician: "Referrer^Rita", StudyDate: "20261201"}}); err != nil {
		t.Fatal(err)
	}
	cubePath := filepath.Join(t.TempDir(), "cube.dcm")
	if err := os.WriteFile(cubePath, cube.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// What identifies a patient or a visit: names, IDs, dates, and the
	// source's UIDs (study, series, instance), each scan's as its file has
	// them.
	identifying := []string{"REALDATA-0001", "ANONYMOUS^REALDATA", "1.2.826.0.1.3680043.8.498.13019889701938346699576145289637688233",
		"WAYBACK-PATIENT-7", "Wayback^Wilma", "19480229", "WAYBACK-ACC-1", "Referrer^Rita", "2.25.27102",
		"2.25.27101", "2.25.27103", "20261201"}
	for _, b := range [][]byte{circle, cube.Bytes()} {
		scan, err := octdicom.ParseScan(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		id, err := octdicom.ReadIdentity(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if scan.Header.SOPInstanceUID == "" || scan.Header.SeriesInstanceUID == "" || id.StudyDate == "" {
			t.Fatalf("a scan without its SOP Instance UID, Series Instance UID or Study Date: %+v, study date %q", scan.Header, id.StudyDate)
		}
		for _, v := range []string{scan.Header.SOPInstanceUID, scan.Header.SeriesInstanceUID, id.StudyDate} {
			if !slices.Contains(identifying, v) {
				identifying = append(identifying, v)
			}
		}
	}

	// The devices' C-STOREs: to the router, and to the archive.
	for _, port := range []string{router.dicomPort, pacs.dicomPort} {
		if out, err := exec.Command(storescu, "-aec", "ORTHANC", "127.0.0.1", port, circlePath, cubePath).CombinedOutput(); err != nil {
			t.Fatalf("storescu: %v\n%s", err, out)
		}
	}
	// The same files by direct STOW-RS: stored, as the same instances.
	if code, a := h.stow(h.sys.Secrets.Router, "", circle, cube.Bytes()); code != http.StatusOK || len(a.items(t, "00081199")) != 2 {
		t.Fatalf("STOW-RS of the two scans: %d %v", code, a)
	}

	for _, c := range []struct {
		name  string
		scan  []byte
		kinds []string // the modalities of the results filed
	}{
		{"the circle scan", circle, []string{"DOC"}},
		{"the cube", cube.Bytes(), []string{"DOC", "SR"}},
	} {
		id, err := octdicom.ReadIdentity(bytes.NewReader(c.scan), int64(len(c.scan)))
		if err != nil {
			t.Fatal(err)
		}
		ref := h.ref("sop:" + id.SOPInstanceUID)
		st := waitExam(t, h.clin, ref.ID, 4*time.Minute, func(s *api.ExamStatus) bool {
			return s.State.Terminal() && (s.State != lifecycle.Completed || s.Export != nil && s.Export.Status != contract.ExportPending)
		})
		if st.State != lifecycle.Completed || st.Report == nil || st.Runs != 1 {
			t.Fatalf("%s: the exam ended %s after %d runs", c.name, st.State, st.Runs)
		}
		if n := h.executions("sop:" + id.SOPInstanceUID); n != 1 {
			t.Errorf("%s ran %d times", c.name, n)
		}
		if st.Export.Status != contract.ExportDelivered || st.Export.Instances != len(c.kinds) {
			t.Fatalf("%s: export %+v, want %d instances delivered", c.name, st.Export, len(c.kinds))
		}
		if c.name == "the circle scan" && st.Report.Summary.RNFLGlobalUm == nil {
			t.Errorf("%s: no RNFL thickness in the report's summary", c.name)
		}
		rep, _ := h.readReport(st.Report.JSONKey)

		// The de-identified copy octflow stored has no dciodvfy error its
		// source has not.
		copies := 0
		for _, k := range h.storedKeys(exam.ScansPrefix + ref.Campus + "/" + ref.ID + "/") {
			if !strings.Contains(k, "/scan-") {
				continue
			}
			copies++
			had, _ := dciodvfyOf(t, dciodvfy, c.scan, false)
			errs, _ := dciodvfyOf(t, dciodvfy, h.read(k), false)
			for _, e := range errs {
				if !slices.Contains(had, e) {
					t.Errorf("%s: the stored de-identified copy has an error its source has not: %s", c.name, e)
				}
			}
		}
		if copies != 1 {
			t.Errorf("%s: %d de-identified copies stored, want one", c.name, copies)
		}

		// The PACS's source study: the scan as archived and the results,
		// all under the original patient.
		var found []map[string]struct{ Value []any }
		pacs.call(http.MethodGet, "/dicom-web/studies/"+id.StudyInstanceUID+"/instances?includefield=00100020&includefield=00080060", nil, &found)
		var kinds []string
		for _, f := range found {
			if v := f["00100020"].Value; len(v) != 1 || v[0] != id.PatientID {
				t.Errorf("%s: an instance of the study is filed under patient %v", c.name, v)
			}
			sop, _ := f["00080018"].Value[0].(string)
			if sop == id.SOPInstanceUID {
				continue // the scan, as the archive took it
			}
			modality, _ := f["00080060"].Value[0].(string)
			series, _ := f["0020000E"].Value[0].(string)
			kinds = append(kinds, modality)
			obj := wadoRS(t, pacs, id.StudyInstanceUID, series, sop)
			errs, warns := dciodvfyOf(t, dciodvfy, obj, modality == "SR")
			if len(errs) > 0 {
				t.Errorf("%s: dciodvfy on the %s filed: %q", c.name, modality, errs)
			}
			// Accepted: the phantom's study has no Study Time or Study ID
			// (Type 2), so its results have none either (they keep the
			// study's own); only a DICOMDIR would want them.
			for _, w := range warns {
				if !strings.HasPrefix(w, "Warning - Missing attribute or value that would be needed to build DICOMDIR - Study ") {
					t.Errorf("%s: dciodvfy warns of the %s filed: %s", c.name, modality, w)
				}
			}
			if modality != "SR" {
				continue
			}
			ds, err := dicom.Parse(bytes.NewReader(obj), int64(len(obj)), nil)
			if err != nil {
				t.Fatal(err)
			}
			// A DS holds 16 characters: the report's figure to within them.
			got, ok := srNumber(ds.Elements, "57109-1")
			if want := rep.Figures.(*imaging.Measurements).CentralSubfieldThicknessUm; !ok || want <= 0 || math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s: the SR's central subfield thickness %v (found %v), the report's %v", c.name, got, ok, want)
			}
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, c.kinds) {
			t.Errorf("%s: the PACS holds %v beside the scan in study %s, want %v", c.name, kinds, id.StudyInstanceUID, c.kinds)
		}
	}
	// The router's forwards were taken too (a refused one fails its job).
	var jobs []struct{ Type, State string }
	router.call(http.MethodGet, "/jobs?expand", nil, &jobs)
	if len(jobs) != 2 || jobs[0].State != "Success" || jobs[1].State != "Success" {
		t.Errorf("the router's forwards: %+v, want two STOW-RS jobs done", jobs)
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

// needTool is the path of a tool a test runs, or a skip where it is not
// installed (a failure under CI, which installs pkg).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: .ci/run should have installed %s", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s)", name, pkg)
	}
	return p
}

// wadoRS fetches one instance from Orthanc's DICOMweb server by WADO-RS,
// as a viewer would, and returns it as a Part 10 file.
func wadoRS(t *testing.T, o *orthancProc, study, series, instance string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, o.base+"/dicom-web/studies/"+study+"/series/"+series+"/instances/"+instance, nil)
	req.Header.Set("Accept", `multipart/related; type="application/dicom"`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("WADO-RS of %s: %d %q: %v", instance, resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	part, err := multipart.NewReader(resp.Body, params["boundary"]).NextPart()
	if err != nil {
		t.Fatalf("WADO-RS of %s: %v", instance, err)
	}
	b, err := io.ReadAll(part)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dciodvfyOf runs dicom3tools' dciodvfy on a DICOM file and returns its
// error and warning lines. dciodvfy does not know the Macular Grid
// Thickness and Volume Report IOD (it answers "Information Object Not
// found" and checks nothing); its modules are the Enhanced SR IOD's plus
// Enhanced General Equipment, so an SR is checked as an Enhanced SR: the
// same data set under that SOP class (as octdicom's tests do).
func dciodvfyOf(t *testing.T, dciodvfy string, b []byte, sr bool) (errs, warns []string) {
	t.Helper()
	if sr {
		ds, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []tag.Tag{tag.SOPClassUID, tag.MediaStorageSOPClassUID} {
			el, err := ds.FindElementByTag(tg)
			if err != nil {
				t.Fatal(err)
			}
			if el.Value, err = dicom.NewValue([]string{"1.2.840.10008.5.1.4.1.1.88.22"}); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		if err := dicom.Write(&out, ds); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	f := filepath.Join(t.TempDir(), "object.dcm")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// dciodvfy exits non-zero when it finds an error; what it prints is
	// what counts.
	out, _ := exec.Command(dciodvfy, f).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Error"):
			errs = append(errs, line)
		case strings.HasPrefix(line, "Warning"):
			warns = append(warns, line)
		}
	}
	return errs, warns
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
