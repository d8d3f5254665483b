package imaging

import "math"

// PSNR is the peak signal-to-noise ratio of v against the reference ref,
// in dB, with the reference's maximum as the peak.
func PSNR(ref, v *Volume) float64 {
	var peak float32
	var sse float64
	for i, x := range ref.Data {
		peak = max(peak, x)
		d := float64(v.Data[i] - x)
		sse += d * d
	}
	mse := sse / float64(len(ref.Data))
	return 10 * math.Log10(float64(peak)*float64(peak)/mse)
}

// SSIM is the mean structural similarity (Wang et al. 2004) of v against
// the reference ref: 8 × 8 windows of each B-scan at a stride of 4,
// dynamic range the reference's maximum. 1 means identical.
func SSIM(ref, v *Volume) float64 {
	var peak float32
	for _, x := range ref.Data {
		peak = max(peak, x)
	}
	c1, c2 := math.Pow(0.01*float64(peak), 2), math.Pow(0.03*float64(peak), 2)
	const win, stride = 8, 4
	var sum float64
	var n int
	for f := range ref.Frames {
		a, b := ref.Frame(f), v.Frame(f)
		for r0 := 0; r0+win <= ref.Rows; r0 += stride {
			for c0 := 0; c0+win <= ref.Cols; c0 += stride {
				var sa, sb, saa, sbb, sab float64
				for r := r0; r < r0+win; r++ {
					for c := c0; c < c0+win; c++ {
						x, y := float64(a[r*ref.Cols+c]), float64(b[r*ref.Cols+c])
						sa, sb, saa, sbb, sab = sa+x, sb+y, saa+x*x, sbb+y*y, sab+x*y
					}
				}
				const m = win * win
				ma, mb := sa/m, sb/m
				va, vb, cov := saa/m-ma*ma, sbb/m-mb*mb, sab/m-ma*mb
				sum += (2*ma*mb + c1) * (2*cov + c2) / ((ma*ma + mb*mb + c1) * (va + vb + c2))
				n++
			}
		}
	}
	return sum / float64(n)
}
