package e2e

// Real device scans and scans no analysis can read, through the HTTP API.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"octflow/activities"
	"octflow/api/intake"
	"octflow/imaging"
	"octflow/lifecycle"
	"octflow/octdicom"
)

// realData is the real scans' folder, made absolute when the package
// loads: the embedded S3 gateway moves the process's working directory
// into its data once a test starts a stack.
var realData, _ = filepath.Abs("../../../imaging/testdata/realdata")

// TestARealCircleScanCompletesWithAnRNFLReport sends a real SPECTRALIS
// circle scan as the device exported it: the exam completes with a
// peripapillary RNFL report whose global thickness is within 10 µm of
// the device's own segmentation, and status says what was measured.
func TestARealCircleScanCompletesWithAnRNFLReport(t *testing.T) {
	scan, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-2.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	var dev struct {
		ILM, RNFL []*float64
		ScaleZUm  float64 `json:"scaleZUm"`
	}
	b, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-2.seg.json"))
	if err != nil || json.Unmarshal(b, &dev) != nil {
		t.Fatalf("device segmentation: %v", err)
	}
	var devSum float64
	var n int
	for c := range dev.ILM {
		if dev.ILM[c] != nil && dev.RNFL[c] != nil {
			devSum, n = devSum+(*dev.RNFL[c]-*dev.ILM[c])*dev.ScaleZUm, n+1
		}
	}
	devGlobal := devSum / float64(n)
	h := newHarness(t, 1)
	ctx := context.Background()

	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "real-circle", Priority: "urgent"}, scan); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	st := h.waitTerminal("real-circle")
	if st.State != lifecycle.Completed || st.Report == nil {
		t.Fatalf("exam ended %s: %+v", st.State, st.LastFailure)
	}
	sum := st.Report.Summary
	// Gradable: full, or partial when a figure is withheld (a sector whose
	// RNFL/GCL boundary is not reliable over enough of its A-scans).
	if sum.ScanType != "circle" || (sum.Gradable != "full" && sum.Gradable != "partial") || sum.NotMeasurable ||
		sum.RNFLGlobalUm == nil || sum.CentralSubfieldThicknessUm != nil {
		t.Errorf("status summary %+v, want a gradable circle with an RNFL figure and no macular one", sum)
	}
	rep, _ := h.readReport(st.Report.JSONKey)
	rnfl, _ := rep.Figures.(*imaging.RNFLMeasurements)
	_, cube := rep.Figures.(*imaging.Measurements)
	if rep.ScanPattern != imaging.Circle || rnfl == nil || cube || rep.Intensity == nil || rep.Intensity.Encoding != imaging.Power {
		t.Fatalf("report: pattern %s, rnfl %v, cube %v, intensity %+v", rep.ScanPattern, rnfl != nil, cube, rep.Intensity)
	}
	if d := rnfl.GlobalUm - devGlobal; math.Abs(d) > 10 {
		t.Errorf("RNFL global %.1f µm, the device's %.1f", rnfl.GlobalUm, devGlobal)
	}
	// Every sector is reported, or withheld with its reason (in the
	// report, and in the status's summary); a withheld one makes the
	// verdict partial. No figure is reported and withheld at once.
	withheld := map[string]string{}
	for _, w := range rep.Withheld {
		withheld[w.Figure] = w.Reason
	}
	for _, s := range imaging.RNFLSectors {
		v, reported := rnfl.Sectors[s]
		reason, held := withheld[imaging.FigureRNFLSector+s]
		switch {
		case reported == held:
			t.Errorf("sector %s: reported %v (%v), withheld %v (%q)", s, reported, v, held, reason)
		case held && (reason == "" || sum.WithheldReasons[imaging.FigureRNFLSector+s] == "" || sum.Gradable != "partial"):
			t.Errorf("sector %s withheld without its reason in the report and the status, or the verdict is %s", s, sum.Gradable)
		}
	}
	if len(withheld) == 0 && sum.Gradable != "full" {
		t.Errorf("nothing withheld, yet the verdict is %s", sum.Gradable)
	}
	pdf, err := h.store.ReadAll(ctx, st.Report.PDFKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("report PDF text", func(t *testing.T) {
		text := pdfText(t, pdf)
		for _, want := range []string{"Peripapillary RNFL report", "Global mean thickness", "TSNIT", "peripapillary circle scan"} {
			if !strings.Contains(text, want) {
				t.Errorf("report.pdf text lacks %q", want)
			}
		}
	})
}

// TestRealLineAndClippedScansThroughTheAPI sends two more real
// SPECTRALIS scans as the device exported them. A 9 mm line through the
// fovea completes with a line report whose central thickness is within
// 15 µm of the device's own boundaries (1 mm about the pit). A circle
// taken too close, its retina cut by the top of the image and folded
// back, completes as not measurable: no RNFL figure anywhere, and the
// report says why.
func TestRealLineAndClippedScansThroughTheAPI(t *testing.T) {
	line, err := os.ReadFile(filepath.Join(realData, "spectralis-line-0.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	clipped, err := os.ReadFile(filepath.Join(realData, "spectralis-circle-clipped.dcm"))
	if err != nil {
		t.Fatal(err)
	}
	var dev struct {
		ILM, BM  []*float64
		ScaleZUm float64 `json:"scaleZUm"`
		ScaleXUm float64 `json:"scaleXUm"`
	}
	b, err := os.ReadFile(filepath.Join(realData, "spectralis-line-0.seg.json"))
	if err != nil || json.Unmarshal(b, &dev) != nil {
		t.Fatalf("device segmentation: %v", err)
	}
	// The device's central thickness: 1 mm about its thinnest 0.2 mm
	// within 1 mm of the line's centre.
	meanAround := func(c0 int, mm float64) float64 {
		var s float64
		var n int
		for c := range dev.ILM {
			if math.Abs(float64(c-c0))*dev.ScaleXUm/1000 <= mm && dev.ILM[c] != nil && dev.BM[c] != nil {
				s, n = s+(*dev.BM[c]-*dev.ILM[c])*dev.ScaleZUm, n+1
			}
		}
		return s / float64(n)
	}
	pit, thinnest := 0, math.Inf(1)
	for c := range dev.ILM {
		if math.Abs(float64(c)-float64(len(dev.ILM)-1)/2)*dev.ScaleXUm/1000 <= 1 {
			if m := meanAround(c, 0.1); m < thinnest {
				pit, thinnest = c, m
			}
		}
	}
	devCentral := meanAround(pit, 0.5)

	h := newHarness(t, 1)
	ctx := context.Background()
	for id, scan := range map[string][]byte{"real-line": line, "real-clipped": clipped} {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: "urgent"}, scan); code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
	}

	st := h.waitTerminal("real-line")
	if st.State != lifecycle.Completed || st.Report == nil {
		t.Fatalf("line exam ended %s: %+v", st.State, st.LastFailure)
	}
	sum := st.Report.Summary
	if sum.ScanType != "line" || sum.NotMeasurable || sum.CentralThicknessUm == nil || sum.RNFLGlobalUm != nil {
		t.Fatalf("line status summary %+v, want a line with a central thickness", sum)
	}
	if d := *sum.CentralThicknessUm - devCentral; math.Abs(d) > 15 {
		t.Errorf("central thickness %.1f µm, the device's %.1f", *sum.CentralThicknessUm, devCentral)
	}
	if sum.Lesions != 0 {
		t.Errorf("%d lesions reported on a healthy macula", sum.Lesions)
	}

	st = h.waitTerminal("real-clipped")
	if st.State != lifecycle.Completed || st.Report == nil {
		t.Fatalf("clipped exam ended %s: %+v", st.State, st.LastFailure)
	}
	sum = st.Report.Summary
	if sum.ScanType != "circle" || !sum.NotMeasurable || sum.RNFLGlobalUm != nil || sum.Gradable == "full" {
		t.Errorf("clipped circle's status summary %+v, want not measurable, no RNFL figure", sum)
	}
	rep, raw := h.readReport(st.Report.JSONKey)
	if _, rnfl := rep.Figures.(*imaging.RNFLMeasurements); rep.Measurable || rnfl || len(rep.NotMeasurable) == 0 || strings.Contains(string(raw), `"globalUm"`) {
		t.Errorf("clipped circle's report: measurable %v, RNFL %v, not measurable %q", rep.Measurable, rnfl, rep.NotMeasurable)
	}
	if !strings.Contains(strings.Join(rep.Quality.Reasons, "; "), "top of the image") {
		t.Errorf("clipped circle's quality reasons %q", rep.Quality.Reasons)
	}
}

// TestANoiseScanCompletesAsUngradable sends a valid DICOM of pure
// speckle: the exam completes, ungradable, with no measurement in its
// report, and the flag in status, in the report-ready event and in the
// clinicians' event stream.
func TestANoiseScanCompletesAsUngradable(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	var mu sync.Mutex
	var events [][]byte
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		events = append(events, body)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ws.Close()

	v := imaging.NewVolume(5, 248, 256, imaging.Spacing{AxialUm: 3.87, LateralUm: 11.72, FrameUm: 122})
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range v.Data {
		v.Data[i] = float32(rng.ExpFloat64() * 800)
	}
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, v, octdicom.Header{SOPInstanceUID: "2.25.77", PatientID: "NOISE-1"}); err != nil {
		t.Fatal(err)
	}
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "noise-1", CallbackURL: ws.URL + "/hook"}, scan.Bytes()); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	st := h.waitTerminal("noise-1")
	if st.State != lifecycle.Completed || st.Report == nil {
		t.Fatalf("exam ended %s: %+v", st.State, st.LastFailure)
	}
	sum := st.Report.Summary
	if sum.Gradable != "ungradable" || !sum.NotMeasurable || sum.CentralSubfieldThicknessUm != nil || sum.MeanThicknessUm != nil || sum.TotalVolumeMm3 != nil {
		t.Errorf("status summary %+v, want ungradable and no figure", sum)
	}
	rep, raw := h.readReport(st.Report.JSONKey)
	if rep.Measurable || len(rep.NotMeasurable) == 0 || rep.Figures != nil ||
		len(rep.Lesions) != 0 || rep.Quality.Gradable != imaging.Ungradable {
		t.Errorf("report: measurable %v (%q), quality %s, cube %v, lesions %d", rep.Measurable, rep.NotMeasurable,
			rep.Quality.Gradable, rep.Figures != nil, len(rep.Lesions))
	}
	for _, figure := range []string{`"centralSubfieldThicknessUm"`, `"totalVolumeMm3"`, `"etdrs"`, `"globalUm"`, `"profileUm"`} {
		if strings.Contains(string(raw), figure) {
			t.Errorf("report.json of an ungradable scan holds %q", figure)
		}
	}

	mu.Lock()
	if len(events) != 1 {
		t.Fatalf("%d report-ready deliveries", len(events))
	}
	var event activities.ReportReady
	if err := json.Unmarshal(events[0], &event); err != nil || event.Gradable != "ungradable" || !event.NotMeasurable {
		t.Errorf("report-ready event %s: %v", events[0], err)
	}
	mu.Unlock()

	first := h.readEvents(0, 1)[0]
	if first.event.ExamID != h.ref("noise-1").ID || first.event.Summary.Gradable != "ungradable" || !first.event.Summary.NotMeasurable {
		t.Errorf("clinician event %+v", first.event)
	}

	pdf, err := h.store.ReadAll(ctx, st.Report.PDFKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("report PDF text", func(t *testing.T) {
		text := pdfText(t, pdf)
		for _, want := range []string{"Not measurable", "ungradable", "No thickness"} {
			if !strings.Contains(text, want) {
				t.Errorf("report.pdf text lacks %q", want)
			}
		}
		if strings.Contains(text, "Central subfield thickness") {
			t.Error("report.pdf of an ungradable scan shows a central subfield thickness")
		}
	})
}
