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
// within 10 µm of the device's (from its ILM and RNFL rows).
func TestRealCircleScansAgreeWithTheDevice(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "\n| scan | found | ILM px (µm) | RNFL/GCL px (µm) | BM px (µm) | RNFL global µm, device → octflow | T | TS | NS | N | NI | TI | gradable |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range []string{"spectralis-circle-2", "spectralis-circle-4"} {
		f, err := os.Open("testdata/realdata/" + name + ".dcm")
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		v, _, err := ReadDICOM(f, st.Size())
		f.Close()
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
		if a.Pattern != Circle || a.RNFL == nil {
			t.Fatalf("%s: analysed as %s, RNFL %v, not measurable %q", name, a.Pattern, a.RNFL, a.NotMeasurable)
		}
		if d := a.RNFL.GlobalUm - devGlobal; math.Abs(d) > 10 {
			t.Errorf("%s: RNFL global %.1f µm, the device's %.1f", name, a.RNFL.GlobalUm, devGlobal)
		}
		if a.Quality.Gradable != Gradable || len(a.RNFL.Sectors) != len(RNFLSectors) {
			t.Errorf("%s: gradable %s (%q), sectors %v", name, a.Quality.Gradable, a.Quality.Reasons, a.RNFL.Sectors)
		}
		um := v.Spacing.AxialUm
		fmt.Fprintf(&table, "| %s | %s %.2f | %.2f (%.1f) | %.2f (%.1f) | %.2f (%.1f) | %.1f → %.1f |", name, intensity.Encoding, intensity.Exponent,
			ilm, ilm*um, nfl, nfl*um, bm, bm*um, devGlobal, a.RNFL.GlobalUm)
		for _, s := range RNFLSectors {
			fmt.Fprintf(&table, " %.0f → %.0f |", devSectors[s]/float64(devCounts[s]), a.RNFL.Sectors[s])
		}
		fmt.Fprintf(&table, " %s (signal %.1f) |\n", a.Quality.Gradable, a.Quality.SignalStrength)
	}
	t.Log(table.String())
}
