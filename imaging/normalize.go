package imaging

import (
	"cmp"
	"math"
	"slices"
)

// Encoding is how a device compressed reflectivity into stored levels.
type Encoding string

// Encodings Normalize tells apart.
const (
	// Linear levels are proportional to reflectivity (16-bit raw data).
	Linear Encoding = "linear"
	// Power levels are reflectivity to a power below 1 (display
	// compression, e.g. 255·v^0.25).
	Power Encoding = "power"
	// Log levels are proportional to log reflectivity (dB scales).
	Log Encoding = "log"
	// Flat volumes hold one level: there is nothing to normalise or see.
	Flat Encoding = "flat"
)

// The working scale every stage after Normalize relies on: linear in
// reflectivity, the background (the volume's 25th percentile of levels,
// vitreous and deep tissue) at workingBackground and the brightest
// tissue (its 99.9th percentile, RPE and RNFL) workingRange times higher.
// The values are those of the phantom's linear export, on which the
// stages' thresholds were set.
const (
	workingBackground = 480.0
	workingRange      = 73.0
	// powerSlope splits the encodings: where the spread of levels grows in
	// proportion to the level (slope ≈ 1 on a log-log plot) speckle was
	// multiplied and a power kept it so; a log turns it into a constant
	// spread (slope ≈ 0).
	powerSlope = 0.6
	// minCorrelatedShare is the least share of the brightest patches'
	// variance that neighbouring rows must share for the correlated
	// spread to be read (see correlatedSlope): a device's speckle spans
	// its axial resolution, two rows or more; noise added after the
	// encoding is white and shares none, nor does a phantom's
	// pixel-wise speckle.
	minCorrelatedShare = 0.2
)

// Intensity is what Normalize found out about a volume's levels.
type Intensity struct {
	Encoding Encoding `json:"encoding"`
	// Exponent is the power of a Power encoding (levels ∝ v^Exponent),
	// judged against the working scale's range (1 for Linear): one
	// image cannot tell a device's own exponent from its dynamic range,
	// so this is the compression relative to the working scale.
	Exponent float64 `json:"exponent,omitempty"`
	// SpreadSlope is the log-log slope of speckle spread against level
	// that told Power from Log.
	SpreadSlope float64 `json:"spreadSlope"`
	// CorrelatedSlope is the same slope for the spread neighbouring rows
	// share, which noise added after the encoding (white) does not
	// reach; read when SpreadSlope says log but the speckle is
	// correlated over rows. 0 when not read.
	CorrelatedSlope float64 `json:"correlatedSlope,omitempty"`
	// Background and Bright are the levels taken as background and as
	// the brightest tissue.
	Background float64 `json:"background"`
	Bright     float64 `json:"bright"`
	// FloorFraction is the share of samples at level 0 or below: no
	// signal the encoding could hold (or invalid samples). They become
	// the working scale's floor.
	FloorFraction float64 `json:"floorFraction"`
}

// Normalize brings a volume as a device stored it (ReadDICOM's levels)
// to the working scale: it estimates whether levels are linear, a power
// or a log of reflectivity from how speckle spreads with level, and maps
// them so that background and brightest tissue land on the working
// scale's anchors. Samples at 0 (no signal, or invalid in the export)
// become the lowest level the volume otherwise holds. A flat volume
// (one level) maps to the background everywhere; the quality gate then
// finds nothing to grade. Volumes already on the working scale come
// back nearly unchanged.
func Normalize(v *Volume) (*Volume, Intensity) {
	out := NewVolumeLike(v)
	levels, zeros := sampleLevels(v)
	in := Intensity{Encoding: Flat, FloorFraction: zeros}
	flat := func() (*Volume, Intensity) {
		for i := range out.Data {
			out.Data[i] = workingBackground
		}
		return out, in
	}
	if len(levels) < 64 {
		return flat()
	}
	q := func(p float64) float64 { return float64(levels[int(p*float64(len(levels)-1))]) }
	lo, hi, floor := q(0.25), q(0.999), q(0.01)
	in.Background, in.Bright = lo, hi
	if !(hi > lo*1.02) {
		return flat()
	}
	in.SpreadSlope = spreadSlope(v)
	power := in.SpreadSlope >= powerSlope || math.IsNaN(in.SpreadSlope)
	if !power {
		// Noise added after the encoding (white, the same at every
		// level) flattens the spread of the dark levels and makes a
		// power look like a log. The spread neighbouring rows share is
		// the device's speckle alone: if it still grows with the level,
		// the levels are a power.
		if cs := correlatedSlope(v); !math.IsNaN(cs) {
			in.CorrelatedSlope = round3(cs)
			power = cs >= powerSlope
		}
	}
	var toWorking func(x float64) float64
	if power {
		exp := math.Log(hi/lo) / math.Log(workingRange)
		in.Encoding, in.Exponent = Power, round3(exp)
		if math.Abs(exp-1) < 0.15 {
			in.Encoding, in.Exponent, exp = Linear, 1, 1
		}
		toWorking = func(x float64) float64 { return workingBackground * math.Pow(x/lo, 1/exp) }
	} else {
		in.Encoding = Log
		k := math.Log(workingRange) / (hi - lo)
		toWorking = func(x float64) float64 { return workingBackground * math.Exp(k*(x-lo)) }
	}
	if math.IsNaN(in.SpreadSlope) {
		in.SpreadSlope = 0
	}
	in.SpreadSlope = round3(in.SpreadSlope)
	floorLevel := float32(toWorking(floor))
	for i, x := range v.Data {
		if x <= 0 {
			out.Data[i] = floorLevel
			continue
		}
		out.Data[i] = float32(min(toWorking(float64(x)), 65535))
	}
	return out, in
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// sampleLevels returns up to about 400 000 of the volume's positive
// levels, sorted, and the share of samples at 0 or below.
func sampleLevels(v *Volume) ([]float32, float64) {
	step := max(1, len(v.Data)/400_000)
	var s []float32
	var zeros, n int
	for i := 0; i < len(v.Data); i += step {
		n++
		if x := v.Data[i]; x > 0 {
			s = append(s, x)
		} else {
			zeros++
		}
	}
	slices.Sort(s)
	return s, float64(zeros) / float64(max(n, 1))
}

// levelPatch is one 8 × 8 patch of spreadPatches: its mean level, the
// spread of its levels and their covariance between neighbouring rows.
type levelPatch struct{ mean, sd, cov float64 }

// spreadPatches returns the 8 × 8 patches of the volume (of up to about
// 16 B-scans) that hold no level at 0 or below, sorted by mean level.
func spreadPatches(v *Volume) []levelPatch {
	const p = 8
	var patches []levelPatch
	stride := max(1, v.Frames/16) // enough B-scans to tell, fast on big cubes
	for f := 0; f < v.Frames; f += stride {
		img := v.Frame(f)
		for r := 0; r+p <= v.Rows; r += p {
			for c := 0; c+p <= v.Cols; c += p {
				var s, ss float64
				ok := true
				for y := r; y < r+p && ok; y++ {
					for _, x := range img[y*v.Cols+c : y*v.Cols+c+p] {
						if x <= 0 {
							ok = false
							break
						}
						s, ss = s+float64(x), ss+float64(x)*float64(x)
					}
				}
				if !ok {
					continue
				}
				m := s / (p * p)
				var cov float64
				for y := r; y+1 < r+p; y++ {
					for x := c; x < c+p; x++ {
						cov += (float64(img[y*v.Cols+x]) - m) * (float64(img[(y+1)*v.Cols+x]) - m)
					}
				}
				patches = append(patches, levelPatch{m, math.Sqrt(max(ss/(p*p)-m*m, 0)), cov / (p * (p - 1))})
			}
		}
	}
	slices.SortFunc(patches, func(a, b levelPatch) int { return cmp.Compare(a.mean, b.mean) })
	return patches
}

// spreadBins is how many level bins the spread is fitted over.
const spreadBins = 10

// spreadSlope fits log(spread) against log(level) over 8 × 8 patches:
// patches are binned by level in ten bins, and each bin's lower-quartile
// spread (the homogeneous patches, not those across an edge) is one
// point. NaN when there are too few patches to tell.
func spreadSlope(v *Volume) float64 {
	patches := spreadPatches(v)
	if len(patches) < 100 {
		return math.NaN()
	}
	const bins = spreadBins
	var xs, ys []float64
	sds := make([]float64, 0, len(patches)/bins+1)
	for b := range bins {
		bin := patches[b*len(patches)/bins : (b+1)*len(patches)/bins]
		sds = sds[:0]
		var mean float64
		for _, x := range bin {
			sds = append(sds, x.sd)
			mean += x.mean
		}
		slices.Sort(sds)
		if sd := sds[len(sds)/4]; sd > 0 {
			xs, ys = append(xs, math.Log(mean/float64(len(bin)))), append(ys, math.Log(sd))
		}
	}
	return fitSlope(xs, ys)
}

// correlatedSlope fits log(spread) against log(level) as spreadSlope
// does, for the spread neighbouring rows share: in each level bin, over
// its more homogeneous half (spread under the bin's median), the square
// root of the mean covariance between neighbouring rows. Noise added to
// the levels after the encoding is white: it adds to every patch's
// spread but not to that covariance, so the slope still tells a power
// (≈ 1) from a log (≈ 0) under it. NaN when the rows share too little
// (under minCorrelatedShare of the variance in the three brightest
// bins: speckle drawn pixel by pixel, as the phantom's is) or too few
// bins share any.
func correlatedSlope(v *Volume) float64 {
	patches := spreadPatches(v)
	if len(patches) < 100 {
		return math.NaN()
	}
	const bins = spreadBins
	var xs, ys []float64
	var brightCov, brightVar float64
	for b := range bins {
		bin := slices.Clone(patches[b*len(patches)/bins : (b+1)*len(patches)/bins])
		var mean float64
		for _, x := range bin {
			mean += x.mean
		}
		mean /= float64(len(bin))
		slices.SortFunc(bin, func(a, b levelPatch) int { return cmp.Compare(a.sd, b.sd) })
		var cov, vr float64
		half := bin[:max(1, len(bin)/2)]
		for _, x := range half {
			cov, vr = cov+x.cov, vr+x.sd*x.sd
		}
		cov, vr = cov/float64(len(half)), vr/float64(len(half))
		if b >= bins-3 {
			brightCov, brightVar = brightCov+cov, brightVar+vr
		}
		if cov > 0 && mean > 0 {
			xs, ys = append(xs, math.Log(mean)), append(ys, 0.5*math.Log(cov))
		}
	}
	if !(brightCov >= minCorrelatedShare*brightVar) || brightVar == 0 {
		return math.NaN()
	}
	return fitSlope(xs, ys)
}

// fitSlope is the least-squares slope of ys against xs; NaN with fewer
// than three points or no spread in xs.
func fitSlope(xs, ys []float64) float64 {
	if len(xs) < 3 {
		return math.NaN()
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}
