package intake

import (
	"bytes"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"octflow/api/problems"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/octdicom/hostile"
)

// FuzzSubmitIntake fuzzes what the gateway does with an upload before it
// asks Temporal anything: the multipart body, the metadata and the DICOM
// scan are read, checked, validated and de-identified. Every input must
// end in a de-identified scan or a 4xx problem, never a panic, a hang or
// a 5xx; a de-identified scan reads back as a volume whose Patient ID is
// the pseudonym.
func FuzzSubmitIntake(f *testing.F) {
	var identified bytes.Buffer
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 2, Rows: 64, Cols: 16})
	if err := octdicom.WriteDICOM(&identified, p.Volume, octdicom.Header{PatientID: "MRN-4471982",
		SOPInstanceUID: "1.2.3.4", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.5",
		Identity: &octdicom.DeviceIdentity{PatientName: "DOE^JANE", PatientBirthDate: "19580214", InstitutionName: "St Elsewhere"}}); err != nil {
		f.Fatal(err)
	}
	good := `{"examId":"E-1","priority":"urgent","eye":"OD","patientRef":"ref-9"}`
	f.Add([]byte(good), identified.Bytes(), []byte(nil))
	f.Add([]byte(`{"examId":"E-2"}`), identified.Bytes()[:identified.Len()/2], []byte(nil))
	f.Add([]byte(`{"examId":"../x","extra":1}`), []byte("DICM"), []byte(nil))
	// High Bit labelled with a VR that does not exist: the parser reads
	// it as text, and the copy must not fail to encode it (found by CI).
	if at := bytes.Index(identified.Bytes(), []byte{0x28, 0, 0x02, 0x01, 'U', 'S'}); at >= 0 {
		bad := bytes.Clone(identified.Bytes())
		bad[at+5] = 0xff
		f.Add([]byte(good), bad, []byte(nil))
	} else {
		f.Fatal("the seed scan has no High Bit")
	}
	for _, h := range hostile.Files() {
		if len(h.Data) < 64<<10 { // the fuzzer mutates small inputs best
			f.Add([]byte(good), h.Data, []byte(nil))
		}
	}
	f.Add([]byte(nil), []byte(nil), []byte("--fuzz\r\nContent-Disposition: form-data; name=\"meta\"\r\n\r\n{}\r\n--fuzz--\r\n"))

	in := newIntake(f, Config{Campuses: []string{"north"}, MaxScanBytes: 4 << 20})
	f.Fuzz(func(t *testing.T, meta, scan, raw []byte) {
		body, contentType := raw, "multipart/form-data; boundary=fuzz"
		if len(raw) == 0 {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			w, _ := mw.CreateFormField("meta")
			w.Write(meta)
			w, _ = mw.CreateFormFile("scan", "scan.dcm")
			w.Write(scan)
			mw.Close()
			body, contentType = b.Bytes(), mw.FormDataContentType()
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/exams", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, contentType)
		up, clean, err := in.Take(deviceContext(req, httptest.NewRecorder(), "north"))
		defer up.Close()
		defer clean.Close()
		if err != nil {
			var p *problems.Problem
			if !errors.As(err, &p) || p.Status < 400 || p.Status >= 500 {
				t.Fatalf("intake failed without a 4xx problem: %v", err)
			}
			return
		}
		got, err := octdicom.ParseScan(clean.file, clean.size)
		if err != nil {
			t.Fatalf("the de-identified copy does not read back: %v", err)
		}
		if got.Header.PatientID != clean.PatientRef || !strings.HasPrefix(clean.PatientRef, "pt-") && clean.PatientRef != "" {
			t.Fatalf("de-identified Patient ID %q, pseudonym %q", got.Header.PatientID, clean.PatientRef)
		}
	})
}

// TestTheIntakeResolvesTheScanType: the pattern the DICOM and the shape
// say, a declared one that agrees, and a 422 for one that does not.
func TestTheIntakeResolvesTheScanType(t *testing.T) {
	var cube, line bytes.Buffer
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	if err := octdicom.WriteDICOM(&cube, p.Volume, octdicom.Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	one := imaging.NewVolume(1, 64, 16, p.Volume.Spacing)
	copy(one.Data, p.Volume.Frame(1))
	if err := octdicom.WriteDICOM(&line, one, octdicom.Header{SOPInstanceUID: "1.3", Description: "RNFL circle scan"}); err != nil {
		t.Fatal(err)
	}
	in := newIntake(t, Config{Campuses: []string{"north"}})
	for _, c := range []struct {
		scan     []byte
		declared string
		want     imaging.Pattern
		status   int
	}{
		{cube.Bytes(), "", imaging.Cube, 0},
		{cube.Bytes(), "cube", imaging.Cube, 0},
		{cube.Bytes(), "line", "", http.StatusUnprocessableEntity},
		{line.Bytes(), "", imaging.Circle, 0},
		{line.Bytes(), "circle", imaging.Circle, 0},
		{line.Bytes(), "line", "", http.StatusUnprocessableEntity},
		{cube.Bytes(), "spiral", "", http.StatusBadRequest},
	} {
		_, up, clean, err := take(in, "north", Meta{ExamID: "E-1", ScanType: c.declared}, c.scan)
		var prob *problems.Problem
		switch {
		case c.status != 0 && (!errors.As(err, &prob) || prob.Status != c.status):
			t.Errorf("declared %q: %v, want %d", c.declared, err, c.status)
		case c.status == 0 && (err != nil || clean.Pattern != c.want):
			t.Errorf("declared %q: %v, pattern %q, want %q", c.declared, err, clean.Pattern, c.want)
		}
		up.Close()
		clean.Close()
	}
}
