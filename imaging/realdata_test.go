package imaging

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// deviceSegmentation is a device's own segmentation of a real scan
// (testdata/realdata/*.seg.json): a fractional row per A-scan, nil where
// the device drew none.
type deviceSegmentation struct {
	ILM, RNFL, BM []*float64
	ScaleZUm      float64 `json:"scaleZUm"`
}

// TestRealCircleScansAgreeWithTheDevice runs the two real SPECTRALIS
// circle scans, as the device exported them (8-bit, display-compressed),
// through normalisation, denoise, layers and the analysis, and compares
// with the device's own segmentation: ILM and BM within 2 px mean
// absolute error, RNFL/GCL within 3 px, and the global RNFL thickness
// within 10 µm of the device's (from its ILM and RNFL rows), each
// sector within maxSectorErrUm, every one reported, and the verdict full.
func TestRealCircleScansAgreeWithTheDevice(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "\n| scan | found | ILM px (µm) | RNFL/GCL px (µm) | BM px (µm) | RNFL global µm, device → octflow | T | TS | NS | N | NI | TI | gradable | RNFL measured over the device's A-scans |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range []string{"spectralis-circle-2", "spectralis-circle-4"} {
		v, dev := readRealScan(t, name)
		if v.Pattern != Circle {
			t.Errorf("%s: pattern %q read from the DICOM, want circle", name, v.Pattern)
		}
		a, l, intensity := analyzeWith(t, v)
		if intensity.Encoding != Power {
			t.Errorf("%s: intensities found %+v, want a power (the device stores 255·v^0.25)", name, intensity)
		}
		mae := func(boundary string, device []*float64) float64 {
			var sum float64
			var n int
			for c, d := range device {
				if d != nil {
					sum += math.Abs(float64(l.Boundaries[boundary][c]) - *d)
					n++
				}
			}
			if n < len(device)/2 {
				t.Fatalf("%s: the device drew %s on only %d A-scans", name, boundary, n)
			}
			return sum / float64(n)
		}
		ilm, nfl, bm := mae(ILM, dev.ILM), mae(RNFLGCL, dev.RNFL), mae(BM, dev.BM)
		for _, c := range []struct {
			boundary string
			got, max float64
		}{{ILM, ilm, 2}, {RNFLGCL, nfl, 3}, {BM, bm, 2}} {
			if c.got > c.max {
				t.Errorf("%s: %s mean absolute error %.2f px against the device, want ≤ %.0f", name, c.boundary, c.got, c.max)
			}
		}
		var devSum float64
		var devN int
		devSectors, devCounts := map[string]float64{}, map[string]int{}
		for c := range dev.ILM {
			if dev.ILM[c] != nil && dev.RNFL[c] != nil {
				t := (*dev.RNFL[c] - *dev.ILM[c]) * dev.ScaleZUm
				devSum += t
				devN++
				sec := rnflSector(360 * float64(c) / float64(len(dev.ILM)))
				devSectors[sec] += t
				devCounts[sec]++
			}
		}
		devGlobal := devSum / float64(devN)
		if a.Pattern != Circle || a.rnfl() == nil {
			t.Fatalf("%s: analysed as %s, RNFL %v, not measurable %q", name, a.Pattern, a.rnfl(), a.NotMeasurable)
		}
		if d := a.rnfl().GlobalUm - devGlobal; math.Abs(d) > 10 {
			t.Errorf("%s: RNFL global %.1f µm, the device's %.1f", name, a.rnfl().GlobalUm, devGlobal)
		}
		// These clean circles report every sector the device measured,
		// each within maxSectorErrUm of the device's (followed where they
		// may be: followedSector), withhold nothing, and are fully
		// gradable.
		for _, s := range RNFLSectors {
			got, ok := a.rnfl().Sectors[s]
			switch {
			case !ok:
				t.Errorf("%s: sector %s not reported (withheld %+v)", name, s, a.Withheld)
			case math.Abs(got-devSectors[s]/float64(devCounts[s])) > maxSectorErrUm:
				t.Errorf("%s: sector %s %.1f µm, the device's %.1f", name, s, got, devSectors[s]/float64(devCounts[s]))
			}
		}
		if len(a.Withheld) > 0 || a.Quality.Gradable != Gradable {
			t.Errorf("%s: gradable %s (%q) with %+v withheld, want full with nothing withheld", name, a.Quality.Gradable, a.Quality.Reasons, a.Withheld)
		}
		um := v.Spacing.AxialUm
		fmt.Fprintf(&table, "| %s | %s %.2f | %.2f (%.1f) | %.2f (%.1f) | %.2f (%.1f) | %.1f → %.1f |", name, intensity.Encoding, intensity.Exponent,
			ilm, ilm*um, nfl, nfl*um, bm, bm*um, devGlobal, a.rnfl().GlobalUm)
		for _, s := range RNFLSectors {
			if x, ok := a.rnfl().Sectors[s]; ok {
				fmt.Fprintf(&table, " %.0f → %.0f |", devSectors[s]/float64(devCounts[s]), x)
			} else {
				fmt.Fprintf(&table, " %.0f → withheld |", devSectors[s]/float64(devCounts[s]))
			}
		}
		share := a.ThicknessShare(deviceSegments(dev))
		fmt.Fprintf(&table, " %s (signal %.1f) | %.0f%% |\n", a.Quality.Gradable, a.Quality.SignalStrength, 100*share)
		if share < minCircleGradedShare {
			t.Errorf("%s: the RNFL is measured (reliable, or in a vessel's shadow) over %.0f%% of the A-scans the device segments, want ≥ %.0f%%",
				name, 100*share, 100*minCircleGradedShare)
		}
	}
	t.Log(table.String())
}

// The graded share octflow tracks on the clean real scans: the share of
// the A-scans the device segments that get a thickness (ThicknessShare),
// held at the goal of 85% on the circles (89% and 86%) and at 90% on
// the line (91%), issue 38 (a clean line once got 7%, 35% before
// the RPE band's lower edge was found as the fall into the choroid, 75%
// before the retina was found under the vitreous's haze; the circles 69%
// and 64% before RNFL/GCL was paired along the B-scan and a faint
// stretch between reliable ends called reliable, 82% and 81% before the
// bridge confirmed it): see docs/imaging.md, Graded share.
const (
	minLineGradedShare   = 0.90
	minCircleGradedShare = 0.85
)

// minRimShare is the least share of the real line's last millimetre
// before the disc (where the device draws Bruch's membrane) that gets a
// thickness: 71% (none before the retina was found under the vitreous's
// haze; the rest is where Bruch's membrane is lost as the RPE band fades
// into the disc).
const minRimShare = 0.65

// The clean circles' sectors and the line's central thickness lie within
// these of the device's (circles: 4.7 µm at most; the line: 1.8 µm).
// The goal is 5 µm for both (issue 38).
const (
	maxSectorErrUm  = 5
	maxCentralErrUm = 5
)

// deviceSegments marks the A-scans where the device drew both ILM and BM.
func deviceSegments(dev deviceSegmentation) []bool {
	out := make([]bool, len(dev.ILM))
	for c := range out {
		out[c] = dev.ILM[c] != nil && c < len(dev.BM) && dev.BM[c] != nil
	}
	return out
}

// readRealScan reads testdata/realdata/name.dcm and its device
// segmentation.
func readRealScan(t *testing.T, name string) (*Volume, deviceSegmentation) {
	t.Helper()
	f, err := os.Open("testdata/realdata/" + name + ".dcm")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := ReadDICOM(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/realdata/" + name + ".seg.json")
	if err != nil {
		t.Fatal(err)
	}
	var dev deviceSegmentation
	if err := json.Unmarshal(b, &dev); err != nil {
		t.Fatal(err)
	}
	return v, dev
}

// TestARealLineScanThroughTheFovea runs a real 9 mm SPECTRALIS line
// through the fovea, which ends in the optic disc: where it grades the
// line, ILM and BM lie within 2 px of the device's; it finds the foveal
// pit where the device's boundaries put it, and its central thickness
// (1 mm around the pit) is within maxCentralErrUm of the device's. The
// disc is left ungraded, not measured; the retina under the vitreous's
// haze at the disc's rim and at the temporal end is graded, its ILM
// within 2 px of the device's; and the graded part shows no lesion: the
// interdigitation zone above the RPE is no drusen.
func TestARealLineScanThroughTheFovea(t *testing.T) {
	v, dev := readRealScan(t, "spectralis-line-0")
	if v.Pattern != Line {
		t.Fatalf("pattern %q read from the DICOM, want line", v.Pattern)
	}
	a, l, _ := analyzeWith(t, v)
	if a.line() == nil || a.line().FoveaCol == nil {
		t.Fatalf("line %+v, not measurable %q, quality %+v", a.line(), a.NotMeasurable, a.Quality)
	}
	mask := a.Quality.Mask
	for _, b := range []struct {
		name   string
		device []*float64
	}{{ILM, dev.ILM}, {BM, dev.BM}} {
		var sum float64
		var n int
		for c, d := range b.device {
			if d != nil && mask[c] {
				sum += math.Abs(float64(l.Boundaries[b.name][c]) - *d)
				n++
			}
		}
		if n < v.Cols/2 {
			t.Fatalf("%s: only %d graded A-scans where the device drew it", b.name, n)
		}
		mae := sum / float64(n)
		if mae > 2 {
			t.Errorf("%s: mean absolute error %.2f px over the graded A-scans, want ≤ 2", b.name, mae)
		}
		t.Logf("%s: mean absolute error %.2f px over the %d graded A-scans the device drew it in", b.name, mae, n)
	}
	// The device's pit and central thickness, as MeasureLine defines them.
	mmPerCol := v.Spacing.LateralUm / 1000
	thickness := func(c int) float64 { return (*dev.BM[c] - *dev.ILM[c]) * dev.ScaleZUm }
	meanAround := func(c0 int, mm float64) float64 {
		var s float64
		var n int
		for c := range v.Cols {
			if math.Abs(float64(c-c0))*mmPerCol <= mm && dev.ILM[c] != nil && dev.BM[c] != nil {
				s, n = s+thickness(c), n+1
			}
		}
		return s / float64(n)
	}
	pit, best := -1, math.Inf(1)
	for c := range v.Cols {
		if math.Abs(float64(c)-float64(v.Cols-1)/2)*mmPerCol <= 1 {
			if t := meanAround(c, 0.1); t < best {
				pit, best = c, t
			}
		}
	}
	devCentral := meanAround(pit, 0.5)
	if d := *a.line().FoveaCol - pit; d < -8 || d > 8 {
		t.Errorf("fovea at A-scan %d, the device's pit at %d", *a.line().FoveaCol, pit)
	}
	if d := a.line().CentralThicknessUm - devCentral; math.Abs(d) > maxCentralErrUm {
		t.Errorf("central thickness %.1f µm, the device's %.1f", a.line().CentralThicknessUm, devCentral)
	}
	// The disc, at the line's nasal end, has no retina to measure.
	for c := v.Cols - 40; c < v.Cols-20; c++ {
		if mask[c] && a.line().ProfileUm[c] > 0 && dev.BM[c] == nil {
			t.Errorf("A-scan %d, in the disc where the device drew no BM, measured %.0f µm", c, a.line().ProfileUm[c])
		}
	}
	// The retina at the disc's rim, the last millimetre of the device's
	// Bruch's membrane before the disc, lies under a haze in the
	// vitreous: before the retina was found under it, none of it got a
	// thickness.
	last := -1
	for c := range v.Cols {
		if dev.BM[c] != nil && dev.ILM[c] != nil {
			last = c
		}
	}
	var rim, rimMeasured int
	for c := last; c >= 0 && float64(last-c)*v.Spacing.LateralUm < 1000; c-- {
		if dev.BM[c] == nil || dev.ILM[c] == nil {
			continue
		}
		rim++
		if a.line().ProfileUm[c] > 0 {
			rimMeasured++
			if d := math.Abs(float64(l.Boundaries[ILM][c]) - *dev.ILM[c]); d > 2 {
				t.Errorf("A-scan %d, at the disc's rim: ILM %.1f px from the device's", c, d)
			}
		}
	}
	if share := float64(rimMeasured) / float64(max(rim, 1)); share < minRimShare {
		t.Errorf("a thickness over %.0f%% of the last millimetre before the disc, want ≥ %.0f%%", 100*share, 100*minRimShare)
	}
	// A healthy macula: where the line is graded, no lesion.
	w, _ := Normalize(v)
	den, err := Denoise(t.Context(), w, DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lesions, err := MarkLesions(t.Context(), den, l)
	if err != nil {
		t.Fatal(err)
	}
	for _, les := range lesions {
		if mask[les.Col] {
			t.Errorf("%s at A-scan %d, %.0f µm high, on the graded part of a healthy line", les.Type, les.Col, les.HeightUm)
		}
	}
	share := a.ThicknessShare(deviceSegments(dev))
	if share < minLineGradedShare {
		t.Errorf("a thickness over %.0f%% of the A-scans the device segments, want ≥ %.0f%%", 100*share, 100*minLineGradedShare)
	}
	t.Logf("fovea %d (device %d), central %.1f µm (device %.1f), graded %.0f%%, %s; a thickness over %.0f%% of the device's A-scans, %d of %d in the last mm before the disc",
		*a.line().FoveaCol, pit, a.line().CentralThicknessUm, devCentral, 100*a.Quality.GradableFraction, a.Quality.Gradable, 100*share, rimMeasured, rim)
}

// TestARealClippedCircleScanIsNotMeasured runs a real circle scan taken
// too close to the eye: on both sides the retina leaves the top of the
// image and comes back folded, upside down. Those A-scans are ungraded
// for that reason, and with whole sectors of the circle lost no RNFL
// figure is given at all: not the global mean, not the sectors left.
// (The device's own segmentation of this scan is wrong, so it is no
// reference here.)
func TestARealClippedCircleScanIsNotMeasured(t *testing.T) {
	v, _ := readRealScan(t, "spectralis-circle-clipped")
	a, _, _ := analyzeWith(t, v)
	if a.Pattern != Circle {
		t.Fatalf("analysed as %s", a.Pattern)
	}
	if a.rnfl() != nil || a.Measurable() {
		t.Errorf("measured: RNFL %+v", a.rnfl())
	}
	if len(a.NotMeasurable) == 0 {
		t.Error("no reason given for not measuring")
	}
	if a.Quality.Gradable == Gradable || !strings.Contains(strings.Join(a.Quality.Reasons, "; "), "top of the image") {
		t.Errorf("quality %s, reasons %q: want the retina cut at the top of the image", a.Quality.Gradable, a.Quality.Reasons)
	}
	t.Logf("%s, graded %.0f%%: %q; %q", a.Quality.Gradable, 100*a.Quality.GradableFraction, a.Quality.Reasons, a.NotMeasurable)
	// Where the retina is folded back, the first A-scans, nothing is graded.
	for c := range 100 {
		if a.Quality.Mask[c] {
			t.Fatalf("A-scan %d, in the fold, graded", c)
		}
	}
}
