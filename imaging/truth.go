package imaging

import (
	"context"
	"fmt"
)

// Truth is a phantom's ground truth in the report's schema: the same
// measurements and lesions a report carries, plus the exact boundaries.
type Truth struct {
	Seed         uint64        `json:"seed"`
	Measurements *Measurements `json:"measurements"`
	Lesions      []Lesion      `json:"lesions"`
	// Boundaries gives, per boundary name, the exact row of every A-scan
	// ([frame*cols+col], fractional).
	Boundaries map[string][]float64 `json:"boundaries"`
}

// Layers returns the phantom's exact boundaries as a segmentation would.
func (p *Phantom) Layers() *Layers {
	l := &Layers{Frames: p.Clean.Frames, Cols: p.Clean.Cols, Boundaries: map[string][]float32{}}
	for name, rows := range p.Boundaries {
		f := make([]float32, len(rows))
		for i, r := range rows {
			f[i] = float32(r)
		}
		l.Boundaries[name] = f
	}
	return l
}

// Truth measures the phantom's noise-free volume along its exact
// boundaries and lists its fluid and drusen as lesions, exactly as the stages
// would report a perfect result.
func (p *Phantom) Truth(ctx context.Context, seed uint64) (*Truth, error) {
	layers := p.Layers()
	m, err := Measure(ctx, p.Clean, layers)
	if err != nil {
		return nil, fmt.Errorf("measure phantom truth: %w", err)
	}
	m.ThicknessMapUm = nil
	for i := range m.Layers {
		m.Layers[i].MapUm = nil
	}
	t := &Truth{Seed: seed, Measurements: m, Lesions: []Lesion{}, Boundaries: p.Boundaries}
	if p.FluidMask != nil {
		cols, rows := p.Clean.Cols, p.Clean.Rows
		t.Lesions = regions(p.Clean, p.FluidMask, func(f, r, c int) string {
			if p.SubretinalMask[(f*rows+r)*cols+c] {
				return SubretinalFluid
			}
			return IntraretinalFluid
		})
	}
	if p.DrusenMask != nil {
		t.Lesions = append(t.Lesions, drusenRegions(p.Clean, p.DrusenMask)...)
	}
	return t, nil
}
