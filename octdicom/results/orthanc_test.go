package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"octflow/imaging"
	"octflow/octdicom"
	"octflow/report"
)

// realScan is a real device's scan (a Spectralis circle), the source
// the results are filed with.
const realScan = "../../imaging/testdata/realdata/spectralis-circle-2.dcm"

// orthanc is a real Orthanc (Debian's, with its DICOMweb plugin) run as
// a process on a loopback port, in the test's own directory: the PACS
// the results go to.
type orthanc struct {
	t    *testing.T
	base string
}

// lockedBuffer collects a process's output for the test's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePorts draws n ports that were free a moment ago, below the
// ephemeral range (see devstack.FreeAddrs, which this package does not
// link: it brings the Temporal server).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			t.Fatal("no free ports")
		}
		p := 26000 + rand.IntN(6000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held, ports = append(held, l), append(ports, p)
	}
	return ports
}

func startOrthanc(t *testing.T) *orthanc {
	t.Helper()
	plugin := "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"
	if _, err := exec.LookPath("Orthanc"); err != nil || func() bool { _, err := os.Stat(plugin); return err != nil }() {
		if os.Getenv("CI") != "" {
			t.Fatal("Orthanc or its DICOMweb plugin missing: CI installs orthanc and orthanc-dicomweb")
		}
		t.Skip("Orthanc not installed (apt-get install orthanc orthanc-dicomweb)")
	}
	ports := freePorts(t, 2)
	dir := t.TempDir()
	conf, _ := json.Marshal(map[string]any{
		"Name": "octdicom-test", "StorageDirectory": filepath.Join(dir, "db"), "IndexDirectory": filepath.Join(dir, "db"),
		"HttpPort": ports[0], "DicomPort": ports[1], "RemoteAccessAllowed": false, "AuthenticationEnabled": false,
		"Plugins": []string{plugin}, "DicomWeb": map[string]any{"Enable": true},
	})
	confFile := filepath.Join(dir, "orthanc.json")
	if err := os.WriteFile(confFile, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd := exec.Command("Orthanc", confFile)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &logs, &logs
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
	o := &orthanc{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(o.base + "/system"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return o
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Orthanc did not come up:\n%s", logs.String())
		}
	}
}

// do makes a request of Orthanc and decodes its JSON answer into v.
func (o *orthanc) do(method, path, contentType string, body []byte, v any) int {
	o.t.Helper()
	req, err := http.NewRequest(method, o.base+path, bytes.NewReader(body))
	if err != nil {
		o.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && len(b) > 0 {
		if err := json.Unmarshal(b, v); err != nil {
			o.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// stow sends objects to Orthanc's STOW-RS as one request, as an export
// does, and returns its answer's status and Failed SOP Sequence.
func (o *orthanc) stow(objs []Object) (int, []any) {
	o.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, obj := range objs {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
		if err != nil {
			o.t.Fatal(err)
		}
		w.Write(obj.Part10)
	}
	mw.Close()
	var answer map[string]struct{ Value []any }
	code := o.do(http.MethodPost, "/dicom-web/studies", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary(),
		body.Bytes(), &answer)
	return code, answer["00081198"].Value
}

// studyInstances are the SOP Instance UIDs Orthanc holds in a study, by
// QIDO-RS.
func (o *orthanc) studyInstances(study string) []string {
	o.t.Helper()
	var found []map[string]struct{ Value []any }
	if code := o.do(http.MethodGet, "/dicom-web/studies/"+study+"/instances", "", nil, &found); code != http.StatusOK {
		o.t.Fatalf("QIDO-RS instances of the study: %d", code)
	}
	var uids []string
	for _, f := range found {
		if v := f["00080018"].Value; len(v) > 0 {
			uids = append(uids, fmt.Sprint(v[0]))
		}
	}
	slices.Sort(uids)
	return uids
}

// A real PACS takes every object: Orthanc, holding the real source scan,
// files the results in its study, under its patient; sent again (an
// export's retry), they are the same instances, not new ones.
func TestOrthancFilesTheResultsInTheSourceStudy(t *testing.T) {
	o := startOrthanc(t)
	scan, err := os.ReadFile(realScan)
	if err != nil {
		t.Fatal(err)
	}
	if code := o.do(http.MethodPost, "/instances", "application/dicom", scan, nil); code != http.StatusOK {
		t.Fatalf("storing the source scan in Orthanc: %d", code)
	}
	id, err := octdicom.ReadIdentity(bytes.NewReader(scan), int64(len(scan)))
	if err != nil {
		t.Fatal(err)
	}
	id.Exam = testRef
	var sent []Object
	for _, rep := range []*report.Report{cubeReport(), circleReport()} {
		if rep.ScanPattern == imaging.Circle {
			rep.Run = "circle-run" // another exam's report, in the same study
		}
		objs := build(t, id, rep, renderPDF(t, rep))
		code, failed := o.stow(objs)
		if code != http.StatusOK || len(failed) > 0 {
			t.Fatalf("STOW-RS of the %s's results: %d, failed %v", rep.ScanPattern, code, failed)
		}
		// The retry: the same instances again.
		if code, failed := o.stow(objs); code != http.StatusOK || len(failed) > 0 {
			t.Errorf("STOW-RS resent: %d, failed %v", code, failed)
		}
		sent = append(sent, objs...)
	}
	want := []string{id.SOPInstanceUID}
	for _, obj := range sent {
		want = append(want, obj.SOPInstanceUID)
	}
	slices.Sort(want)
	if got := o.studyInstances(id.StudyInstanceUID); !slices.Equal(got, want) {
		t.Errorf("the source study holds %v, want the scan and the results %v", got, want)
	}
	var patients, studies []string
	o.do(http.MethodGet, "/patients", "", nil, &patients)
	o.do(http.MethodGet, "/studies", "", nil, &studies)
	if len(patients) != 1 || len(studies) != 1 {
		t.Errorf("Orthanc holds %d patients and %d studies, want the source's one each", len(patients), len(studies))
	}
}

// dicomJSON is one instance's metadata as WADO-RS gives it (DICOM
// JSON): each attribute by its tag, a sequence's items in Value.
type dicomJSON map[string]struct {
	Value []json.RawMessage
}

// str is the first value of an attribute, as text (an IS or a DS is a
// number in DICOM JSON).
func (d dicomJSON) str(t *testing.T, tg string) string {
	t.Helper()
	var v any
	if vs := d[tg].Value; len(vs) > 0 {
		if err := json.Unmarshal(vs[0], &v); err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// items are the items of a sequence.
func (d dicomJSON) items(t *testing.T, tg string) []dicomJSON {
	t.Helper()
	var out []dicomJSON
	for _, raw := range d[tg].Value {
		var it dicomJSON
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		out = append(out, it)
	}
	return out
}

// refs are the objects a Hierarchical SOP Instance Reference sequence
// names (a study's series' Referenced SOP Sequence items).
func (d dicomJSON) refs(t *testing.T, tg string) []hierRef {
	t.Helper()
	var out []hierRef
	for _, study := range d.items(t, tg) {
		for _, series := range study.items(t, "00081115") {
			for _, sop := range series.items(t, "00081199") {
				out = append(out, hierRef{study.str(t, "0020000D"), series.str(t, "0020000E"),
					sop.str(t, "00081150"), sop.str(t, "00081155")})
			}
		}
	}
	return out
}

// metadata is what Orthanc's WADO-RS answers of one object it holds.
func (o *orthanc) metadata(obj Object) dicomJSON {
	o.t.Helper()
	var found []dicomJSON
	path := fmt.Sprintf("/dicom-web/studies/%s/series/%s/instances/%s/metadata", obj.StudyInstanceUID, obj.SeriesInstanceUID, obj.SOPInstanceUID)
	if code := o.do(http.MethodGet, path, "", nil, &found); code != http.StatusOK || len(found) != 1 {
		o.t.Fatalf("WADO-RS metadata of the %s: %d, %d instances", obj.Kind, code, len(found))
	}
	return found[0]
}

// A rerun's results in a real PACS: Orthanc, holding the source scan and
// a first run's PDF and SR, takes a second run's PDF, SR and rejection
// note into the same study; read back by WADO-RS, the new SR and PDF name
// the old ones as their predecessors, and the rejection note lists both
// old objects in its evidence and its content.
func TestOrthancTakesARerunThatReplacesAndRejectsTheFirst(t *testing.T) {
	o := startOrthanc(t)
	scan, err := os.ReadFile(realScan)
	if err != nil {
		t.Fatal(err)
	}
	if code := o.do(http.MethodPost, "/instances", "application/dicom", scan, nil); code != http.StatusOK {
		t.Fatalf("storing the source scan in Orthanc: %d", code)
	}
	id, err := octdicom.ReadIdentity(bytes.NewReader(scan), int64(len(scan)))
	if err != nil {
		t.Fatal(err)
	}
	id.Exam = testRef
	rep1 := cubeReport()
	run1 := build(t, id, rep1, renderPDF(t, rep1))
	rep2 := rerunOf(cubeReport(), "0190d9e4-run-2")
	run2, err := BuildSuperseding(id, rep2, renderPDF(t, rep2), Software{Version: "v0.27.0"}, supersededBy(1, run1))
	if err != nil {
		t.Fatal(err)
	}
	for i, run := range [][]Object{run1, run2} {
		if code, failed := o.stow(run); code != http.StatusOK || len(failed) > 0 {
			t.Fatalf("STOW-RS of run %d: %d, failed %v", i+1, code, failed)
		}
	}
	old, rerun := byKind(run1), byKind(run2)
	if len(old) != 2 || len(rerun) != 3 || rerun[KindRejection].SOPClassUID != KeyObjectSelectionSOPClass {
		t.Fatalf("run 1 sent %d objects, run 2 %d: want a PDF and an SR, then those and a rejection note", len(old), len(rerun))
	}
	want := []string{id.SOPInstanceUID}
	for _, obj := range append(slices.Clone(run1), run2...) {
		want = append(want, obj.SOPInstanceUID)
	}
	slices.Sort(want)
	if got := o.studyInstances(id.StudyInstanceUID); !slices.Equal(got, want) {
		t.Errorf("the source study holds %v, want the scan and both runs' objects %v", got, want)
	}
	for _, kind := range []string{KindMacularGridSR, KindPDF} {
		if got, want := o.metadata(rerun[kind]).refs(t, "0040A360"), []hierRef{refOf(old[kind])}; !slices.Equal(got, want) {
			t.Errorf("the PACS's rerun %s names predecessors %v, want the first run's %v", kind, got, want)
		}
		if o.metadata(rerun[kind]).str(t, "00200011") == o.metadata(old[kind]).str(t, "00200011") {
			t.Errorf("the rerun's %s is in the first run's series number", kind)
		}
	}
	kos := o.metadata(rerun[KindRejection])
	rejected := []hierRef{refOf(old[KindPDF]), refOf(old[KindMacularGridSR])}
	if got := kos.refs(t, "0040A375"); !slices.Equal(got, rejected) {
		t.Errorf("the PACS's rejection note has evidence %v, want the first run's PDF and SR %v", got, rejected)
	}
	var content []string
	for _, it := range kos.items(t, "0040A730") {
		if it.str(t, "0040A040") == "COMPOSITE" {
			for _, sop := range it.items(t, "00081199") {
				content = append(content, sop.str(t, "00081155"))
			}
		}
	}
	if want := []string{old[KindPDF].SOPInstanceUID, old[KindMacularGridSR].SOPInstanceUID}; !slices.Equal(content, want) {
		t.Errorf("the PACS's rejection note references %v in its content, want %v", content, want)
	}
	if title := kos.items(t, "0040A043"); len(title) != 1 || title[0].str(t, "00080100") != "113001" {
		t.Errorf("the PACS's rejection note is titled %v", title)
	}
}
