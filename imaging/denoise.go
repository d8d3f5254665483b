package imaging

import (
	"context"
	"math"
)

// DenoiseOptions tune the speckle filter.
type DenoiseOptions struct {
	// SigmaPx is the Gaussian width in pixels (default 1.5).
	SigmaPx float64
}

// Denoise suppresses speckle: speckle is multiplicative, so the volume is
// filtered in the log domain, where it becomes additive, with a separable
// Gaussian within each B-scan, then mapped back.
func Denoise(ctx context.Context, v *Volume, o DenoiseOptions) (*Volume, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if o.SigmaPx == 0 {
		o.SigmaPx = 1.5
	}
	kernel := gaussianKernel(o.SigmaPx)
	out := NewVolume(v.Frames, v.Rows, v.Cols, v.Spacing)
	out.Laterality = v.Laterality
	forEachFrame(v.Frames, func(f int) {
		if ctx.Err() != nil {
			return
		}
		src, dst := v.Frame(f), out.Frame(f)
		logs := make([]float32, len(src))
		for i, x := range src {
			logs[i] = float32(math.Log1p(float64(max(x, 0))))
		}
		tmp := make([]float32, len(src))
		convolveRows(logs, tmp, v.Rows, v.Cols, kernel)
		convolveCols(tmp, logs, v.Rows, v.Cols, kernel)
		for i, x := range logs {
			dst[i] = float32(math.Expm1(float64(x)))
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func gaussianKernel(sigma float64) []float32 {
	radius := int(math.Ceil(3 * sigma))
	k := make([]float32, 2*radius+1)
	var sum float64
	for i := range k {
		d := float64(i - radius)
		w := math.Exp(-d * d / (2 * sigma * sigma))
		k[i] = float32(w)
		sum += w
	}
	for i := range k {
		k[i] /= float32(sum)
	}
	return k
}

// convolveRows filters along each row (laterally), clamping at the edges.
func convolveRows(src, dst []float32, rows, cols int, k []float32) {
	radius := len(k) / 2
	for r := range rows {
		line := src[r*cols : (r+1)*cols]
		out := dst[r*cols : (r+1)*cols]
		for c := range cols {
			var acc float32
			for i, w := range k {
				cc := min(max(c+i-radius, 0), cols-1)
				acc += w * line[cc]
			}
			out[c] = acc
		}
	}
}

// convolveCols filters along each column (axially), clamping at the edges.
func convolveCols(src, dst []float32, rows, cols int, k []float32) {
	radius := len(k) / 2
	for r := range rows {
		out := dst[r*cols : (r+1)*cols]
		clear(out)
		for i, w := range k {
			rr := min(max(r+i-radius, 0), rows-1)
			line := src[rr*cols : (rr+1)*cols]
			for c := range cols {
				out[c] += w * line[c]
			}
		}
	}
}
