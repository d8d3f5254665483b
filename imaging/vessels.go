package imaging

import (
	"math"
	"slices"
)

// Large retinal vessels run in the nerve fibre layer, above all in the
// arcades that cross a peripapillary circle's superior and inferior
// sectors. A vessel is a bright wall over a dark lumen, and under it the
// deeper layers lie in its shadow: the RNFL/GCL boundary has no one
// place there (a device draws it under the vessel; the graph search
// takes the vessel's lower wall or the shadow's edge). On the two real
// circles, RNFL/GCL is within 1–2 px of the device's outside the
// shadows and 6–13 px off under them, which put the temporal-inferior
// sector 8–11 µm thick. So the RNFL/GCL boundary counts as unreliable
// in a vessel's shadow, and the RNFL means are taken over the graded
// A-scans outside the shadows (as devices interpolate across vessels).
//
// A shadow is found on the RPE band, the brightest layer under the
// vessels: an A-scan whose RPE (log intensity over ±1 row and ±1
// A-scan) is vesselShadowDepth or more under the B-scan's median RPE
// level, widened by vesselMarginUm either side for the vessel's walls.
// On the real circles, the A-scans under the arcades are 1.4–2.5 under
// the median, the rest within ±0.9.
const (
	vesselShadowDepth  = 0.6
	vesselMarginUm     = 35
	vesselBaselineCols = 64
)

// vesselShadows marks the A-scans ([frame*cols+col]) that lie in a
// large vessel's shadow, from the volume (denoised, working scale) and
// its RPE; nil when the layers carry no RPE.
func vesselShadows(v *Volume, l *Layers) []bool {
	if !l.has(RPE) || len(l.Boundaries[RPE]) != v.Frames*v.Cols {
		return nil
	}
	out := make([]bool, v.Frames*v.Cols)
	margin := int(math.Round(vesselMarginUm / max(v.Spacing.LateralUm, 1e-3)))
	for f := range v.Frames {
		img := v.Frame(f)
		level := make([]float64, v.Cols)
		finite := 0
		for c := range v.Cols {
			level[c] = math.NaN()
			r := float64(l.Boundaries[RPE][f*v.Cols+c])
			if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r >= float64(v.Rows) {
				continue
			}
			r0 := int(math.Round(r))
			var s float64
			var n int
			for rr := max(0, r0-1); rr <= min(v.Rows-1, r0+1); rr++ {
				for cc := max(0, c-1); cc <= min(v.Cols-1, c+1); cc++ {
					s += math.Log1p(float64(max(img[rr*v.Cols+cc], 0)))
					n++
				}
			}
			level[c] = s / float64(n)
			finite++
		}
		if finite == 0 {
			continue
		}
		around := make([]float64, 0, 2*vesselBaselineCols+1)
		for c, x := range level {
			around = around[:0]
			for cc := max(0, c-vesselBaselineCols); cc <= min(v.Cols-1, c+vesselBaselineCols); cc++ {
				if !math.IsNaN(level[cc]) {
					around = append(around, level[cc])
				}
			}
			if len(around) == 0 {
				continue
			}
			slices.Sort(around)
			if x <= around[len(around)/2]-vesselShadowDepth {
				for cc := max(0, c-margin); cc <= min(v.Cols-1, c+margin); cc++ {
					out[f*v.Cols+cc] = true
				}
			}
		}
	}
	return out
}
