package imaging

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// LineMeasurements are what a single line scan allows: the thickness
// profile along it and, when the line crosses the fovea, the central
// thickness.
type LineMeasurements struct {
	// CentralThicknessUm is the mean retinal thickness (ILM to BM) over
	// the central 1 mm of the line around the foveal pit; absent when the
	// line shows no pit (NoFovea says why).
	CentralThicknessUm float64 `json:"centralThicknessUm,omitempty"`
	// FoveaCol is the A-scan at the pit's centre, absent without a pit.
	FoveaCol *int   `json:"foveaCol,omitempty"`
	NoFovea  string `json:"noFovea,omitempty"`
	// PitDepthUm is how much thinner the retina is at the pit than 1 to
	// 1.5 mm from it.
	PitDepthUm      float64 `json:"pitDepthUm,omitempty"`
	MeanThicknessUm float64 `json:"meanThicknessUm"`
	MinThicknessUm  float64 `json:"minThicknessUm"`
	MaxThicknessUm  float64 `json:"maxThicknessUm"`
	// LengthMm is the line's length; ProfileUm the thickness of every
	// A-scan, 0 where it could not be graded or its ILM or BM is not
	// shown plainly enough to rest a figure on.
	LengthMm  float64   `json:"lengthMm"`
	ProfileUm []float32 `json:"profileUm"`
	// GradableFraction is the share of the line's A-scans measured.
	GradableFraction float64 `json:"gradableFraction"`
}

// A foveal pit on a line: the thinnest point within 1 mm of the line's
// centre at least minPitUm (and 10%) thinner than the retina 1 to 1.5 mm
// either side of it.
const minPitUm = 30

// MeasureLine measures a line scan's gradable A-scans (mask, nil: all).
func MeasureLine(v *Volume, l *Layers, mask []bool) (*LineMeasurements, error) {
	if v.Frames != 1 || l.Frames != 1 || l.Cols != v.Cols || !l.has(ILM, BM) {
		return nil, invalidf("a line scan has one B-scan and its layers (%d×%d, layers %d×%d)", v.Frames, v.Cols, l.Frames, l.Cols)
	}
	mask = allIfNil(mask, v.Cols)
	m := &LineMeasurements{ProfileUm: make([]float32, v.Cols), LengthMm: round3(float64(v.Cols-1) * v.Spacing.LateralUm / 1000),
		MinThicknessUm: math.Inf(1), MaxThicknessUm: math.Inf(-1)}
	var sum float64
	var n int
	for c := range v.Cols {
		if !mask[c] {
			continue
		}
		t := float64(l.Boundaries[BM][c]-l.Boundaries[ILM][c]) * v.Spacing.AxialUm
		m.ProfileUm[c] = float32(math.Round(t*10) / 10)
		sum, n = sum+t, n+1
		m.MinThicknessUm, m.MaxThicknessUm = math.Min(m.MinThicknessUm, t), math.Max(m.MaxThicknessUm, t)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no A-scan of the line could be graded", ErrNotMeasurable)
	}
	m.MeanThicknessUm, m.GradableFraction = round1(sum/float64(n)), round3(float64(n)/float64(v.Cols))
	m.MinThicknessUm, m.MaxThicknessUm = round1(m.MinThicknessUm), round1(m.MaxThicknessUm)

	// The pit: a smoothed profile's minimum near the centre, against the
	// retina 1 to 1.5 mm either side.
	mmPerCol := v.Spacing.LateralUm / 1000
	x := func(c int) float64 { return (float64(c) - float64(v.Cols-1)/2) * mmPerCol }
	meanBetween := func(c0 int, from, to float64) (float64, bool) { // |x−x(c0)| in [from, to] mm, both sides
		var s float64
		var k int
		sides := 0
		for _, sign := range []float64{-1, 1} {
			var ks int
			for c := range v.Cols {
				d := (x(c) - x(c0)) * sign
				if d >= from && d <= to && mask[c] {
					s += float64(m.ProfileUm[c])
					k++
					ks++
				}
			}
			if ks > 0 {
				sides++
			}
		}
		return s / float64(max(k, 1)), k > 0 && sides == 2
	}
	best, bestCol := math.Inf(1), -1
	for c := range v.Cols {
		if math.Abs(x(c)) > 1 || !mask[c] {
			continue
		}
		if t, ok := meanBetween(c, 0, 0.1); ok && t < best {
			best, bestCol = t, c
		}
	}
	if bestCol < 0 {
		m.NoFovea = "no gradable A-scan within 1 mm of the line's centre"
		return m, nil
	}
	around, ok := meanBetween(bestCol, 1, 1.5)
	if !ok {
		m.NoFovea = "the line does not reach 1.5 mm on both sides of its thinnest point, so a foveal pit cannot be told"
		return m, nil
	}
	depth := around - best
	if depth < minPitUm || depth < 0.1*around {
		m.NoFovea = fmt.Sprintf("no foveal pit: the thinnest point is only %.0f µm thinner than the retina 1–1.5 mm away (a pit is ≥ %d µm); the line does not cross the fovea", depth, minPitUm)
		return m, nil
	}
	central, _ := meanBetween(bestCol, 0, 0.5)
	m.CentralThicknessUm, m.PitDepthUm = round1(central), round1(depth)
	m.FoveaCol = &bestCol
	return m, nil
}

// keepOnly keeps the line's profile, and its mean, least and greatest
// thickness, to the A-scans where keep is true (and measured): the
// others read 0 in the profile, as A-scans not graded do, and
// GradableFraction counts what is left. The central thickness is left
// as it is: the analysis takes it again on reliable rows (lineCentral).
func (m *LineMeasurements) keepOnly(keep func(c int) bool) {
	var sum float64
	var n int
	lo, hi := math.Inf(1), math.Inf(-1)
	for c, t := range m.ProfileUm {
		if t == 0 {
			continue
		}
		if !keep(c) {
			m.ProfileUm[c] = 0
			continue
		}
		sum, n = sum+float64(t), n+1
		lo, hi = math.Min(lo, float64(t)), math.Max(hi, float64(t))
	}
	if n == 0 {
		m.MeanThicknessUm, m.MinThicknessUm, m.MaxThicknessUm, m.GradableFraction = 0, 0, 0, 0
		return
	}
	m.MeanThicknessUm, m.MinThicknessUm, m.MaxThicknessUm = round1(sum/float64(n)), round1(lo), round1(hi)
	m.GradableFraction = round3(float64(n) / float64(len(m.ProfileUm)))
}

// RNFLSectors are the peripapillary sectors, in the order a TSNIT profile
// crosses them after its temporal start.
var RNFLSectors = []string{"T", "TS", "NS", "N", "NI", "TI"}

// RNFLConvention is how octflow reads a circle scan's A-scans: the first
// is temporal and the profile runs temporal, superior, nasal, inferior
// and back (TSNIT), as Heidelberg's circle scans are exported for either
// eye; the sectors are T 315°–45°, TS 45°–90°, NS 90°–135°, N 135°–225°,
// NI 225°–270°, TI 270°–315° from the temporal start.
const RNFLConvention = "TSNIT: A-scan 0 temporal, then superior, nasal, inferior; sectors T 315–45°, TS 45–90°, NS 90–135°, N 135–225°, NI 225–270°, TI 270–315°"

// RNFLMeasurements are what a peripapillary circle scan allows: the
// retinal nerve fibre layer's thickness (ILM to RNFL/GCL), globally and
// by sector, and its profile.
type RNFLMeasurements struct {
	GlobalUm float64 `json:"globalUm"`
	// Sectors holds each sector's mean. A circle with a sector under a
	// third gradable is not measured at all.
	Sectors    map[string]float64 `json:"sectors"`
	Convention string             `json:"convention"`
	// CircumferenceMm is the circle's length; DiameterMm the circle's.
	CircumferenceMm float64 `json:"circumferenceMm"`
	DiameterMm      float64 `json:"diameterMm"`
	// ProfileUm is the RNFL thickness of every A-scan, 0 where it could
	// not be graded.
	ProfileUm        []float32 `json:"profileUm"`
	GradableFraction float64   `json:"gradableFraction"`
	// RetinaMeanUm is the mean retinal thickness (ILM to BM) around the
	// circle.
	RetinaMeanUm float64 `json:"retinaMeanUm"`
	// BridgedFraction is the share of the circle's A-scans whose RNFL/GCL
	// boundary is bridged, in a straight line between the nearest
	// A-scans either side where it holds: those in a large vessel's
	// shadow, where the image shows none (see vesselShadows; the
	// thickness runs from the ILM over the vessel to the bridge, as
	// devices draw it), and those where the image does not show it
	// plainly enough for a figure to rest on (judgeBoundaries).
	BridgedFraction float64 `json:"bridgedFraction,omitempty"`
}

// rnflSector names the sector of an angle (degrees from the temporal
// start, along the profile).
func rnflSector(deg float64) string {
	switch deg = math.Mod(deg+360, 360); {
	case deg < 45 || deg >= 315:
		return "T"
	case deg < 90:
		return "TS"
	case deg < 135:
		return "NS"
	case deg < 225:
		return "N"
	case deg < 270:
		return "NI"
	}
	return "TI"
}

// MeasureRNFL measures a circle scan's gradable A-scans (mask, nil: all).
func MeasureRNFL(v *Volume, l *Layers, mask []bool) (*RNFLMeasurements, error) {
	return measureRNFL(v, l, mask, nil)
}

// measureRNFL is MeasureRNFL with the RNFL/GCL boundary bridged over
// the A-scans in bridge (nil: none; see BridgedFraction).
func measureRNFL(v *Volume, l *Layers, mask, bridge []bool) (*RNFLMeasurements, error) {
	if v.Frames != 1 || l.Frames != 1 || l.Cols != v.Cols || !l.has(ILM, RNFLGCL, BM) {
		return nil, invalidf("a circle scan has one B-scan and its ILM, RNFL/GCL and BM")
	}
	mask = allIfNil(mask, v.Cols)
	circ := float64(v.Cols) * v.Spacing.LateralUm / 1000
	m := &RNFLMeasurements{Sectors: map[string]float64{}, Convention: RNFLConvention, ProfileUm: make([]float32, v.Cols),
		CircumferenceMm: round3(circ), DiameterMm: round3(circ / math.Pi)}
	sums, counts, all := map[string]float64{}, map[string]int{}, map[string]int{}
	var sum, retina float64
	var n, bridged int
	nfl := bridgeCircle(l.Boundaries[RNFLGCL], bridge)
	for c := range v.Cols {
		sec := rnflSector(360 * float64(c) / float64(v.Cols))
		all[sec]++
		if len(bridge) == v.Cols && bridge[c] {
			bridged++
		}
		if !mask[c] {
			continue
		}
		t := float64(nfl[c]-l.Boundaries[ILM][c]) * v.Spacing.AxialUm
		m.ProfileUm[c] = float32(math.Round(t*10) / 10)
		sums[sec] += t
		counts[sec]++
		sum += t
		retina += float64(l.Boundaries[BM][c]-l.Boundaries[ILM][c]) * v.Spacing.AxialUm
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no A-scan of the circle could be graded", ErrNotMeasurable)
	}
	// A circle scan is read whole: the RNFL is twice as thick above and
	// below the disc as beside it, so a mean over part of the circle
	// says nothing of the whole. Each sector needs its share graded, and
	// the global mean weighs each sector's mean by its length.
	var missing []string
	var global float64
	for _, s := range RNFLSectors {
		if counts[s] == 0 || float64(counts[s]) < minSubfieldCoverage*float64(all[s]) {
			missing = append(missing, s)
			continue
		}
		m.Sectors[s] = round1(sums[s] / float64(counts[s]))
		global += sums[s] / float64(counts[s]) * float64(all[s]) / float64(v.Cols)
	}
	if len(missing) > 0 {
		noun := "sector"
		if len(missing) > 1 {
			noun = "sectors"
		}
		return nil, fmt.Errorf("%w: the RNFL could not be graded in %s %s of the circle (under %.0f%% of the A-scans), and a circle scan is measured whole",
			ErrNotMeasurable, noun, strings.Join(missing, ", "), 100*minSubfieldCoverage)
	}
	m.GlobalUm, m.RetinaMeanUm = round1(global), round1(retina/float64(n))
	m.GradableFraction = round3(float64(n) / float64(v.Cols))
	m.BridgedFraction = round3(float64(bridged) / float64(v.Cols))
	return m, nil
}

// bridgeCircle returns rows (one B-scan of a circle, which closes on
// itself) with the A-scans in skip (nil: none) replaced by the straight
// line between the nearest A-scans either side outside skip, around the
// circle; rows itself when nothing is skipped or everything is.
func bridgeCircle(rows []float32, skip []bool) []float32 {
	n := len(rows)
	if len(skip) != n || !slices.Contains(skip, true) || !slices.Contains(skip, false) {
		return rows
	}
	out := slices.Clone(rows)
	for c := range n {
		if !skip[c] {
			continue
		}
		a, b := 1, 1
		for skip[(c-a+n)%n] {
			a++
		}
		for skip[(c+b)%n] {
			b++
		}
		ra, rb := rows[(c-a+n)%n], rows[(c+b)%n]
		out[c] = ra + (rb-ra)*float32(a)/float32(a+b)
	}
	return out
}

func allIfNil(mask []bool, n int) []bool {
	if mask != nil {
		return mask
	}
	mask = make([]bool, n)
	for i := range mask {
		mask[i] = true
	}
	return mask
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
