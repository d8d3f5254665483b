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
	// Layers gives each retinal layer's thickness, when the layers carry
	// all eight boundaries.
	Layers []LayerThickness `json:"layers,omitempty"`
}

// LayerThickness is one layer's thickness between two boundaries.
type LayerThickness struct {
	Name   string `json:"name"`
	Top    string `json:"top"`
	Bottom string `json:"bottom"`
	// MeanUm is the mean over the 6 mm ETDRS circle; ETDRS the mean per
	// subfield.
	MeanUm float64            `json:"meanUm"`
	ETDRS  map[string]float64 `json:"etdrs"`
	// MapUm is the thickness of every A-scan, indexed [frame*Cols+col].
	MapUm []float32 `json:"mapUm,omitempty"`
}

// RetinalLayers names the layers Measure reports, by their boundaries.
var RetinalLayers = []struct{ Name, Top, Bottom string }{
	{"RNFL", ILM, RNFLGCL},
	{"GCL+IPL", RNFLGCL, IPLINL},
	{"INL", IPLINL, INLOPL},
	{"OPL", INLOPL, OPLONL},
	{"ONL+IS", OPLONL, EZ},
	{"OS", EZ, RPE},
	{"RPE", RPE, BM},
}

// Measure computes retinal thickness (ILM to BM), centres the ETDRS grid
// on the fovea (the thinnest point near the scan centre), averages
// thickness over the nine subfields on the 1, 3 and 6 mm circles and
// integrates the total macular volume inside the 6 mm circle. With all
// eight boundaries it also maps each layer's thickness (RetinalLayers).
func Measure(ctx context.Context, v *Volume, l *Layers) (*Measurements, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols || !l.has(ILM, BM) {
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

	// Fovea: the thinnest point, after a little smoothing, within 1 mm of
	// the scan centre.
	best := math.Inf(1)
	for f := range v.Frames {
		for c := range v.Cols {
			x, y := v.PositionMm(f, c)
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
	grid := newETDRSGrid(v, m.FoveaFrame, m.FoveaCol)
	m.ETDRS, m.TotalVolumeMm3 = grid.means(m.ThicknessMapUm)
	m.CentralSubfieldThicknessUm = m.ETDRS["C"]
	if l.has(BoundaryNames...) {
		for _, layer := range RetinalLayers {
			top, bottom := l.Boundaries[layer.Top], l.Boundaries[layer.Bottom]
			lt := LayerThickness{Name: layer.Name, Top: layer.Top, Bottom: layer.Bottom, MapUm: make([]float32, len(top))}
			for i := range top {
				lt.MapUm[i] = max(bottom[i]-top[i], 0) * float32(v.Spacing.AxialUm)
			}
			var volume float64
			lt.ETDRS, volume = grid.means(lt.MapUm)
			lt.MeanUm = volume / grid.areaMm2 * 1000
			m.Layers = append(m.Layers, lt)
		}
	}
	return m, nil
}

// etdrsGrid assigns each A-scan to its ETDRS subfield around the fovea.
type etdrsGrid struct {
	subfield []string // per A-scan, "" outside the 6 mm circle
	cellMm2  float64  // en-face area one A-scan stands for
	areaMm2  float64  // area of all A-scans inside the circle
}

// newETDRSGrid centres the grid on the fovea. Nasal and temporal follow
// the laterality: on a right eye (OD) nasal is +x, on a left eye (OS) it
// is −x. Frame 0 is the superior edge.
func newETDRSGrid(v *Volume, foveaFrame, foveaCol int) *etdrsGrid {
	fx, fy := v.PositionMm(foveaFrame, foveaCol)
	nasalSign := 1.0
	if v.Laterality == "OS" {
		nasalSign = -1
	}
	g := &etdrsGrid{subfield: make([]string, v.Frames*v.Cols),
		cellMm2: v.Spacing.LateralUm / 1000 * max(v.Spacing.FrameUm, v.Spacing.LateralUm) / 1000}
	for f := range v.Frames {
		for c := range v.Cols {
			x, y := v.PositionMm(f, c)
			x, y = (x-fx)*nasalSign, fy-y // +x nasal, +y superior
			key := subfield(x, y, math.Hypot(x, y))
			g.subfield[f*v.Cols+c] = key
			if key != "" {
				g.areaMm2 += g.cellMm2
			}
		}
	}
	return g
}

// means averages a per-A-scan thickness map (µm) over each subfield and
// integrates it over the 6 mm circle (mm³).
func (g *etdrsGrid) means(thickness []float32) (map[string]float64, float64) {
	sums, counts := map[string]float64{}, map[string]int{}
	var volume float64
	for i, key := range g.subfield {
		if key == "" {
			continue
		}
		t := float64(thickness[i])
		sums[key] += t
		counts[key]++
		volume += t / 1000 * g.cellMm2
	}
	out := map[string]float64{}
	for _, k := range ETDRSSubfields {
		if counts[k] > 0 {
			out[k] = sums[k] / float64(counts[k])
		}
	}
	return out, volume
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
	ring := 0 // inner
	if r > 1.5 {
		ring = 1
	}
	names := [2][4]string{{"IS", "II", "IN", "IT"}, {"OS", "OI", "ON", "OT"}}[ring]
	switch {
	case math.Abs(y) >= math.Abs(x) && y > 0:
		return names[0]
	case math.Abs(y) >= math.Abs(x):
		return names[1]
	case x > 0:
		return names[2]
	}
	return names[3]
}
