package imaging

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
)

// DenoiseOptions tune the speckle filter. Zero values take the defaults.
type DenoiseOptions struct {
	// SearchRows and SearchCols are the half-sizes of the search window
	// (default 1 and 4: 3 × 9 candidates, wider laterally, along the
	// layers).
	SearchRows, SearchCols int
	// PatchRows and PatchCols are the half-sizes of the compared patches
	// (default about 8 µm of depth, and 3).
	PatchRows, PatchCols int
	// Strength scales the filter parameter h against the estimated log-domain
	// noise level (default 1.2).
	Strength float64
}

func (o DenoiseOptions) withDefaults(axialUm float64) DenoiseOptions {
	o.SearchRows = cmp.Or(o.SearchRows, 1)
	o.SearchCols = cmp.Or(o.SearchCols, 4)
	// About 8 µm of depth on each side: 2 rows on a 496-row cube, 4 on a
	// 1024-row one.
	o.PatchRows = cmp.Or(o.PatchRows, min(max(int(math.Round(8/axialUm)), 1), maxPatch))
	o.PatchCols = cmp.Or(o.PatchCols, 3)
	o.Strength = cmp.Or(o.Strength, 1.2)
	return o
}

// Denoise suppresses speckle with a non-local means filter (Buades et al.
// 2005) adapted to OCT: patch similarity is judged in the log domain,
// where multiplicative speckle is additive with a near-constant variance,
// and the weighted average is taken over linear intensities, so the
// filter keeps the mean signal (a log-domain average would darken every
// layer by the speckle's log-bias). Each B-scan is filtered on its own;
// frames run on all cores.
//
// Patch distances for one search offset are computed for the whole frame
// at once and box-summed with running sums, so the cost per pixel does
// not grow with the patch size.
func Denoise(ctx context.Context, v *Volume, o DenoiseOptions) (*Volume, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults(v.Spacing.AxialUm)
	out := NewVolumeLike(v)
	scratch := sync.Pool{New: func() any { return newNLMScratch(v.Rows, v.Cols) }}
	forEachFrame(v.Frames, func(f int) {
		if ctx.Err() != nil {
			return
		}
		s := scratch.Get().(*nlmScratch)
		defer scratch.Put(s)
		nlmFrame(v.Frame(f), out.Frame(f), v.Rows, v.Cols, o, s)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// nlmScratch is one worker's buffers for a frame.
type nlmScratch struct {
	logs, acc, wsum []float32
	dist, tmp, line []float32 // one strip's distances and box sums, one row
	sample          []float32
}

func newNLMScratch(rows, cols int) *nlmScratch {
	return &nlmScratch{logs: make([]float32, rows*cols), acc: make([]float32, rows*cols), wsum: make([]float32, rows*cols),
		dist: make([]float32, (nlmStrip+2*maxPatch)*cols), tmp: make([]float32, nlmStrip*cols),
		line: make([]float32, cols), sample: make([]float32, 0, rows*cols/4+1)}
}

// nlmStrip is the height of the row strips the filter works in; maxPatch
// the largest patch half-height it accepts.
const (
	nlmStrip = 16
	maxPatch = 8
)

// weightTable holds exp(-t) for t in [0, weightCut) at weightRes steps.
const (
	weightCut = 6.0
	weightRes = 256
)

func nlmFrame(src, dst []float32, rows, cols int, o DenoiseOptions, s *nlmScratch) {
	logs := s.logs
	for i, x := range src {
		logs[i] = float32(math.Log1p(float64(max(x, 0))))
	}
	sigma := logNoise(logs, rows, cols, s)
	h2 := float32(o.Strength * o.Strength * sigma * sigma)
	bias := float32(2 * sigma * sigma)
	patchN := float32((2*o.PatchRows + 1) * (2*o.PatchCols + 1))
	var table [int(weightCut*weightRes) + 1]float32
	for i := range len(table) - 1 {
		table[i] = float32(math.Exp(-float64(i) / weightRes))
	}
	scale := weightRes / (patchN * h2)
	offset := bias * patchN // the expected distance of two noisy copies of one patch

	acc, wsum := s.acc, s.wsum
	for i, x := range src {
		acc[i], wsum[i] = x, 1 // the pixel itself, at full weight
	}
	// Work in strips of rows so that one offset's distances, sums and
	// accumulators stay in cache.
	hr, hc := o.PatchRows, o.PatchCols
	for r0 := 0; r0 < rows; r0 += nlmStrip {
		r1 := min(r0+nlmStrip, rows)
		for dy := 0; dy <= o.SearchRows; dy++ {
			for dx := -o.SearchCols; dx <= o.SearchCols; dx++ {
				if dy == 0 && dx <= 0 {
					continue // each pair of pixels is visited once, from its upper or left member
				}
				last := min(r1, rows-dy) // rows whose partner is inside the frame
				if last <= r0 {
					continue
				}
				c0, c1 := max(0, -dx), min(cols, cols-dx)
				n := c1 - c0
				d := dy*cols + dx
				// Squared log differences for the strip and its patch margin.
				m0, m1 := max(0, r0-hr), min(rows-dy, last+hr)
				dist := s.dist[:(m1-m0)*cols]
				clear(dist)
				for r := m0; r < m1; r++ {
					pa := r*cols + c0
					la, lb, dd := logs[pa:pa+n], logs[pa+d:pa+d+n], dist[(r-m0)*cols+c0:(r-m0)*cols+c0+n]
					for i := range dd {
						e := la[i] - lb[i]
						dd[i] = e * e
					}
				}
				box := s.tmp[:(last-r0)*cols]
				boxSum(dist, box, s.line, m0, m1, r0, last, cols, hr, hc)
				for r := r0; r < last; r++ {
					pa := r*cols + c0
					dd := box[(r-r0)*cols+c0 : (r-r0)*cols+c0+n]
					sa, sb := src[pa:pa+n], src[pa+d:pa+d+n]
					aa, ab := acc[pa:pa+n], acc[pa+d:pa+d+n]
					wa, wb := wsum[pa:pa+n], wsum[pa+d:pa+d+n]
					// Weights in place, then the two halves of each pair in
					// separate passes: when the partner lies on the same row,
					// one fused loop would chain every step on the last store.
					for i, dist := range dd {
						// Branch-free: distances past the cut read the table's zero.
						t := min(max((dist-offset)*scale, 0), weightCut*weightRes)
						dd[i] = table[int(t)]
					}
					for i, w := range dd {
						aa[i] += w * sb[i]
						wa[i] += w
					}
					for i, w := range dd {
						ab[i] += w * sa[i]
						wb[i] += w
					}
				}
			}
		}
	}
	for i := range dst {
		dst[i] = acc[i] / wsum[i]
	}
}

// logNoise estimates the log-domain noise level of a frame from the
// median absolute difference of lateral neighbours (robust to edges).
func logNoise(logs []float32, rows, cols int, s *nlmScratch) float64 {
	sample := s.sample[:0]
	for r := 0; r < rows; r += 2 {
		for c := r % 4; c+1 < cols; c += 4 {
			i := r*cols + c
			sample = append(sample, float32(math.Abs(float64(logs[i+1]-logs[i]))))
		}
	}
	s.sample = sample
	if len(sample) == 0 {
		return 1
	}
	slices.Sort(sample)
	return max(float64(sample[len(sample)/2])/(0.6745*math.Sqrt2), 1e-3)
}

// boxSum writes into out, for rows [r0, r1), the sum of dist over a
// (2·hr+1) × (2·hc+1) window around each pixel, counting zeros outside.
// dist holds rows [m0, m1) of the frame; line is one row of scratch.
func boxSum(dist, out, line []float32, m0, m1, r0, r1, cols, hr, hc int) {
	// Across each row first, in place, with a running sum.
	for r := m0; r < m1; r++ {
		row := dist[(r-m0)*cols : (r-m0+1)*cols]
		copy(line, row)
		var run float32
		for c := 0; c < min(hc, cols); c++ {
			run += line[c]
		}
		for c := range cols {
			if c+hc < cols {
				run += line[c+hc]
			}
			if c-hc-1 >= 0 {
				run -= line[c-hc-1]
			}
			row[c] = run
		}
	}
	// Then down the columns: each row's sum is the previous one plus the
	// row entering the window and minus the one leaving it.
	for r := r0; r < r1; r++ {
		o := out[(r-r0)*cols : (r-r0+1)*cols]
		if r == r0 {
			clear(o)
			for rr := max(m0, r-hr); rr <= min(m1-1, r+hr); rr++ {
				in := dist[(rr-m0)*cols : (rr-m0+1)*cols]
				for c := range o {
					o[c] += in[c]
				}
			}
			continue
		}
		copy(o, out[(r-r0-1)*cols:(r-r0)*cols])
		if add := r + hr; add < m1 {
			in := dist[(add-m0)*cols : (add-m0+1)*cols]
			for c := range o {
				o[c] += in[c]
			}
		}
		if sub := r - hr - 1; sub >= m0 {
			in := dist[(sub-m0)*cols : (sub-m0+1)*cols]
			for c := range o {
				o[c] -= in[c]
			}
		}
	}
}
