package report_test

import (
	"bytes"
	"image/png"
	"slices"
	"testing"

	"octflow/imaging"
	. "octflow/report"
)

// TestTheBScanPanelIsReadableOnEveryDevicesExport renders the report's
// B-scan panel of real scans of other devices' looks (8-bit SPECTRALIS
// exports of a power and of JPEG-compressed log encodings) and reads
// its greys back: the vitreous above the retina is dark (median grey ≤
// 64), the retina between ILM and BM is neither black nor burnt out
// (median grey 64–220) and its layers show (the middle half of its
// greys spans at least 24 levels). A display window from the 1st
// percentile showed the vitreous's speckle as a near-binary pattern of
// black and mid-grey (median grey 115–129) and the retina near white.
func TestTheBScanPanelIsReadableOnEveryDevicesExport(t *testing.T) {
	for _, path := range []string{
		"../imaging/testdata/realdata/kermany/DME-9583225-1.dcm",
		"../imaging/testdata/realdata/kermany/NORMAL-1384-2.dcm",
		"../imaging/testdata/realdata/kermany/DRUSEN-53018-1.dcm",
		"../imaging/testdata/realdata/spectralis-line-0.dcm",
	} {
		r, figs := realReport(t, path)
		b, err := BScanPNGForTest(figs, r.Outlines(0), &png.Encoder{})
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		grey := func(c, row int) int {
			r, g, bl, _ := img.At(c, row).RGBA()
			return int((r + g + bl) / 3 >> 8)
		}
		var vitreous, retina []int
		ilm, bm := figs.Boundaries[imaging.ILM], figs.Boundaries[imaging.BM]
		for c := 0; c < figs.Cols; c++ {
			// Clear of the boundary lines drawn on the panel.
			for row := int(ilm[c]) - 40; row < int(ilm[c])-8; row++ {
				if row >= 0 {
					vitreous = append(vitreous, grey(c, row))
				}
			}
			for row := int(ilm[c]) + 4; row < int(bm[c])-4; row++ {
				retina = append(retina, grey(c, row))
			}
		}
		slices.Sort(vitreous)
		slices.Sort(retina)
		q := func(xs []int, p int) int { return xs[len(xs)*p/100] }
		t.Logf("%s: vitreous median %d; retina median %d, quartiles %d–%d", path, q(vitreous, 50), q(retina, 50), q(retina, 25), q(retina, 75))
		if q(vitreous, 50) > 64 {
			t.Errorf("%s: the vitreous shows at median grey %d: speckle, not a dark background", path, q(vitreous, 50))
		}
		if m := q(retina, 50); m < 64 || m > 220 {
			t.Errorf("%s: the retina shows at median grey %d", path, m)
		}
		if q(retina, 75)-q(retina, 25) < 24 {
			t.Errorf("%s: the retina's middle half spans greys %d–%d: its layers do not show", path, q(retina, 25), q(retina, 75))
		}
	}
}
