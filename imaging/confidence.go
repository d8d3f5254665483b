package imaging

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Boundary confidence: how plainly the image shows a boundary where it
// was found, whatever found it. For every A-scan, the contrast-to-noise
// ratio across the boundary: the mean step in log intensity between the
// cnrDepthUm above and below it, over the A-scans within cnrHalfCols
// either side (each at its own row), divided by the noise there, the
// spread of log intensity between neighbouring A-scans in the same rows
// (median absolute difference over √2, ×1.4826: a robust σ). A layer's
// own texture counts as noise, so a boundary between two speckled
// layers scores lower than one over the vitreous; what matters is the
// ratio against the boundary's own calibration (minCNRFor).
const (
	cnrDepthUm  = 8
	cnrHalfCols = 5
)

// minCNRFor is the contrast-to-noise ratio at which a supported
// boundary (see judgeBoundaries) is also called reliable in an A-scan,
// what every figure rests on, calibrated on the degradation suite so that a
// boundary called reliable is within 2 px of the truth in ≥ 95% of the
// A-scans so called (docs/imaging.md, Calibration), on the noise it was
// calibrated on and on noise drawn anew. Over the real scans, RNFL/GCL
// is so in 84% of its supported A-scans, 96% from a contrast-to-noise
// ratio of 7, 97% from 8; on a circle it is reliable also where it is
// faint between reliable A-scans close by (faintRNFLReliable) or where
// the bridge between them confirms it (bridgedRNFLReliable). Bruch's
// membrane is so in 90%, and the contrast hardly tells which: what does is whether it was seen, the
// RPE band's lower edge itself (within bmSeenRows), not a baseline
// fitted under a band raised or bent, and no other band of the RPE
// complex under it (bmAmbiguous). Seen and from a ratio of 4 it is
// within 2 px in 96% (real) and 99% (phantoms) of the A-scans; not
// seen, 56–79% whatever its ratio. The RPE (the band's brightest row, a
// ridge, not an edge) is never called reliable: on the phantoms it is
// within 2 px in 95–96% of the clean A-scans but 70–92% under noise,
// speckle, defocus or clipping whatever its contrast, and no threshold
// restores that; no figure rests on it (the outer segments and the RPE
// are one layer, EZ to BM: RetinalLayers).
func minCNRFor(boundary string) float64 {
	switch boundary {
	case RNFLGCL:
		return 7
	case BM:
		return 4
	case IPLINL, INLOPL, OPLONL:
		return 4
	default:
		return defaultMinCNR
	}
}

// bmSeenRows is how far (rows) Bruch's membrane may lie from the RPE
// band's lower edge and still count as seen for its reliability;
// bmAmbiguousMinCNR the contrast-to-noise ratio from which it is
// reliable even with another band of the RPE complex under it
// (bmAmbiguous): seen and from a ratio of 4, it is within 2 px of the
// truth in 92–98% of the real circles' A-scans and 99% of the
// phantoms'; with a band under it, in 3–63% of the real A-scans under a
// ratio of 8 (96.8% from 8 on the circles, 18% on the line, 99.4% on
// the phantoms, where the flag is nearly always a false alarm).
const (
	bmSeenRows        = 1
	bmAmbiguousMinCNR = 8
)

// defaultMinCNR is the contrast-to-noise ratio a boundary needs to
// support a figure (and, unless minCNRFor says more, to be called
// reliable).
const defaultMinCNR = 2.0

// boundaryCNR returns the contrast-to-noise ratio across boundary rows
// ([frame*cols+col]) in every A-scan of a denoised volume on the
// working scale. NaN and infinite rows, and rows outside the image,
// score 0.
//
// What an A-scan's window adds depends only on the A-scan itself: its
// steps across the boundary at its own row, and its differences from
// the A-scan before it in the same rows. Those are taken once per
// A-scan (4·e logarithms), not once per window that holds it, and each
// window sums its steps in the same order and takes the median of its
// differences by selection, so the ratio is the same to the last bit as
// summing and sorting window by window (boundaryCNRReference, in the
// tests).
func boundaryCNR(v *Volume, rows []float32) []float64 {
	out := make([]float64, v.Frames*v.Cols)
	if len(rows) != len(out) {
		return out
	}
	e := max(2, int(math.Round(cnrDepthUm/v.Spacing.AxialUm)))
	forEachFrame(v.Frames, func(f int) {
		img := v.Frame(f)
		lg := func(r, c int) float64 {
			r = min(max(r, 0), v.Rows-1)
			return math.Log1p(float64(max(img[r*v.Cols+c], 0)))
		}
		// Per A-scan: whether its row is in the image; its e steps
		// (above minus below, k = 1..e); its 2e differences from the
		// A-scan before it (above and below, k = 1..e).
		valid := make([]bool, v.Cols)
		steps := make([]float64, v.Cols*e)
		lateral := make([]float64, v.Cols*2*e)
		for c := range v.Cols {
			x := float64(rows[f*v.Cols+c])
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x >= float64(v.Rows) {
				continue
			}
			valid[c] = true
			r := int(math.Round(x))
			for k := 1; k <= e; k++ {
				up, down := lg(r-k, c), lg(r+k-1, c)
				steps[c*e+k-1] = up - down
				if c > 0 {
					lateral[(c*e+k-1)*2] = math.Abs(up - lg(r-k, c-1))
					lateral[(c*e+k-1)*2+1] = math.Abs(down - lg(r+k-1, c-1))
				}
			}
		}
		diffs := make([]float64, 0, 2*e*(2*cnrHalfCols+1))
		for c := range v.Cols {
			lo, hi := max(0, c-cnrHalfCols), min(v.Cols-1, c+cnrHalfCols)
			var step float64
			var n int
			diffs = diffs[:0]
			ok, nan := true, false
			for cc := lo; cc <= hi; cc++ {
				if !valid[cc] {
					ok = false
					break
				}
				for _, s := range steps[cc*e : (cc+1)*e] {
					step += s
					n++
				}
				if cc > lo {
					for _, d := range lateral[cc*2*e : (cc+1)*2*e] {
						nan = nan || d != d
						diffs = append(diffs, d)
					}
				}
			}
			if !ok || n == 0 || len(diffs) == 0 {
				continue
			}
			var mid float64
			if nan {
				slices.Sort(diffs) // NaNs first, as a sort puts them
				mid = diffs[len(diffs)/2]
			} else {
				mid = selectNth(diffs, len(diffs)/2)
			}
			sigma := max(mid*1.4826/math.Sqrt2, 1e-3)
			out[f*v.Cols+c] = math.Abs(step/float64(n)) / sigma
		}
	})
	return out
}

// selectNth returns the value that would lie at index k of xs sorted
// ascending (xs holds no NaN), reordering xs: Hoare's selection.
func selectNth(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		p := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// agreeUm is how far a boundary may move when the volume is denoised
// again at altStrength and segmented anew and still count as reliable
// in an A-scan (2 rows of the 3.9 µm of the real scans and the
// phantoms): a boundary the image shows plainly stays where it is; one
// the noise placed moves.
const (
	agreeUm     = 8
	altStrength = 2
)

// judgedResolutionUm is the coarsest row spacing at which boundaries are
// judged: on coarser rows the ±8 µm either side of a boundary is under
// a row, and the layers themselves are a row or two thick, so neither
// the contrast across a boundary nor its agreement tells anything
// (Analyze then judges none, and Analysis.Boundaries is empty).
const judgedResolutionUm = rpeResolvedUm

// boundaryEvidence is what judgeBoundaries judged each boundary by, per
// A-scan: its contrast-to-noise ratio, how far (µm) it moved under the
// second denoising, and the verdicts: supported (the image shows it
// plainly and it stays put) and reliable (supported, and calibrated to
// lie within 2 px of the truth: see minCNRFor), what the figures rest
// on.
type boundaryEvidence struct {
	supported map[string][]bool
	reliable  map[string][]bool
	cnr       map[string][]float64
	movedUm   map[string][]float64
	ambiguous []bool // BM: another band under it (bmAmbiguous)
	bridged   []bool // a circle's RNFL/GCL reliable only as the bridge confirms it (bridgedRNFLReliable)
}

// judgeBoundaries judges, per boundary of l and A-scan, whether the
// boundary is supported: its contrast-to-noise ratio in v reaches
// defaultMinCNR; again, the reference segmenter's result on v denoised
// once more (at altStrength), has it within agreeUm; no saturated
// sample lies beside it; and it lies cnrDepthUm or more under the
// boundary above it. On a circle, RNFL/GCL in a vessel's shadow (shadow,
// from vesselShadows; nil: none) is supported where the bridge across
// the shadow is (both its ends). It is reliable where supported and its
// ratio reaches minCNRFor (BM also seen and not ambiguous; the RPE
// never; a circle's RNFL/GCL also where faintRNFLReliable or
// bridgedRNFLReliable says).
// Boundaries the layers do not carry are absent.
func judgeBoundaries(v *Volume, l, again *Layers, shadow []bool) boundaryEvidence {
	ev := boundaryEvidence{supported: map[string][]bool{}, reliable: map[string][]bool{}, cnr: map[string][]float64{}, movedUm: map[string][]float64{}, ambiguous: bmAmbiguous(v, l)}
	sat := saturatedSamples(v)
	names := append(slices.Clone(BoundaryNames), rpeBottomName)
	for _, b := range names {
		rows, other := l.Boundaries[b], again.Boundaries[b]
		if b == rpeBottomName {
			rows, other = l.RPEBottom, again.RPEBottom
		}
		if len(rows) != v.Frames*v.Cols || len(other) != len(rows) {
			continue
		}
		cnr := boundaryCNR(v, rows)
		above := boundaryAbove(l, b)
		if len(above) != len(rows) {
			above = nil
		}
		ok, sure := make([]bool, len(rows)), make([]bool, len(rows))
		moved := make([]float64, len(rows))
		for i := range ok {
			moved[i] = math.Abs(float64(rows[i]-other[i])) * v.Spacing.AxialUm
			ok[i] = cnr[i] >= defaultMinCNR && moved[i] <= agreeUm && !besideSaturation(v, sat, i, rows[i]) &&
				!(above != nil && float64(rows[i]-above[i])*v.Spacing.AxialUm < cnrDepthUm)
			sure[i] = ok[i] && cnr[i] >= minCNRFor(b) && b != RPE
			if b == BM && len(ev.ambiguous) == len(ok) && ev.ambiguous[i] && cnr[i] < bmAmbiguousMinCNR {
				sure[i] = false
			}
			if b == BM && (len(l.RPEBottom) != len(ok) || !(abs32(rows[i]-l.RPEBottom[i]) <= bmSeenRows)) {
				sure[i] = false
			}
		}
		if b == RNFLGCL && len(shadow) == len(ok) {
			// In a vessel's shadow the boundary found is not used: the
			// circle's RNFL bridges it (measureRNFL), and the bridge
			// holds where both its ends do. The boundary found there is
			// not called reliable.
			ends := bridgeCircleBool(ok, shadow, v.Cols)
			for i := range ok {
				if shadow[i] {
					ok[i], sure[i] = ends[i], false
				}
			}
			base := slices.Clone(sure)
			faintRNFLReliable(ok, sure, cnr, shadow, v.Cols, int(math.Round(faintRNFLReachUm/max(v.Spacing.LateralUm, 1))))
			if ilm := l.Boundaries[ILM]; len(ilm) == len(rows) {
				thick := make([]float64, len(rows))
				for i := range thick {
					thick[i] = float64(rows[i]-ilm[i]) * v.Spacing.AxialUm
				}
				ev.bridged = bridgedRNFLReliable(ok, sure, base, moved, thick, shadow, v.Cols)
			}
		}
		ev.supported[b], ev.reliable[b], ev.cnr[b], ev.movedUm[b] = ok, sure, cnr, moved
	}
	return ev
}

// A circle's RNFL/GCL where the thick nerve fibre bundles end in a faint
// edge: in a B-scan whose RNFL/GCL is reliable (minCNRFor) over at least
// clearRNFLShare of the A-scans outside the vessels' shadows, it is
// reliable also where it is supported from a contrast-to-noise ratio of
// faintRNFLMinCNR and has an A-scan reliable so within faintRNFLReachUm
// on either side (see faintRNFLReliable).
const (
	clearRNFLShare   = 0.5
	faintRNFLMinCNR  = 4
	faintRNFLReachUm = 225
)

// faintRNFLReliable calls a circle's RNFL/GCL reliable where it is
// supported (ok) outside the shadows with a contrast-to-noise ratio of
// faintRNFLMinCNR or more, between two A-scans already reliable (sure)
// within reach A-scans of it on either side (a shadow between stepped
// over, not counted: the RNFL is bridged across it), in
// each B-scan of cols A-scans (closed on itself) where it is already
// reliable over clearRNFLShare of the A-scans outside the shadows. There
// the image is clear, and a faint stretch between clear ends is the
// anatomy (the lower edge of the thick RNFL under the arcades' bundles
// fades into the GCL), which the path found continues from its clear
// ends; under a weak signal the whole boundary's contrast falls, and
// the clear share and the anchors with it. On the degradation suite's
// held-out noise, the same A-scans promoted without the anchors (any
// supported from a ratio of 4 in a clear B-scan) were within 2 px of the
// device's in 88% and pulled RNFL/GCL's reliable A-scans to 94.4%.
func faintRNFLReliable(ok, sure []bool, cnr []float64, shadow []bool, cols, reach int) {
	for f := 0; f+cols <= len(ok); f += cols {
		if !clearRNFL(sure[f:f+cols], shadow[f:f+cols]) {
			continue
		}
		base := slices.Clone(sure[f : f+cols])
		anchored := func(c, step int) bool { // shadows are stepped over, not counted
			for k, n := 1, 0; k < cols && n < reach; k++ {
				j := ((c+step*k)%cols + cols) % cols
				switch {
				case shadow[f+j]:
				case base[j]:
					return true
				default:
					n++
				}
			}
			return false
		}
		for c := range cols {
			i := f + c
			if !shadow[i] && !base[c] && ok[i] && cnr[i] >= faintRNFLMinCNR && anchored(c, -1) && anchored(c, +1) {
				sure[i] = true
			}
		}
	}
}

// A circle's RNFL/GCL that the bridge across it confirms: in a clear
// B-scan (clearRNFLShare), a supported A-scan outside the shadows whose
// RNFL/GCL moved no more than bridgeSteadyUm under the second denoising
// and whose RNFL thickness lies within bridgeAgreeUm of the straight
// bridge between the nearest A-scans reliable by their contrast on
// either side (see bridgedRNFLReliable).
const (
	bridgeAgreeUm  = 6
	bridgeSteadyUm = 4
)

// bridgedRNFLReliable calls a circle's RNFL/GCL reliable where two
// estimates that do not share their evidence agree: the edge the image
// shows in the A-scan itself (supported: ok, and steady within
// bridgeSteadyUm, movedUm), and the RNFL's thickness (thickUm) bridged
// in a straight line, as measureRNFL bridges, between the nearest
// A-scans on either side reliable by their contrast (base: minCNRFor,
// outside the shadows), within bridgeAgreeUm. Only in a B-scan of cols
// A-scans (closed on itself) whose RNFL/GCL base calls reliable over
// clearRNFLShare of the A-scans outside the shadows (shadow): under a
// weak signal the bridge's ends are few and far apart. The nerve fibre
// layer's thickness varies slowly around the disc, so where the faint
// edge follows the bridge the anatomy and the image say the same; where
// it strays, one of them is wrong and neither is vouched for. On the
// two clean real circles the A-scans so called were within 2 px of the
// device's in 90 of 92 (the circles' graded shares 82% and 81% → 89%
// and 86%); under the degradation suite's noise in 91% (calibration
// draw) and 92.5% (held-out draws), which keeps RNFL/GCL called
// reliable over the real scans within 2 px in 96.5% and 95.2%
// (docs/imaging.md, Calibration). It returns the A-scans it called
// reliable.
func bridgedRNFLReliable(ok, sure, base []bool, movedUm, thickUm []float64, shadow []bool, cols int) []bool {
	bridged := make([]bool, len(ok))
	for f := 0; f+cols <= len(ok); f += cols {
		if !clearRNFL(base[f:f+cols], shadow[f:f+cols]) {
			continue
		}
		b := base[f : f+cols]
		nearest := func(c, step int) (j, k int) { // the anchor and how far, in A-scans
			for k = 1; k < cols; k++ {
				if j = ((c+step*k)%cols + cols) % cols; b[j] {
					return j, k
				}
			}
			return -1, 0
		}
		for c := range cols {
			i := f + c
			if sure[i] || shadow[i] || !ok[i] || !(movedUm[i] <= bridgeSteadyUm) {
				continue
			}
			left, kl := nearest(c, -1)
			right, kr := nearest(c, +1)
			if left < 0 || right < 0 {
				continue
			}
			onBridge := thickUm[f+left] + (thickUm[f+right]-thickUm[f+left])*float64(kl)/float64(kl+kr)
			if math.Abs(thickUm[i]-onBridge) <= bridgeAgreeUm {
				sure[i], bridged[i] = true, true
			}
		}
	}
	return bridged
}

// sectorEvidence is what a circle's RNFL figures are judged on (the
// shares each needs reliable, the sectors followed, the longest straight
// bridge): rel with RNFL/GCL taken where the image's contrast calls it
// reliable, not where only the bridge confirms it (bridged). Such an
// A-scan lies within bridgeAgreeUm of the straight bridge: it is
// measured, and counts in the graded share, but cannot tell the bridge
// from the anatomy where the two part, the nerve fibre bundles' hump
// that a long bridge cuts off (maxSectorBridgeUm), and a path with
// little evidence runs straight between its ends too.
func sectorEvidence(rel map[string][]bool, bridged []bool) map[string][]bool {
	if len(bridged) == 0 || len(bridged) != len(rel[RNFLGCL]) {
		return rel
	}
	out := maps.Clone(rel)
	out[RNFLGCL] = andMask(rel[RNFLGCL], notMask(bridged))
	return out
}

// clearRNFL is whether a B-scan's RNFL/GCL is reliable (sure) over
// clearRNFLShare of its A-scans outside the shadows.
func clearRNFL(sure, shadow []bool) bool {
	var open, clear int
	for i := range sure {
		if !shadow[i] {
			open++
			if sure[i] {
				clear++
			}
		}
	}
	return open > 0 && float64(clear) >= clearRNFLShare*float64(open)
}

// boundaryAbove is the rows of the boundary just above b in l (nil for
// the ILM, the RPE band's lower edge, and boundaries l lacks). A
// boundary closer to it than cnrDepthUm is not supported: the contrast
// across it is its neighbour's, and a segmentation that lost the layers
// between them (a defocused phantom: RNFL/GCL, IPL/INL and INL/OPL
// stacked within 2 px of the ILM, all with the ILM's contrast) stacks
// them so. Where layers truly thin out (the foveal pit's inner layers)
// they go unjudged, and the figures' shares allow for it.
func boundaryAbove(l *Layers, b string) []float32 {
	i := slices.Index(BoundaryNames, b)
	if i <= 0 {
		return nil
	}
	return l.Boundaries[BoundaryNames[i-1]]
}

// bridgeCircleBool is, for each A-scan in skip, whether the nearest
// A-scans either side outside skip (around each B-scan of cols A-scans,
// which closes on itself) are both ok; ok elsewhere.
func bridgeCircleBool(ok, skip []bool, cols int) []bool {
	out := slices.Clone(ok)
	for f := 0; f+cols <= len(ok); f += cols {
		o, k := ok[f:f+cols], skip[f:f+cols]
		if !slices.Contains(k, false) {
			for c := range cols {
				out[f+c] = false
			}
			continue
		}
		for c := range cols {
			if !k[c] {
				continue
			}
			a, b := 1, 1
			for k[(c-a+cols)%cols] {
				a++
			}
			for k[(c+b)%cols] {
				b++
			}
			out[f+c] = o[(c-a+cols)%cols] && o[(c+b)%cols]
		}
	}
	return out
}

// Saturation: a device (or its export) that clips the brightest levels
// flattens the top of the bright layers, and an edge beside a flat top
// is found where the level finally falls, deeper than the eye's (the
// real circles clipped at 60% of their range: RNFL/GCL 1–3 px deeper
// in every sector, the RNFL global mean 12 µm thick). The volume is
// saturated when more than minSaturatedShare of its samples lie within
// saturatedFraction of its highest level (clean real scans, denoised:
// ≤ 0.013%; clipped at 80% of the range 0.02–0.37%, at 60% 2.3–4.6%);
// then no boundary is reliable in an A-scan whose samples within
// cnrDepthUm of it are saturated.
const (
	saturatedFraction  = 0.98
	minSaturatedShare  = 0.001
	saturatedDepthRows = 2
)

// saturatedSamples marks the samples of a saturated volume at its top
// level (see saturatedFraction); nil when the volume is not saturated.
func saturatedSamples(v *Volume) []bool {
	var top float32
	for _, x := range v.Data {
		if x > top && !math.IsInf(float64(x), 0) {
			top = x
		}
	}
	if !(top > 0) {
		return nil
	}
	level := saturatedFraction * top
	out := make([]bool, len(v.Data))
	var n int
	for i, x := range v.Data {
		if x >= level {
			out[i] = true
			n++
		}
	}
	if float64(n) <= minSaturatedShare*float64(len(v.Data)) {
		return nil
	}
	return out
}

// besideSaturation reports whether a saturated sample (sat, from
// saturatedSamples) lies within cnrDepthUm of the boundary at row in
// A-scan i (frame*cols+col).
func besideSaturation(v *Volume, sat []bool, i int, row float32) bool {
	if sat == nil || math.IsNaN(float64(row)) {
		return false
	}
	f, c := i/v.Cols, i%v.Cols
	e := max(saturatedDepthRows, int(math.Round(cnrDepthUm/v.Spacing.AxialUm)))
	r0 := int(math.Round(float64(row)))
	for r := max(0, r0-e); r <= min(v.Rows-1, r0+e); r++ {
		if sat[(f*v.Rows+r)*v.Cols+c] {
			return true
		}
	}
	return false
}

// Lesion kinds, as the agreement judges them: fluid (intraretinal and
// subretinal) and drusen (drusen and PED, the RPE raised).
const (
	kindFluid = iota
	kindDrusen
)

// lesionKind is a lesion type's kind.
func lesionKind(typ string) int {
	if typ == IntraretinalFluid || typ == SubretinalFluid {
		return kindFluid
	}
	return kindDrusen
}

// KindFigure is the figure a lesion type is withheld under when its kind
// alone is: FigureFluid or FigureDrusen.
func KindFigure(lesionType string) string {
	if lesionKind(lesionType) == kindFluid {
		return FigureFluid
	}
	return FigureDrusen
}

// agreement is how far the lesions found agree between the volume as
// denoised and denoised once more, per kind (kindFluid, kindDrusen).
type agreement struct {
	// dice is the Dice coefficient of the kind's voxels, 1 where
	// neither way finds any.
	dice [2]float64
	// unmatched counts the lesions, found either way, not found again
	// over half their voxels; flat those lying in one B-scan only while
	// wider than flatLesionSpacings B-scan spacings (thinInY).
	unmatched, flat [2]int
}

// lesionAgreement is how far the lesions found agree between the
// volume as denoised (v, l) and denoised once more and segmented anew
// (alt, again), over the graded A-scans (mask), per kind. Fluid and
// drusen the image shows stay; those the noise made come and go.
func lesionAgreement(ctx context.Context, v, alt *Volume, l, again *Layers, mask []bool) (agreement, error) {
	var out agreement
	m1, err := FindLesionMasks(ctx, v, l)
	if err != nil {
		return out, err
	}
	m2, err := FindLesionMasks(ctx, alt, again)
	if err != nil {
		return out, err
	}
	l1, err := m1.Lesions(v, l)
	if err != nil {
		return out, err
	}
	l2, err := m2.Lesions(alt, again)
	if err != nil {
		return out, err
	}
	// Only what could be reported counts: the voxels of each mask inside
	// the boxes of the lesions of that kind (specks too small to report
	// come and go with the noise of any scan) on graded A-scans. One byte
	// per voxel holds the four sets (fluid and drusen, each way: bits
	// f1, f2, d1, d2), and each set also lists its voxels, so the
	// agreement is counted over the voxels in the sets, not over the
	// volume.
	const f1, f2, d1, d2 = 1, 2, 4, 8
	in := make([]uint8, len(v.Data))
	collect := func(m []bool, lesions []Lesion, kind int, bit uint8) []int {
		var out []int
		for _, les := range lesions {
			if lesionKind(les.Type) != kind {
				continue
			}
			for _, b := range les.Boxes {
				for r := max(b.Row0, 0); r <= min(b.Row1, v.Rows-1); r++ {
					for c := max(b.Col0, 0); c <= min(b.Col1, v.Cols-1); c++ {
						if i := (b.Frame*v.Rows+r)*v.Cols + c; b.Frame >= 0 && b.Frame < v.Frames && m[i] && mask[b.Frame*v.Cols+c] && in[i]&bit == 0 {
							in[i] |= bit
							out = append(out, i)
						}
					}
				}
			}
		}
		return out
	}
	agree := func(a []int, b []int, bBit uint8) float64 {
		var both int
		for _, i := range a {
			if in[i]&bBit != 0 {
				both++
			}
		}
		if len(a)+len(b) == 0 {
			return 1
		}
		return 2 * float64(both) / float64(len(a)+len(b))
	}
	fl1, fl2 := collect(m1.Fluid, l1, kindFluid, f1), collect(m2.Fluid, l2, kindFluid, f2)
	dr1, dr2 := collect(m1.Drusen, l1, kindDrusen, d1), collect(m2.Drusen, l2, kindDrusen, d2)
	out.dice = [2]float64{agree(fl1, fl2, f2), agree(dr1, dr2, d2)}
	for _, les := range append(slices.Clone(l1), l2...) {
		if thinInY(v, les) {
			out.flat[lesionKind(les.Type)]++
		}
	}
	// Each lesion, either way, must be found again over half its voxels
	// on the graded A-scans.
	for _, side := range []struct {
		lesions     []Lesion
		mine, other [2]uint8 // fluid, drusen
	}{{l1, [2]uint8{f1, d1}, [2]uint8{f2, d2}}, {l2, [2]uint8{f2, d2}, [2]uint8{f1, d1}}} {
		for _, les := range side.lesions {
			kind := lesionKind(les.Type)
			var n, k int
			for _, b := range les.Boxes {
				for r := max(b.Row0, 0); r <= min(b.Row1, v.Rows-1); r++ {
					for c := max(b.Col0, 0); c <= min(b.Col1, v.Cols-1); c++ {
						if i := (b.Frame*v.Rows+r)*v.Cols + c; b.Frame >= 0 && b.Frame < v.Frames && in[i]&side.mine[kind] != 0 {
							n++
							if in[i]&side.other[kind] != 0 {
								k++
							}
						}
					}
				}
			}
			// A lesion a report would not give (its centroid where the
			// scan is not graded) that touches the graded part with fewer
			// voxels than a lesion needs to be one (minLesionVoxels), at
			// an edge, tells nothing either way; a lesion a report would
			// give is always judged.
			i := les.Frame*v.Cols + les.Col
			reported := i >= 0 && i < len(mask) && mask[i]
			if n > 0 && 2*k < n && (reported || n >= minLesionVoxels) {
				out.unmatched[kind]++
			}
		}
	}
	return out, nil
}

// flatLesionSpacings: a lesion found in one B-scan only while wider
// along it than this many B-scan spacings is a streak, not a deposit or
// a pocket, which are about as long across B-scans as along them (a
// lesion-free phantom at σ 5%, on a noise draw held out from the
// calibration, showed a "druse" 750 µm wide in one B-scan of B-scans
// 250 µm apart; the phantoms' drawn drusen and fluid span 2–4).
const flatLesionSpacings = 2

// thinInY reports whether lesion les lies in one B-scan only of a cube
// while wider than flatLesionSpacings B-scan spacings.
func thinInY(v *Volume, les Lesion) bool {
	if v.Frames < 2 || v.Spacing.FrameUm <= 0 || len(les.Boxes) == 0 {
		return false
	}
	f, c0, c1 := les.Boxes[0].Frame, les.Boxes[0].Col0, les.Boxes[0].Col1
	for _, b := range les.Boxes {
		if b.Frame != f {
			return false
		}
		c0, c1 = min(c0, b.Col0), max(c1, b.Col1)
	}
	return float64(c1-c0+1)*v.Spacing.LateralUm > flatLesionSpacings*v.Spacing.FrameUm
}

// minLesionAgreement is the least Dice coefficient between the lesions
// found at two denoising strengths for lesions to be reported
// (calibrated on the degradation suite's phantoms: docs/imaging.md).
const minLesionAgreement = 0.8

// rpeBottomName names the RPE band's lower edge among the boundaries
// judged (drusen are measured on it).
const rpeBottomName = "RPE bottom"

// minReliableShare is the least share of a figure's graded A-scans in
// which each boundary it needs must be reliable (judgeBoundaries) for
// the figure to be reported (calibrated on the degradation suite:
// docs/imaging.md, Calibration): a cube's subfields, its layers and its
// lesions. A cube's figures are measured on reliable rows only (Bruch's
// membrane bridged between them: bridgeBoundary), and a subfield must
// be covered evenly by the A-scans measured (coverageBias); the share
// says they are enough to speak for it. ILM and BM are reliable in
// 65–95% of a phantom's A-scans clean and under mild noise, BM in 32%
// of a full-size phantom's at σ 8%, where its CST, bridged, stayed
// within 2.5 µm; hence 30% for BM.
func minReliableShare(boundary string) float64 {
	if boundary == BM {
		return 0.3
	}
	return 0.5
}

// minBMSeenShare is the least share of the A-scans of a line's central
// 1 mm, or of a cube's central subfield, whose Bruch's membrane must be
// seen (bmSeen) for the central thickness to be reported.
const minBMSeenShare = 0.75

// lesionShare is the least share of a scan's graded A-scans in which
// the boundaries that bound fluid and drusen must be reliable for
// lesions to be reported: EZ and the RPE band's lower edge in 75% (a
// lesion-free phantom under a motion jump of 30 rows showed two drusen
// with them in less), Bruch's membrane in 40% (the real line's is
// reliable in 48% of its A-scans clean).
func lesionShare(boundary string) float64 {
	if boundary == BM {
		return 0.4
	}
	return 0.75
}

// minCircleShare is the least share of a circle's graded A-scans in
// which ILM and RNFL/GCL must be reliable (RNFL/GCL: outside the
// vessels' shadows, or bridged there between reliable ends) for the
// RNFL global mean: between them the RNFL/GCL is bridged. The clean
// real circles hold 59–62%, under additive noise up to σ 8%, speckle
// 0.2, a contrast of half, defocus, vignetting 0.6 and motion 52–74%;
// the circles whose bridged global mean moved by 5–32 µm (a weak
// signal of a third or less, σ 12%, speckle 0.4, vignetting 0.4 with
// its shadows) 7–44%.
const minCircleShare = 0.5

// BoundaryReliability is how reliable one boundary is over a scan's
// gradable A-scans.
type BoundaryReliability struct {
	Boundary string `json:"boundary"`
	// ReliableFraction is the share of the gradable A-scans in which the
	// boundary is reliable: calibrated on the degradation suite to lie
	// within 2 px of the truth in ≥ 95% of such A-scans (see minCNRFor);
	// what the figures rest on and their needs are judged by.
	ReliableFraction float64 `json:"reliableFraction"`
	// SupportedFraction is the share in which the image shows it plainly
	// and a second denoising finds it again (judgeBoundaries), reliable
	// or not.
	SupportedFraction float64 `json:"supportedFraction"`
}

// Withheld is a figure the analysis does not report, and why.
type Withheld struct {
	// Figure names it: rnflGlobal, rnflSectors (all), rnfl:<sector>, centralThickness,
	// centralSubfieldThickness, etdrs:<subfield>, totalVolume,
	// layer:<layer>, lesions, measurements.
	Figure string `json:"figure"`
	Reason string `json:"reason"`
}

// reliability judges the boundaries a figure needs over the A-scans
// where (gradable, and in the figure's region) is true: the first
// boundary reliable in under need(boundary) of them, with its share, or
// "" when all hold.
func reliability(rel map[string][]bool, where func(i int) bool, n int, need func(boundary string) float64, boundaries ...string) (weak string, share float64) {
	for _, b := range boundaries {
		ok, found := rel[b]
		if !found {
			return b, 0
		}
		var k, all int
		for i := range n {
			if where(i) {
				all++
				if ok[i] {
					k++
				}
			}
		}
		if all == 0 {
			return b, 0
		}
		if s := float64(k) / float64(all); s < need(b) {
			return b, s
		}
	}
	return "", 1
}

// unreliableReason says why a figure is withheld.
func unreliableReason(boundary string, share, need float64, where string) string {
	return fmt.Sprintf("the %s boundary is reliable in only %.0f%% of the graded A-scans %s (%.0f%% needed): noise, a weak signal or an artefact leaves it uncertain",
		boundary, 100*share, where, 100*need)
}

// minSectorShare is the least share of each RNFL sector's graded
// A-scans in which ILM and RNFL/GCL must be reliable for the global
// mean, on top of minCircleShare: a sector bridged over nearly all of
// its length is a guess. The clean real circles' worst sectors hold
// 40%; the circles that fail hold 0–13% in theirs.
const minSectorShare = 0.1

func sectorShare(string) float64 { return minSectorShare }

// minSectorSignal is the least signal strength (Quality.SignalStrength)
// on which a sector's mean is reported: a sixth of the circle averages
// out less noise than the global mean. On the suite's real circles
// (clean: signal 7.8 and 8.2), full circles of signal 7.1–7.4 (σ 2.5%,
// a weak signal, defocus) had sectors up to 10.2 µm from the device's;
// one at 7.5 (circle 4, contrast halved, a noise draw held out from the
// calibration) its nasal-superior sector 13.3 µm off, reliable in 73%
// of its A-scans, which moved this from 7.5.
const minSectorSignal = 7.6

// minOwnSectorShare is the least share of its own graded A-scans
// (outside the vessels' shadows) in which a sector's ILM and RNFL/GCL
// must be reliable for the sector's mean to be reported (the global
// mean may still be). A sector is a sixth of the circle: bridged over
// most of it, its mean is the bridge's. On the real circles the
// temporal-superior sector, reliable in 24–41% of its A-scans, came
// 10–13 µm thin, clean or degraded; the sectors reliable in 45% or more
// stayed within 9.7 µm on a signal of 7.6 or more (minSectorSignal).
const minOwnSectorShare = 0.45

// A sector whose RNFL/GCL is reliable in under minOwnSectorShare of
// its A-scans outside the vessels' shadows is bridged over most of its
// length, and a straight bridge cuts off what lies between its ends:
// on the clean real circles that is where the arcades' nerve fibre
// bundles thicken the RNFL (circle 4's temporal-superior sector, its
// RNFL/GCL reliable in 31% of the A-scans, came 12.3 µm thin so), and
// the RNFL/GCL there is faint (a contrast-to-noise ratio of 2–6) but
// found again by the second denoising. Such a sector is followed: its
// mean taken with the RNFL/GCL where it is supported (judgeBoundaries)
// outside the shadows, bridged only over the shadows and the A-scans
// where it is not, when it is reliable in minFollowedReliableShare of
// its A-scans and supported in minFollowedSupportedShare (on the clean
// real circles: reliable in 31–42%, supported in 75–97%; every sector
// so followed within 7.5 µm of the device's; on the degradation suite
// every sector reported stays within 9.7 µm, as before). The global
// mean stays the reliable rows' (measureRNFL with the reliable bridge):
// taken from the followed sectors it came 2.8 µm further from the
// device on circle 4. A sector reliable in minOwnSectorShare or more is
// followed too where it may be: once the ILM was put at its half level
// (halfLevelEdge), circle 2's temporal-superior sector, reliable in
// just over 45% of its A-scans outside the shadows, was bridged
// straight over the 45 A-scans of the bundles' hump and came 8 µm thin
// clean, 11.5–13.3 µm under σ 1–2.5%, vignetting and clipping at 80%;
// followed, 2 µm.
const (
	minFollowedReliableShare  = 0.25
	minFollowedSupportedShare = 0.7
)

// maxSectorBridgeUm is the longest stretch of a sector over which its
// RNFL/GCL may be bridged in a straight line (longestBridge) for the
// sector's mean to be reported. The nerve fibre bundles under the
// arcades thicken the RNFL over about half a millimetre, and a bridge
// across them cuts the hump off between its ends: circle 2's
// temporal-superior sector bridged over 530 µm came 8 µm thin (before
// it was followed), and on the degradation suite circle 4 under σ 1%,
// its temporal-superior sector reliable in just over half its A-scans
// but bridged over 854 µm of the hump (arcade vessels' shadows
// included), 12 µm thin. The clean circles' longest bridges are 442 µm
// (circle 4's temporal-inferior sector, within 4 µm of the device) and
// less.
const maxSectorBridgeUm = 500

// longestBridge is the longest run, in A-scans, of a sector's A-scans
// (sector, along a circle of n A-scans) where the RNFL/GCL is not held
// and is bridged, a vessel's shadow included: the bundles run under the
// arcades' vessels, and the bridge is as straight under them.
func longestBridge(n int, sector func(i int) bool, held []bool) int {
	start := 0
	for start < n && sector(start) {
		start++
	}
	var run, longest int
	for k := range n {
		i := (start + k) % n
		if !sector(i) || i < len(held) && held[i] {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}

// followedSector reports whether a sector (in: its graded A-scans
// outside the shadows) may be followed: its ILM reliable in
// minOwnSectorShare of them, its RNFL/GCL reliable in
// minFollowedReliableShare and supported in minFollowedSupportedShare.
func followedSector(rel, supported map[string][]bool, in func(i int) bool, n int) bool {
	if weak, _ := reliability(rel, in, n, func(string) float64 { return minOwnSectorShare }, ILM); weak != "" {
		return false
	}
	if weak, _ := reliability(rel, in, n, func(string) float64 { return minFollowedReliableShare }, RNFLGCL); weak != "" {
		return false
	}
	weak, _ := reliability(supported, in, n, func(string) float64 { return minFollowedSupportedShare }, RNFLGCL)
	return weak == ""
}

// sector is sector s's mean, and whether it was measured (nil: none).
func (m *RNFLMeasurements) sector(s string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	x, ok := m.Sectors[s]
	return x, ok
}

// bridgeBoundary returns l with boundary b taken where ok (reliable)
// and bridged elsewhere in a straight line along the B-scan between the
// nearest A-scans either side where it is ok, over gaps of up to
// maxBridgeUm (A-scans lateralUm apart), and where it now holds: ok, or
// bridged between two such A-scans. l itself is not changed.
func bridgeBoundary(l *Layers, b string, ok []bool, lateralUm float64) (*Layers, []bool) {
	rows := l.Boundaries[b]
	held := make([]bool, len(rows))
	if len(ok) != len(rows) || l.Cols == 0 {
		return l, held
	}
	out := *l
	out.Boundaries = maps.Clone(l.Boundaries)
	bridged := slices.Clone(rows)
	out.Boundaries[b] = bridged
	for f := 0; f+l.Cols <= len(rows); f += l.Cols {
		last := -1 // the last A-scan ok in this B-scan
		for c := range l.Cols {
			i := f + c
			if !ok[i] {
				continue
			}
			held[i] = true
			if last >= 0 && c-last > 1 && float64(c-last-1)*lateralUm <= maxBridgeUm {
				ra, rb := rows[f+last], rows[i]
				for k := last + 1; k < c; k++ {
					bridged[f+k] = ra + (rb-ra)*float32(k-last)/float32(c-last)
					held[f+k] = true
				}
			}
			last = c
		}
	}
	return &out, held
}

// maxBridgeUm is the longest gap a cube's Bruch's membrane is bridged
// over: the phantom with fluid and drusen has it unreliable over 740 µm
// under a druse and a fluid pocket by the fovea, where the bridge is the
// baseline under the raised band. The A-scans of longer gaps are not
// measured, and the subfield's even coverage judges what is left.
const maxBridgeUm = 1000

// lineCentral is a line's mean retinal thickness over its central 1 mm
// about the pit at fc (within 0.5 mm), taken again on reliable rows:
// over the graded A-scans whose ILM is reliable, from the ILM to Bruch's
// membrane where it is reliable, bridged in a straight line between the
// nearest A-scans either side where it is elsewhere (the membrane runs
// smoothly under the pit; the pit is the ILM's). share is the share of
// the central 1 mm in which both are reliable; ok is false when an
// A-scan measured has no reliable membrane on one side.
func lineCentral(v *Volume, l *Layers, mask []bool, rel map[string][]bool, fc int) (mean, share float64, ok bool) {
	ilm, bm, relBM := l.Boundaries[ILM], l.Boundaries[BM], rel[BM]
	if len(rel[ILM]) != v.Cols || len(relBM) != v.Cols {
		return 0, 0, false
	}
	var sum float64
	var n, both, all int
	for c := range v.Cols {
		if math.Abs(float64(c-fc))*v.Spacing.LateralUm/1000 > 0.5 {
			continue
		}
		all++
		if !mask[c] || !rel[ILM][c] {
			continue
		}
		row := bm[c]
		if relBM[c] {
			both++
		} else {
			a, b := c-1, c+1
			for a >= 0 && !relBM[a] {
				a--
			}
			for b < v.Cols && !relBM[b] {
				b++
			}
			if a < 0 || b >= v.Cols {
				return 0, 0, false
			}
			row = bm[a] + (bm[b]-bm[a])*float32(c-a)/float32(b-a)
		}
		sum += float64(row-ilm[c]) * v.Spacing.AxialUm
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	return sum / float64(n), float64(both) / float64(max(all, 1)), true
}

// minCentralReliable is the least share of a line's central 1 mm in
// which ILM and BM must both be reliable for its central thickness
// (lineCentral: Bruch's membrane bridged between them) to be reported.
// On the real line every central thickness so taken in the suite, from
// a share of 20% (clipping at 80%) to 74%, was within 6.2 µm of the
// device's (clean: 39%, 5.8 µm); below it the membrane is a guess.
const minCentralReliable = 0.2

// Figures the analysis may withhold (Withheld.Figure).
const (
	FigureRNFLGlobal  = "rnflGlobal"
	FigureRNFLSectors = "rnflSectors"
	FigureRNFLSector  = "rnfl:" // + sector
	FigureCentral     = "centralThickness"
	FigureCST         = "centralSubfieldThickness"
	FigureETDRS       = "etdrs:" // + subfield
	FigureVolume      = "totalVolume"
	FigureLayer       = "layer:" // + layer name (RetinalLayers)
	FigureLesions     = "lesions"
	// FigureFluid and FigureDrusen are one kind of lesion withheld while
	// the other is reported (KindFigure): fluid found unsteadily says
	// nothing of the drusen, nor drusen of a cyst.
	FigureFluid        = "lesions:fluid"
	FigureDrusen       = "lesions:drusen"
	FigureMeasurements = "measurements"
	centralHalfWidthUm = 500
	withheldGateReason = "some figures are withheld: what they rest on is not reliable where they are measured (see withheld)"
)

func andMask(a, b []bool) []bool {
	out := make([]bool, len(a))
	for i := range out {
		out[i] = a[i] && i < len(b) && b[i]
	}
	return out
}

// orMask marks where a or b does; b may be nil (nothing marked).
func orMask(a, b []bool) []bool {
	out := make([]bool, len(a))
	for i := range out {
		out[i] = a[i] || i < len(b) && b[i]
	}
	return out
}

// notMask negates a mask; nil stays nil (nothing marked).
func notMask(a []bool) []bool {
	if a == nil {
		return nil
	}
	out := make([]bool, len(a))
	for i, x := range a {
		out[i] = !x
	}
	return out
}

// vouch keeps only the figures whose boundaries are reliable where they
// are measured (rel, the reliable verdicts of judgeBoundaries; measured,
// the A-scans the figures were measured over, on measuredOn: l, or a
// cube's layers with Bruch's membrane bridged; shadow, a circle's
// vessels' shadows), lists the others in a.Withheld with the
// reason, records each boundary's reliability, and lowers a full
// verdict to partial when anything is withheld: the gate's verdict
// follows from the boundaries the figures need.
func (a *Analysis) vouch(v *Volume, l, measuredOn *Layers, rel map[string][]bool, measured, shadow []bool) {
	mask := a.Quality.Mask
	n := len(mask)
	graded := func(i int) bool { return mask[i] }
	gate := a.Quality.Gradable // the gate's own verdict, before any figure is withheld
	for _, b := range append(slices.Clone(BoundaryNames), rpeBottomName) {
		if ok, found := a.evidence.supported[b]; found {
			sure := a.evidence.reliable[b]
			var k, r, all int
			for i, m := range mask {
				if m {
					all++
					if ok[i] {
						k++
					}
					if i < len(sure) && sure[i] {
						r++
					}
				}
			}
			a.Boundaries = append(a.Boundaries, BoundaryReliability{Boundary: b,
				ReliableFraction: round3(float64(r) / float64(max(all, 1))), SupportedFraction: round3(float64(k) / float64(max(all, 1)))})
		}
	}
	withhold := a.withhold
	nothing := func(reason string) {
		withhold(FigureMeasurements, reason)
		a.NotMeasurable = append(a.NotMeasurable, "not reported: "+reason)
	}
	switch {
	case a.rnfl() != nil:
		// The vessels' shadows are bridged whatever the image shows
		// there (measureRNFL): the shares are taken outside them. The
		// circle and its sectors are judged on their own evidence
		// (sectorEvidence).
		rel := sectorEvidence(rel, a.evidence.bridged)
		open := func(i int) bool { return mask[i] && !(len(shadow) == n && shadow[i]) }
		inSector := func(s string) func(i int) bool {
			return func(i int) bool { return open(i) && rnflSector(360*float64(i%v.Cols)/float64(v.Cols)) == s }
		}
		reason := ""
		if weak, share := reliability(rel, open, n, func(string) float64 { return minCircleShare }, ILM, RNFLGCL); weak != "" {
			reason = unreliableReason(weak, share, minCircleShare, "of the circle")
		}
		for _, s := range RNFLSectors {
			if weak, share := reliability(rel, inSector(s), n, sectorShare, ILM, RNFLGCL); weak != "" && reason == "" {
				reason = unreliableReason(weak, share, minSectorShare, "of sector "+s)
			}
		}
		if reason != "" {
			withhold(FigureRNFLGlobal, reason)
			withhold(FigureRNFLSectors, reason)
			a.NotMeasurable = append(a.NotMeasurable, "RNFL thickness not reported: "+reason)
			a.Figures = nil
			break
		}
		// A sector is a sixth of the circle: it is reported only where
		// its own A-scans hold, the signal is good and the gate graded
		// the whole circle. Wherever it may be followed (followedSector)
		// it is: a straight bridge between reliable A-scans cuts off
		// what lies between its ends, even in a sector reliable in most
		// of its A-scans (minOwnSectorShare).
		var followed *RNFLMeasurements
		for _, s := range RNFLSectors {
			in := inSector(s)
			reason := ""
			weak, share := reliability(rel, in, n, func(string) float64 { return minOwnSectorShare }, ILM, RNFLGCL)
			if weak != "" {
				reason = unreliableReason(weak, share, minOwnSectorShare, "of sector "+s)
			}
			held := rel[RNFLGCL] // where the sector's RNFL/GCL holds of itself; on or along a bridge elsewhere
			if (weak == "" || weak == RNFLGCL) && followedSector(rel, a.evidence.supported, in, n) {
				if followed == nil {
					followed, _ = measureRNFL(v, l, measured, notMask(andMask(a.evidence.supported[RNFLGCL], notMask(shadow))))
				}
				if x, ok := followed.sector(s); ok {
					a.rnfl().Sectors[s], reason = x, ""
					held = a.evidence.supported[RNFLGCL]
				}
			}
			if reason == "" {
				sector := func(i int) bool { return rnflSector(360*float64(i%v.Cols)/float64(v.Cols)) == s }
				if um := float64(longestBridge(n, sector, held)) * v.Spacing.LateralUm; um > maxSectorBridgeUm {
					reason = fmt.Sprintf("RNFL/GCL is bridged in a straight line over %.0f µm of sector %s (%.0f µm allowed): a straight bridge cuts off the nerve fibre bundles between its ends", um, s, float64(maxSectorBridgeUm))
				}
			}
			if reason == "" && a.Quality.SignalStrength < minSectorSignal {
				reason = "signal strength " + formatFloat(a.Quality.SignalStrength) + " of 10: a sector's mean is reported only on a signal of " + formatFloat(minSectorSignal) + " or more"
			} else if reason == "" && gate != Gradable {
				reason = "the circle is only partly gradable: a sector's mean is reported only on a fully gradable circle"
			}
			if reason != "" {
				withhold(FigureRNFLSector+s, reason)
				delete(a.rnfl().Sectors, s)
			}
		}
	case a.line() != nil:
		lineShare := func(string) float64 { return minLineShare }
		if weak, share := reliability(rel, graded, n, lineShare, ILM, BM); weak != "" {
			nothing(unreliableReason(weak, share, minLineShare, "of the line"))
			a.Figures = nil
			break
		}
		// The line's profile, and its mean, least and greatest thickness,
		// keep only the A-scans where ILM and BM are reliable; the
		// central thickness is judged over its own millimetre below, and
		// taken again over what is kept of it.
		if a.line().keepOnly(func(c int) bool { return rel[ILM][c] && rel[BM][c] }); a.line().GradableFraction == 0 {
			nothing("neither ILM nor BM is reliable in any graded A-scan of the line")
			a.Figures = nil
			break
		}
		if m := a.line(); m.FoveaCol != nil {
			fc := *m.FoveaCol
			in := func(i int) bool {
				return mask[i] && math.Abs(float64(i%v.Cols-fc))*v.Spacing.LateralUm <= centralHalfWidthUm
			}
			reason := ""
			var graded, all int
			for c := range v.Cols {
				if math.Abs(float64(c-fc))*v.Spacing.LateralUm <= centralHalfWidthUm {
					all++
					if mask[c] {
						graded++
					}
				}
			}
			central, kept, bridged := lineCentral(v, l, mask, rel, fc)
			if cover := float64(graded) / float64(max(all, 1)); cover < minCentralCoverage {
				reason = fmt.Sprintf("only %.0f%% of the central 1 mm could be graded (%.0f%% needed): a mean over part of it is not its thickness", 100*cover, 100*minCentralCoverage)
			} else if !bridged {
				reason = "Bruch's membrane is not reliable on both sides of the central 1 mm: it cannot be bridged across it"
			} else if kept < minCentralReliable {
				weak, share := reliability(rel, in, n, func(string) float64 { return minCentralReliable }, ILM, BM)
				if weak == "" {
					weak, share = BM, kept
				}
				reason = unreliableReason(weak, share, minCentralReliable, "of the central 1 mm")
			} else if seen := bmSeen(v, l, in); seen < minBMSeenShare {
				reason = bmInferredReason(seen, "of the central 1 mm")
			}
			if reason != "" {
				withhold(FigureCentral, reason)
				m.CentralThicknessUm, m.PitDepthUm, m.FoveaCol = 0, 0, nil
			} else {
				m.CentralThicknessUm = round1(central)
			}
		}
	case a.cube() != nil:
		m := a.cube()
		if weak, share := reliability(rel, graded, n, minReliableShare, ILM, BM); weak != "" {
			nothing(unreliableReason(weak, share, minReliableShare(weak), "of the cube"))
			a.Figures = nil
			break
		}
		grid := newETDRSGrid(v, m.FoveaXMm, m.FoveaYMm)
		for _, k := range ETDRSSubfields {
			if _, ok := m.ETDRS[k]; !ok {
				continue
			}
			in := func(i int) bool { return mask[i] && grid.subfield[i] == k }
			weak, share := reliability(rel, in, n, minReliableShare, ILM, BM)
			reason := ""
			if weak != "" {
				reason = unreliableReason(weak, share, minReliableShare(weak), "of subfield "+k)
			} else if seen := bmSeen(v, l, in); k == "C" && seen < minBMSeenShare {
				reason = bmInferredReason(seen, "of the central subfield")
			} else if bias, empty := coverageBias(v, measuredOn, measured, grid.subfield, k, m.FoveaXMm, m.FoveaYMm); math.Abs(bias) > maxCoverageBiasUm || empty > maxUncoveredShare {
				reason = fmt.Sprintf("the A-scans measured cover subfield %s unevenly (%.0f%% of it in parts with none measured; the mean of its parts differs by %.1f µm from the mean over them, %.1f µm allowed): the part not measured may be thicker or thinner",
					k, 100*empty, bias, maxCoverageBiasUm)
			}
			if reason != "" {
				if k == "C" {
					withhold(FigureCST, reason)
					nothing(reason)
					a.Figures = nil
					break
				}
				withhold(FigureETDRS+k, reason)
				delete(m.ETDRS, k)
				m.Unmeasured = append(m.Unmeasured, k)
				if m.TotalVolumeMm3 > 0 {
					withhold(FigureVolume, "subfield "+k+" is not reported")
					m.TotalVolumeMm3 = 0
				}
			}
		}
		if a.cube() != nil && len(m.Layers) > 0 {
			// Each layer rests on its two boundaries over the 6 mm circle,
			// each reliable or bridged between reliable A-scans.
			in := func(i int) bool { return mask[i] && grid.subfield[i] != "" }
			held := rel
			if a.layersHeld != nil {
				held = a.layersHeld
			}
			kept := m.Layers[:0]
			for _, layer := range m.Layers {
				if weak, share := reliability(held, in, n, minReliableShare, layer.Top, layer.Bottom); weak != "" {
					withhold(FigureLayer+layer.Name, unreliableReason(weak, share, minReliableShare(weak), "of the 6 mm circle"))
					continue
				}
				kept = append(kept, layer)
			}
			m.Layers = kept
		}
	}
	if a.Pattern == Cube || a.Pattern == Line {
		if weak, share := reliability(rel, graded, n, lesionShare, EZ, rpeBottomName, BM); weak != "" {
			withhold(FigureLesions, unreliableReason(weak, share, lesionShare(weak), "of the scan")+"; fluid and drusen are found between these boundaries")
		}
	}
}

// withhold lists a figure as not reported, with the reason; a full
// verdict becomes partial, with the reason, as the gate's verdict
// follows from the boundaries the figures need.
func (a *Analysis) withhold(figure, reason string) {
	a.Withheld = append(a.Withheld, Withheld{Figure: figure, Reason: reason})
	if a.Quality.Gradable == Gradable {
		a.Quality.Gradable = PartlyGradable
	}
	if len(a.Withheld) == 1 {
		a.Quality.Reasons = append(a.Quality.Reasons, withheldGateReason)
	}
}

// minLineShare is the least share of a line's graded A-scans in which
// ILM and BM must each be reliable for its profile to be reported (over
// the A-scans where both are, only). The real line's BM is reliable in
// 86% of its graded A-scans clean, 22–62% at σ 1–5%, where the
// stretches near the optic disc, in which the interdigitation zone, the
// RPE and Bruch's membrane are not told apart, go; the central
// thickness is judged over its own millimetre (minCentralReliable). A
// line reliable over less than this says nothing of its profile.
const minLineShare = 0.15

// A subfield's mean over its graded A-scans stands for the whole
// subfield only when they cover it evenly: its parts (cells of 30° about
// the fovea by 0.25 mm of radius) weighed by their size must give the
// same mean within maxCoverageBiasUm, and parts with no graded A-scan
// (which that comparison cannot see) may hold at most maxUncoveredShare
// of it. A strong mirror artefact
// left a phantom's inner temporal subfield graded in 71% of its A-scans,
// in a patch: its mean over them 12.3 µm from the truth, its parts'
// 3.0 µm lower, 6% of it in parts with none graded; on that phantom
// clean, at σ 8%, under a weak signal, defocus, vignetting and a 0.2
// mirror every subfield stays within 0.8 µm (clean: 0.6), all its parts
// graded. A cube with every other B-scan blanked is covered evenly
// (0.4 µm; 7% of its central subfield in parts too small to hold a
// graded B-scan).
const (
	maxCoverageBiasUm = 1.5
	maxUncoveredShare = 0.25
	coverageCellDeg   = 30
	coverageCellMm    = 0.25
)

// coverageBias is how far subfield k's mean thickness (ILM to BM) over
// its graded A-scans (mask) lies from the mean of its parts' means,
// each weighed by the A-scans it holds, and the share of the subfield
// in parts with no A-scan graded.
func coverageBias(v *Volume, l *Layers, mask []bool, subfields []string, k string, fx, fy float64) (bias, empty float64) {
	type part struct {
		all, n int
		sum    float64
	}
	parts := map[[2]int]*part{}
	var plain float64
	var all, n int
	for i, key := range subfields {
		if key != k {
			continue
		}
		x, y := v.PositionMm(i/v.Cols, i%v.Cols)
		x, y = x-fx, y-fy
		id := [2]int{int(math.Floor(math.Atan2(y, x) * 180 / math.Pi / coverageCellDeg)), int(math.Hypot(x, y) / coverageCellMm)}
		p := parts[id]
		if p == nil {
			p = &part{}
			parts[id] = p
		}
		p.all++
		all++
		if mask[i] {
			t := float64(l.Boundaries[BM][i]-l.Boundaries[ILM][i]) * v.Spacing.AxialUm
			p.n++
			p.sum += t
			plain += t
			n++
		}
	}
	if n == 0 || all == 0 {
		return 0, 1
	}
	var strat, weight, uncovered float64
	for _, p := range parts {
		if p.n == 0 {
			uncovered += float64(p.all)
			continue
		}
		strat += float64(p.all) * p.sum / float64(p.n)
		weight += float64(p.all)
	}
	return plain/float64(n) - strat/weight, uncovered / float64(all)
}

// minCentralCoverage is the least share of a line's central 1 mm that
// must be graded for its central thickness to be reported: the pit's
// floor alone, graded where its sides are not, is thinner than the
// central millimetre (the real line under a weak signal: 38 µm).
const minCentralCoverage = 0.85

// bmSeen is the share of the A-scans in (where true) whose Bruch's
// membrane is the RPE band's lower edge as seen (within bmSeenUm), not
// the baseline fitted under a raised band. Under drusen the baseline is
// right; under a motion jump or an artefact that bends the band, a
// low-order fit across the B-scan is not, and the central thickness
// rests on it.
func bmSeen(v *Volume, l *Layers, where func(i int) bool) float64 {
	if len(l.RPEBottom) != v.Frames*v.Cols || !l.has(BM) {
		return 1
	}
	tol := float32(bmSeenUm / v.Spacing.AxialUm)
	var k, all int
	for i, b := range l.Boundaries[BM] {
		if where(i) {
			all++
			if abs32(b-l.RPEBottom[i]) <= tol {
				k++
			}
		}
	}
	if all == 0 {
		return 1
	}
	return float64(k) / float64(all)
}

// bmSeenUm is how far Bruch's membrane may lie from the RPE band's
// lower edge and count as seen: on the real line the interdigitation
// zone's band puts them up to 25 µm apart, a motion jump of 10 rows
// (39 µm) puts the fitted baseline ≥ 39 µm off in most of the centre.
const bmSeenUm = 30

func bmInferredReason(seen float64, where string) string {
	return fmt.Sprintf("Bruch's membrane is seen in only %.0f%% of the graded A-scans %s (%.0f%% needed); elsewhere it is inferred under a raised or bent RPE band (drusen, a motion jump, an artefact), so the thickness there is not measured but estimated",
		100*seen, where, 100*minBMSeenShare)
}

// bmAmbiguous marks the A-scans ([frame*cols+col]) where another band
// of the RPE complex, nearly as bright as its brightest ridge (within
// subBandLevel in log intensity), still lies under Bruch's membrane as
// found, after a dip, within rpeBandUm: the interdigitation zone, the
// RPE and Bruch's membrane are then not told apart, and the membrane
// found may be a band short of the eye's, whatever the contrast of the
// edge it lies on. Nil when the layers carry no RPE or BM.
func bmAmbiguous(v *Volume, l *Layers) []bool {
	if !l.has(RPE, BM) || len(l.Boundaries[BM]) != v.Frames*v.Cols {
		return nil
	}
	out := make([]bool, v.Frames*v.Cols)
	reach := max(1, int(math.Round(rpeBandUm/v.Spacing.AxialUm)))
	forEachFrame(v.Frames, func(f int) {
		img := v.Frame(f)
		level := func(r, c int) float64 { // over ±2 A-scans
			r = min(max(r, 0), v.Rows-1)
			var sum float64
			n := 0
			for cc := max(0, c-2); cc <= min(v.Cols-1, c+2); cc++ {
				sum += math.Log1p(float64(max(img[r*v.Cols+cc], 0)))
				n++
			}
			return sum / float64(n)
		}
		for c := range v.Cols {
			i := f*v.Cols + c
			ridge, bm := float64(l.Boundaries[RPE][i]), float64(l.Boundaries[BM][i])
			if math.IsNaN(ridge) || math.IsNaN(bm) || math.IsInf(ridge, 0) || math.IsInf(bm, 0) {
				continue
			}
			b := int(math.Round(bm))
			top := level(int(math.Round(ridge)), c)
			low, dip := b, level(b, c)
			for r := b + 1; r <= min(b+reach, v.Rows-1); r++ {
				x := level(r, c)
				if x > dip {
					break
				}
				low, dip = r, x
			}
			best := math.Inf(-1)
			for r := low + 1; r <= min(low+reach, v.Rows-1); r++ {
				best = max(best, level(r, c))
			}
			out[i] = best >= top-subBandLevel && best-dip >= subBandDip
		}
	})
	return out
}
