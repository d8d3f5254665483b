package imaging

import (
	"math"
	"math/rand/v2"
	"slices"
)

// A degradation is one realistic acquisition fault applied to a scan in
// the domain the device stored it in (encoded levels: 8-bit 0–255 for
// the real scans and the 8-bit phantom exports): what the analysis
// would receive had the acquisition gone that way.
type degradation struct {
	family   string
	severity float64 // the family's own scale (σ as a share of the range, a factor, px)
	apply    func(v *Volume, peak float64, rng *rand.Rand)
}

// degrade returns a copy of v (levels up to peak) with d applied,
// reproducibly from seed, and how many rows the scan moved in each
// A-scan (motion), so that the truth can follow.
func degrade(v *Volume, peak float64, d degradation, seed uint64) *Volume {
	out := NewVolumeLike(v)
	copy(out.Data, v.Data)
	if d.apply != nil {
		d.apply(out, peak, rand.New(rand.NewPCG(seed, 29)))
	}
	for i, x := range out.Data {
		out.Data[i] = float32(math.Round(min(max(float64(x), 0), peak)))
	}
	return out
}

// additive adds Gaussian noise of σ (share of the range) to every level.
func additive(sigma float64) degradation {
	return degradation{"additive", sigma, func(v *Volume, peak float64, rng *rand.Rand) {
		for i := range v.Data {
			v.Data[i] += float32(rng.NormFloat64() * sigma * peak)
		}
	}}
}

// speckle multiplies every level by 1 + σ·N(0, 1): more speckle than the
// device's averaging left.
func speckle(sigma float64) degradation {
	return degradation{"speckle", sigma, func(v *Volume, peak float64, rng *rand.Rand) {
		for i := range v.Data {
			v.Data[i] *= float32(max(1+sigma*rng.NormFloat64(), 0))
		}
	}}
}

// weak is a weak signal: every level pulled towards the background (the
// 25th percentile) to contrast·its distance, plus noise of σ.
func weak(contrast, sigma float64) degradation {
	return degradation{"weak", contrast, func(v *Volume, peak float64, rng *rand.Rand) {
		bg := percentile(v.Data, 0.25)
		for i, x := range v.Data {
			v.Data[i] = bg + (x-bg)*float32(contrast) + float32(rng.NormFloat64()*sigma*peak)
		}
	}}
}

// blur is defocus: a Gaussian of σ px laterally and σ/2 axially.
func blur(sigma float64) degradation {
	return degradation{"blur", sigma, func(v *Volume, _ float64, _ *rand.Rand) {
		for f := range v.Frames {
			img := v.Frame(f)
			gaussian1D(img, v.Rows, v.Cols, sigma, true)
			gaussian1D(img, v.Rows, v.Cols, sigma/2, false)
		}
	}}
}

// vignette darkens the scan towards its lateral edges (to depth·level
// at the edge) and lays four vessel-like shadows (depth) across it.
func vignette(depth float64) degradation {
	return degradation{"vignette", depth, func(v *Volume, _ float64, rng *rand.Rand) {
		bg := percentile(v.Data, 0.25)
		shadows := make([]int, 4)
		for i := range shadows {
			shadows[i] = rng.IntN(v.Cols)
		}
		w := max(3, v.Cols/60)
		for f := range v.Frames {
			img := v.Frame(f)
			for c := range v.Cols {
				x := 2*float64(c)/float64(v.Cols-1) - 1
				g := 1 - (1-depth)*x*x
				for _, s := range shadows {
					if abs(c-s) <= w {
						g *= depth
					}
				}
				for r := range v.Rows {
					i := r*v.Cols + c
					img[i] = bg + (img[i]-bg)*float32(g)
				}
			}
		}
	}}
}

// motion shifts every A-scan right of the middle by rows (an eye
// movement between them); shiftOf says by how much, for the truth.
func motion(rows float64) degradation {
	return degradation{"motion", rows, func(v *Volume, _ float64, _ *rand.Rand) {
		d := int(rows)
		for f := range v.Frames {
			img := v.Frame(f)
			for c := v.Cols / 2; c < v.Cols; c++ {
				col := make([]float32, v.Rows)
				for r := range v.Rows {
					col[r] = img[min(max(r-d, 0), v.Rows-1)*v.Cols+c]
				}
				for r := range v.Rows {
					img[r*v.Cols+c] = col[r]
				}
			}
		}
	}}
}

// motionShift is how many rows degradation d moved A-scan c.
func motionShift(d degradation, cols, c int) float64 {
	if d.family == "motion" && c >= cols/2 {
		return d.severity
	}
	return 0
}

// clipping saturates the brightest levels: everything above the share
// level of the range is cut to it.
func clipping(level float64) degradation {
	return degradation{"clipping", level, func(v *Volume, peak float64, _ *rand.Rand) {
		top := float32(level * peak)
		for i, x := range v.Data {
			v.Data[i] = min(x, top)
		}
	}}
}

// mirror folds a flipped copy of the scan, at gain, onto it: the mirror
// artefact of a retina near the zero-delay line.
func mirror(gain float64) degradation {
	return degradation{"mirror", gain, func(v *Volume, _ float64, _ *rand.Rand) {
		bg := percentile(v.Data, 0.25)
		for f := range v.Frames {
			img := v.Frame(f)
			src := slices.Clone(img)
			for r := range v.Rows {
				for c := range v.Cols {
					img[r*v.Cols+c] += float32(gain) * max(src[(v.Rows-1-r)*v.Cols+c]-bg, 0)
				}
			}
		}
	}}
}

func abs(x int) int { return max(x, -x) }

func percentile(xs []float32, p float64) float32 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// gaussian1D blurs a rows×cols image along its columns (lateral) or rows.
func gaussian1D(img []float32, rows, cols int, sigma float64, lateral bool) {
	if sigma <= 0 {
		return
	}
	h := int(math.Ceil(3 * sigma))
	k := make([]float64, 2*h+1)
	var sum float64
	for i := range k {
		k[i] = math.Exp(-float64((i-h)*(i-h)) / (2 * sigma * sigma))
		sum += k[i]
	}
	src := slices.Clone(img)
	for r := range rows {
		for c := range cols {
			var acc float64
			for i, w := range k {
				rr, cc := r, c
				if lateral {
					cc = min(max(c+i-h, 0), cols-1)
				} else {
					rr = min(max(r+i-h, 0), rows-1)
				}
				acc += w * float64(src[rr*cols+cc])
			}
			img[r*cols+c] = float32(acc / sum)
		}
	}
}
