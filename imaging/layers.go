package imaging

import (
	"context"
	"slices"
)

// Layers holds segmented boundaries: for each boundary name, the row
// (fractional) of every A-scan, indexed [frame*Cols+col].
type Layers struct {
	Frames     int                  `json:"frames"`
	Cols       int                  `json:"cols"`
	Boundaries map[string][]float32 `json:"boundaries"`
}

// Row returns boundary name at frame f, column c.
func (l *Layers) Row(name string, f, c int) float32 { return l.Boundaries[name][f*l.Cols+c] }

// SegmentLayers finds the inner limiting membrane, the top of the retinal
// pigment epithelium and Bruch's membrane in a denoised volume.
//
// v0 works per A-scan: the ILM is the first strong rise out of the dark
// vitreous, refined to the steepest gradient; the RPE is the brightest
// band below it, bounded above by its steepest rise (RPE) and below by
// its steepest fall (BM). Each boundary is then median-smoothed across
// neighbouring A-scans.
func SegmentLayers(ctx context.Context, v *Volume) (*Layers, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	l := &Layers{Frames: v.Frames, Cols: v.Cols, Boundaries: map[string][]float32{
		ILM: make([]float32, v.Frames*v.Cols),
		RPE: make([]float32, v.Frames*v.Cols),
		BM:  make([]float32, v.Frames*v.Cols),
	}}
	um := func(x float64) int { return max(1, int(x/v.Spacing.AxialUm+0.5)) }
	forEachFrame(v.Frames, func(f int) {
		if ctx.Err() != nil {
			return
		}
		img := v.Frame(f)
		bg, peak := frameLevels(img, v.Rows, v.Cols)
		threshold := bg + 0.12*(peak-bg)
		col := make([]float32, v.Rows)
		for c := range v.Cols {
			for r := range v.Rows {
				col[r] = img[r*v.Cols+c]
			}
			ilm := 0
			for r := 2; r < v.Rows; r++ {
				if col[r] > threshold && col[r-1] > threshold {
					ilm = r - 1
					break
				}
			}
			ilm = steepest(col, ilm-um(12), ilm+um(12), +1)
			top := min(ilm+um(60), v.Rows-1)
			rpePeak := top
			for r := top; r < v.Rows; r++ {
				if col[r] > col[rpePeak] {
					rpePeak = r
				}
			}
			l.Boundaries[ILM][f*v.Cols+c] = float32(ilm)
			l.Boundaries[RPE][f*v.Cols+c] = float32(steepest(col, rpePeak-um(16), rpePeak, +1))
			l.Boundaries[BM][f*v.Cols+c] = float32(steepest(col, rpePeak, rpePeak+um(40), -1))
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, b := range l.Boundaries {
		smoothAcross(b, v.Frames, v.Cols, 7)
	}
	return l, nil
}

// frameLevels estimates the background (vitreous, the top rows) and the
// bright end (99th percentile) of a B-scan.
func frameLevels(img []float32, rows, cols int) (bg, peak float32) {
	top := img[:max(1, rows/20)*cols]
	var sum float32
	for _, x := range top {
		sum += x
	}
	bg = sum / float32(len(top))
	sample := make([]float32, 0, len(img)/7+1)
	for i := 0; i < len(img); i += 7 {
		sample = append(sample, img[i])
	}
	slices.Sort(sample)
	peak = sample[len(sample)*99/100]
	return bg, peak
}

// steepest returns the boundary position (between rows r and r+1, so
// r+0.5 rounded down) with the largest rise (sign +1) or fall (sign -1)
// within [from, to].
func steepest(col []float32, from, to, sign int) int {
	from, to = max(from, 1), min(to, len(col)-3)
	best, bestGrad := from, float32(-1e30)
	for r := from; r <= to; r++ {
		g := float32(sign) * (col[r+1] + col[r+2] - col[r] - col[r-1])
		if g > bestGrad {
			best, bestGrad = r, g
		}
	}
	return best + 1
}

// smoothAcross replaces each A-scan's boundary with the median of its
// window of neighbours in the same B-scan.
func smoothAcross(b []float32, frames, cols, window int) {
	half := window / 2
	buf := make([]float32, 0, window)
	line := make([]float32, cols)
	for f := range frames {
		row := b[f*cols : (f+1)*cols]
		copy(line, row)
		for c := range cols {
			buf = append(buf[:0], line[max(0, c-half):min(cols, c+half+1)]...)
			slices.Sort(buf)
			row[c] = buf[len(buf)/2]
		}
	}
}
