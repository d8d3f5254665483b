package imaging

import (
	"context"
	"math"
)

// ETDRS subfield keys: centre, then inner (1–3 mm) and outer (3–6 mm)
// rings, each superior, nasal, inferior, temporal.
var ETDRSSubfields = []string{"C", "IS", "IN", "II", "IT", "OS", "ON", "OI", "OT"}

// Measurements are the quantitative results of an exam, in the report
// schema.
type Measurements struct {
	CentralSubfieldThicknessUm float64            `json:"centralSubfieldThicknessUm"`
	ETDRS                      map[string]float64 `json:"etdrs"`
	TotalVolumeMm3             float64            `json:"totalVolumeMm3"`
	MeanThicknessUm            float64            `json:"meanThicknessUm"`
	MinThicknessUm             float64            `json:"minThicknessUm"`
	MaxThicknessUm             float64            `json:"maxThicknessUm"`
	// FoveaFrame and FoveaCol locate the grid centre.
	FoveaFrame int `json:"foveaFrame"`
	FoveaCol   int `json:"foveaCol"`
	// ThicknessMapUm is the retinal thickness ILM→BM of every A-scan,
	// indexed [frame*Cols+col].
	ThicknessMapUm []float32 `json:"thicknessMapUm,omitempty"`
	Frames         int       `json:"frames"`
	Cols           int       `json:"cols"`
}

// Measure computes retinal thickness (ILM to BM), centres the ETDRS grid
// on the fovea (the thinnest point near the scan centre), and averages
// thickness over the nine subfields on the 1, 3 and 6 mm circles. Nasal
// and temporal follow the laterality: on a right eye (OD) nasal is +x,
// on a left eye (OS) it is −x. Frame 0 is the superior edge.
func Measure(ctx context.Context, v *Volume, l *Layers) (*Measurements, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols || l.Boundaries[ILM] == nil || l.Boundaries[BM] == nil {
		return nil, invalidf("layers (%d×%d) do not match the volume (%d×%d)", l.Frames, l.Cols, v.Frames, v.Cols)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &Measurements{Frames: v.Frames, Cols: v.Cols, ETDRS: map[string]float64{},
		ThicknessMapUm: make([]float32, v.Frames*v.Cols), MinThicknessUm: math.Inf(1)}
	var sum float64
	for i := range m.ThicknessMapUm {
		t := float64(l.Boundaries[BM][i]-l.Boundaries[ILM][i]) * v.Spacing.AxialUm
		m.ThicknessMapUm[i] = float32(t)
		sum += t
		m.MinThicknessUm = math.Min(m.MinThicknessUm, t)
		m.MaxThicknessUm = math.Max(m.MaxThicknessUm, t)
	}
	m.MeanThicknessUm = sum / float64(len(m.ThicknessMapUm))

	pos := func(f, c int) (x, y float64) {
		return (float64(c) - float64(v.Cols-1)/2) * v.Spacing.LateralUm / 1000,
			(float64(f) - float64(v.Frames-1)/2) * v.Spacing.FrameUm / 1000
	}
	// Fovea: the thinnest point, after a little smoothing, within 1 mm of
	// the scan centre.
	best := math.Inf(1)
	for f := range v.Frames {
		for c := range v.Cols {
			x, y := pos(f, c)
			if x*x+y*y > 1 {
				continue
			}
			var s float64
			var n int
			for dc := -3; dc <= 3; dc++ {
				if cc := c + dc; cc >= 0 && cc < v.Cols {
					s += float64(m.ThicknessMapUm[f*v.Cols+cc])
					n++
				}
			}
			if t := s / float64(n); t < best {
				best, m.FoveaFrame, m.FoveaCol = t, f, c
			}
		}
	}
	fx, fy := pos(m.FoveaFrame, m.FoveaCol)
	nasalSign := 1.0
	if v.Laterality == "OS" {
		nasalSign = -1
	}
	sums, counts := map[string]float64{}, map[string]int{}
	dx, dy := v.Spacing.LateralUm/1000, max(v.Spacing.FrameUm, v.Spacing.LateralUm)/1000
	for f := range v.Frames {
		for c := range v.Cols {
			x, y := pos(f, c)
			x, y = (x-fx)*nasalSign, fy-y // +x nasal, +y superior
			r := math.Hypot(x, y)
			key := subfield(x, y, r)
			if key == "" {
				continue
			}
			t := float64(m.ThicknessMapUm[f*v.Cols+c])
			sums[key] += t
			counts[key]++
			m.TotalVolumeMm3 += t / 1000 * dx * dy
		}
	}
	for _, k := range ETDRSSubfields {
		if counts[k] > 0 {
			m.ETDRS[k] = sums[k] / float64(counts[k])
		}
	}
	m.CentralSubfieldThicknessUm = m.ETDRS["C"]
	return m, nil
}

// subfield names the ETDRS subfield of a point (mm from the fovea, +x
// nasal, +y superior), or "" outside the 6 mm circle.
func subfield(x, y, r float64) string {
	switch {
	case r <= 0.5:
		return "C"
	case r > 3:
		return ""
	}
	ring := "I"
	if r > 1.5 {
		ring = "O"
	}
	switch {
	case math.Abs(y) >= math.Abs(x) && y > 0:
		return ring + "S"
	case math.Abs(y) >= math.Abs(x):
		return ring + "I"
	case x > 0:
		return ring + "N"
	}
	return ring + "T"
}
