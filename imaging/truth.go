package imaging

import (
	"context"
	"math"
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

// Truth is the phantom's ground truth: its measurements computed by
// referenceMeasurements straight from the exact boundaries and the drawn
// fovea (not by Measure, whose results it judges), and its fluid and
// drusen listed as lesions.
func (p *Phantom) Truth(ctx context.Context, seed uint64) (*Truth, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := p.referenceMeasurements()
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

// referenceMeasurements is the phantom's true thickness, ETDRS grid and
// volume. It is deliberately written apart from Measure and kept simple:
// the grid is centred on the fovea the phantom drew (not one found in
// the image), every A-scan counts for the rectangle between its
// neighbours, and the subfield of an A-scan follows the ETDRS
// definition directly. A bug in Measure's geometry, centring or areas
// therefore shows up as a difference from this.
func (p *Phantom) referenceMeasurements() *Measurements {
	v := p.Clean
	sp := v.Spacing
	ilm, bm := p.Boundaries[ILM], p.Boundaries[BM]
	// The en-face area an A-scan stands for: its column spacing times
	// its B-scan spacing.
	cellMm2 := (sp.LateralUm / 1000) * (sp.FrameUm / 1000)
	nasal := 1.0
	if v.Laterality == "OS" {
		nasal = -1
	}
	type acc struct{ sum, n float64 }
	subfields := map[string]*acc{}
	layerSubfields := make([]map[string]*acc, len(RetinalLayers))
	layerAll := make([]acc, len(RetinalLayers))
	for i := range layerSubfields {
		layerSubfields[i] = map[string]*acc{}
	}
	m := &Measurements{Frames: v.Frames, Cols: v.Cols, ETDRS: map[string]float64{}, MinThicknessUm: math.Inf(1)}
	var all float64
	for f := range v.Frames {
		for c := range v.Cols {
			i := f*v.Cols + c
			t := (bm[i] - ilm[i]) * sp.AxialUm
			all += t
			m.MinThicknessUm, m.MaxThicknessUm = math.Min(m.MinThicknessUm, t), math.Max(m.MaxThicknessUm, t)
			// mm from the fovea: +x nasal, +y superior (B-scan 0 is the
			// superior edge).
			x := ((float64(c)-float64(v.Cols-1)/2)*sp.LateralUm/1000 - p.Geometry.FoveaXMm) * nasal
			y := -((float64(f)-float64(v.Frames-1)/2)*sp.FrameUm/1000 - p.Geometry.FoveaYMm)
			r := math.Sqrt(x*x + y*y)
			if r > 3 {
				continue
			}
			name := "C"
			if r > 0.5 {
				ring := "I"
				if r > 1.5 {
					ring = "O"
				}
				// The quadrant whose 90° wedge holds the point.
				angle := math.Atan2(y, x) * 180 / math.Pi // 0° nasal, 90° superior
				switch {
				case angle >= 45 && angle <= 135:
					name = ring + "S"
				case angle <= -45 && angle >= -135:
					name = ring + "I"
				case angle > -45 && angle < 45:
					name = ring + "N"
				default:
					name = ring + "T"
				}
			}
			if subfields[name] == nil {
				subfields[name] = &acc{}
			}
			subfields[name].sum += t
			subfields[name].n++
			m.TotalVolumeMm3 += t / 1000 * cellMm2
			for li, layer := range RetinalLayers {
				lt := math.Max(p.Boundaries[layer.Bottom][i]-p.Boundaries[layer.Top][i], 0) * sp.AxialUm
				if layerSubfields[li][name] == nil {
					layerSubfields[li][name] = &acc{}
				}
				layerSubfields[li][name].sum += lt
				layerSubfields[li][name].n++
				layerAll[li].sum += lt
				layerAll[li].n++
			}
		}
	}
	for name, a := range subfields {
		m.ETDRS[name] = a.sum / a.n
	}
	m.CentralSubfieldThicknessUm = m.ETDRS["C"]
	m.MeanThicknessUm = all / float64(v.Frames*v.Cols)
	m.FoveaXMm, m.FoveaYMm = p.Geometry.FoveaXMm, p.Geometry.FoveaYMm
	m.FoveaCol = int(math.Round(p.Geometry.FoveaXMm*1000/sp.LateralUm + float64(v.Cols-1)/2))
	m.FoveaFrame = int(math.Round(p.Geometry.FoveaYMm*1000/sp.FrameUm + float64(v.Frames-1)/2))
	for li, layer := range RetinalLayers {
		lt := LayerThickness{Name: layer.Name, Top: layer.Top, Bottom: layer.Bottom, ETDRS: map[string]float64{},
			MeanUm: layerAll[li].sum / layerAll[li].n}
		for name, a := range layerSubfields[li] {
			lt.ETDRS[name] = a.sum / a.n
		}
		m.Layers = append(m.Layers, lt)
	}
	return m
}
