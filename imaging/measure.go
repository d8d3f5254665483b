package imaging

import (
	"context"
	"errors"
	"fmt"
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
	// TotalVolumeMm3 is absent when a subfield could not be measured.
	TotalVolumeMm3  float64 `json:"totalVolumeMm3,omitempty"`
	MeanThicknessUm float64 `json:"meanThicknessUm"`
	MinThicknessUm  float64 `json:"minThicknessUm"`
	MaxThicknessUm  float64 `json:"maxThicknessUm"`
	// FoveaXMm and FoveaYMm are the grid centre in mm from the scan
	// centre (Volume.PositionMm); FoveaFrame and FoveaCol the A-scan
	// nearest to it.
	FoveaXMm   float64 `json:"foveaXMm"`
	FoveaYMm   float64 `json:"foveaYMm"`
	FoveaFrame int     `json:"foveaFrame"`
	FoveaCol   int     `json:"foveaCol"`
	// ThicknessMapUm is the retinal thickness ILM→BM of every A-scan,
	// indexed [frame*Cols+col].
	ThicknessMapUm []float32 `json:"thicknessMapUm,omitempty"`
	Frames         int       `json:"frames"`
	Cols           int       `json:"cols"`
	// GradableCoverage is the share of the 6 mm circle's A-scans that
	// were graded and measured; Unmeasured lists the subfields with too
	// few of them to report.
	GradableCoverage float64  `json:"gradableCoverage"`
	Unmeasured       []string `json:"unmeasured,omitempty"`
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
	// MapUm is the thickness of every A-scan, indexed [frame*Cols+col];
	// in an analysis, 0 where its boundaries do not hold (neither
	// reliable nor bridged between reliable A-scans).
	MapUm []float32 `json:"mapUm,omitempty"`
}

// RetinalLayers names the layers Measure reports, by their boundaries.
// The outer segments and the RPE are one layer, EZ to BM: the RPE's
// brightest row between them (a ridge, not an edge) is never reliable
// enough to split them by (minCNRFor).
var RetinalLayers = []struct{ Name, Top, Bottom string }{
	{"RNFL", ILM, RNFLGCL},
	{"GCL+IPL", RNFLGCL, IPLINL},
	{"INL", IPLINL, INLOPL},
	{"OPL", INLOPL, OPLONL},
	{"ONL+IS", OPLONL, EZ},
	{"OS+RPE", EZ, BM},
}

// Measure computes retinal thickness (ILM to BM), centres the ETDRS grid
// on the fovea (the thinnest point near the scan centre), averages
// thickness over the nine subfields on the 1, 3 and 6 mm circles and
// integrates the total macular volume inside the 6 mm circle. With all
// eight boundaries it also maps each layer's thickness (RetinalLayers).
// Every A-scan counts; MeasureGradable counts only those the quality gate
// graded.
func Measure(ctx context.Context, v *Volume, l *Layers) (*Measurements, error) {
	return MeasureGradable(ctx, v, l, nil)
}

// minSubfieldCoverage is the least share of a subfield's A-scans that
// must be gradable for its mean to be reported.
const minSubfieldCoverage = 1.0 / 3

// ErrNotMeasurable marks a scan whose gradable part does not allow a
// measurement (the fovea or the central subfield could not be graded).
var ErrNotMeasurable = errors.New("not measurable")

// MeasureGradable is Measure over the A-scans mask marks (nil: all).
// The fovea is looked for among them; a subfield with under a third of
// its A-scans gradable is left out (and listed in Unmeasured); the
// volume is reported only when every subfield is measured. Without a
// gradable central subfield nothing is: the error wraps
// ErrNotMeasurable.
func MeasureGradable(ctx context.Context, v *Volume, l *Layers, mask []bool) (*Measurements, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols || !l.has(ILM, BM) {
		return nil, invalidf("layers (%d×%d) do not match the volume (%d×%d)", l.Frames, l.Cols, v.Frames, v.Cols)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if mask == nil {
		mask = make([]bool, v.Frames*v.Cols)
		for i := range mask {
			mask[i] = true
		}
	}
	m := &Measurements{Frames: v.Frames, Cols: v.Cols, ETDRS: map[string]float64{},
		ThicknessMapUm: make([]float32, v.Frames*v.Cols), MinThicknessUm: math.Inf(1), MaxThicknessUm: math.Inf(-1)}
	var sum float64
	var n int
	for i := range m.ThicknessMapUm {
		t := float64(l.Boundaries[BM][i]-l.Boundaries[ILM][i]) * v.Spacing.AxialUm
		m.ThicknessMapUm[i] = float32(t)
		if !mask[i] {
			continue
		}
		sum += t
		n++
		m.MinThicknessUm = math.Min(m.MinThicknessUm, t)
		m.MaxThicknessUm = math.Max(m.MaxThicknessUm, t)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no A-scan could be graded", ErrNotMeasurable)
	}
	m.MeanThicknessUm = sum / float64(n)

	fx, fy, ok := findFovea(v, m.ThicknessMapUm, mask)
	if !ok {
		return nil, fmt.Errorf("%w: no gradable A-scan within 1 mm of the scan centre, where the fovea is looked for", ErrNotMeasurable)
	}
	if !bracketed(v, mask, fx, fy) {
		return nil, fmt.Errorf("%w: the fovea found lies next to B-scans that could not be graded, where the pit itself may be", ErrNotMeasurable)
	}
	m.FoveaXMm, m.FoveaYMm = math.Round(fx*1000)/1000, math.Round(fy*1000)/1000
	m.FoveaFrame, m.FoveaCol = nearestAScan(v, fx, fy)
	grid := newETDRSGrid(v, fx, fy)
	var complete bool
	m.ETDRS, m.TotalVolumeMm3, _, complete = grid.means(m.ThicknessMapUm, mask)
	c, ok := m.ETDRS["C"]
	if !ok {
		return nil, fmt.Errorf("%w: the central subfield could not be graded", ErrNotMeasurable)
	}
	m.CentralSubfieldThicknessUm = c
	if !complete {
		m.TotalVolumeMm3 = 0
	}
	for _, k := range ETDRSSubfields {
		if _, ok := m.ETDRS[k]; !ok {
			m.Unmeasured = append(m.Unmeasured, k)
		}
	}
	m.GradableCoverage = round3(grid.coverage(mask))
	if l.has(BoundaryNames...) {
		for _, layer := range RetinalLayers {
			top, bottom := l.Boundaries[layer.Top], l.Boundaries[layer.Bottom]
			lt := LayerThickness{Name: layer.Name, Top: layer.Top, Bottom: layer.Bottom, MapUm: make([]float32, len(top))}
			for i := range top {
				lt.MapUm[i] = max(bottom[i]-top[i], 0) * float32(v.Spacing.AxialUm)
			}
			var volume, area float64
			lt.ETDRS, volume, area, _ = grid.means(lt.MapUm, mask)
			lt.MeanUm = volume / max(area, 1e-9) * 1000
			m.Layers = append(m.Layers, lt)
		}
	}
	return m, nil
}

// measureLayers takes each layer's means again over the A-scans of mask
// where both its boundaries hold (held; a boundary absent from it holds
// nowhere), and reads 0 in its map elsewhere.
func (m *Measurements) measureLayers(v *Volume, mask []bool, held map[string][]bool) {
	if len(m.Layers) == 0 {
		return
	}
	grid := newETDRSGrid(v, m.FoveaXMm, m.FoveaYMm)
	for i := range m.Layers {
		lt := &m.Layers[i]
		in := make([]bool, len(mask))
		top, bottom := held[lt.Top], held[lt.Bottom]
		for k := range in {
			in[k] = mask[k] && k < len(top) && top[k] && k < len(bottom) && bottom[k]
			if !in[k] && k < len(lt.MapUm) {
				lt.MapUm[k] = 0
			}
		}
		var volume, area float64
		lt.ETDRS, volume, area, _ = grid.means(lt.MapUm, in)
		lt.MeanUm = volume / max(area, 1e-9) * 1000
	}
}

// etdrsGrid assigns each A-scan to its ETDRS subfield around the fovea.
type etdrsGrid struct {
	subfield []string // per A-scan, "" outside the 6 mm circle
	cellMm2  float64  // en-face area one A-scan stands for
}

// findFovea locates the centre of the foveal pit within 1 mm of the scan
// centre, in mm (Volume.PositionMm): the thickness map is averaged over
// ±1 B-scan and ±80 µm along it, and the centre is the centroid of the
// pit's floor, the A-scans within 10 µm of the thinnest, each weighted by
// how far below that level it lies. A centroid, not the single thinnest
// A-scan, so that speckle in a few A-scans cannot move the grid.
func findFovea(v *Volume, thickness []float32, mask []bool) (x, y float64, ok bool) {
	hc := max(1, int(math.Round(80/v.Spacing.LateralUm)))
	smooth := func(f, c int) float64 {
		var s float64
		var n int
		for ff := max(0, f-1); ff <= min(v.Frames-1, f+1); ff++ {
			for cc := max(0, c-hc); cc <= min(v.Cols-1, c+hc); cc++ {
				if mask[ff*v.Cols+cc] {
					s += float64(thickness[ff*v.Cols+cc])
					n++
				}
			}
		}
		return s / float64(n)
	}
	type aScan struct{ x, y, t float64 }
	var near []aScan
	best := math.Inf(1)
	for f := range v.Frames {
		for c := range v.Cols {
			px, py := v.PositionMm(f, c)
			if px*px+py*py > 1 || !mask[f*v.Cols+c] {
				continue
			}
			t := smooth(f, c)
			near = append(near, aScan{px, py, t})
			best = min(best, t)
		}
	}
	const floorUm = 10
	var sw float64
	for _, a := range near {
		if w := best + floorUm - a.t; w > 0 {
			x, y, sw = x+w*a.x, y+w*a.y, sw+w
		}
	}
	if sw == 0 {
		return 0, 0, false
	}
	return x / sw, y / sw, true
}

// bracketed reports whether the central subfield around the fovea found
// is graded across B-scans: gradable A-scans (within 0.1 mm of the
// fovea's x) 0.2 to 0.5 mm (or 1.5 B-scan spacings, if more) from it
// on both sides. Otherwise the pit may
// lie in B-scans that could not be graded, and the thinnest gradable
// point is the edge of what was graded, not the fovea.
func bracketed(v *Volume, mask []bool, fx, fy float64) bool {
	if v.Frames == 1 {
		return true
	}
	var before, after bool
	for f := range v.Frames {
		for c := range v.Cols {
			x, y := v.PositionMm(f, c)
			if !mask[f*v.Cols+c] || math.Abs(x-fx) > 0.1 {
				continue
			}
			d := math.Abs(y - fy)
			if d < 0.2-1e-9 || d > max(0.5, 1.5*v.Spacing.FrameUm/1000) {
				continue
			}
			before, after = before || y < fy, after || y > fy
		}
	}
	return before && after
}

// nearestAScan is the A-scan closest to (x, y) mm.
func nearestAScan(v *Volume, x, y float64) (f, c int) {
	c = int(math.Round(x*1000/v.Spacing.LateralUm + float64(v.Cols-1)/2))
	if v.Spacing.FrameUm > 0 {
		f = int(math.Round(y*1000/v.Spacing.FrameUm + float64(v.Frames-1)/2))
	}
	return min(max(f, 0), v.Frames-1), min(max(c, 0), v.Cols-1)
}

// newETDRSGrid centres the grid on the fovea at (fx, fy) mm. Nasal and
// temporal follow the laterality: on a right eye (OD) nasal is +x, on a
// left eye (OS) it is −x. Frame 0 is the superior edge.
func newETDRSGrid(v *Volume, fx, fy float64) *etdrsGrid {
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
		}
	}
	return g
}

// means averages a per-A-scan thickness map (µm) over each subfield's
// gradable A-scans (mask) and integrates it over the 6 mm circle (mm³):
// each subfield's mean over the area its A-scans stand for. A subfield
// with under minSubfieldCoverage of its A-scans gradable is left out,
// and complete is false.
func (g *etdrsGrid) means(thickness []float32, mask []bool) (out map[string]float64, volume, areaMm2 float64, complete bool) {
	sums, counts, all := map[string]float64{}, map[string]int{}, map[string]int{}
	for i, key := range g.subfield {
		if key == "" {
			continue
		}
		all[key]++
		if mask[i] {
			sums[key] += float64(thickness[i])
			counts[key]++
		}
	}
	out, complete = map[string]float64{}, true
	for _, k := range ETDRSSubfields {
		if all[k] == 0 {
			continue
		}
		if float64(counts[k]) < minSubfieldCoverage*float64(all[k]) || counts[k] == 0 {
			complete = false
			continue
		}
		out[k] = sums[k] / float64(counts[k])
		volume += out[k] / 1000 * g.cellMm2 * float64(all[k])
		areaMm2 += g.cellMm2 * float64(all[k])
	}
	return out, volume, areaMm2, complete
}

// coverage is the share of the 6 mm circle's A-scans that are gradable.
func (g *etdrsGrid) coverage(mask []bool) float64 {
	var in, ok int
	for i, key := range g.subfield {
		if key != "" {
			in++
			if mask[i] {
				ok++
			}
		}
	}
	return float64(ok) / float64(max(in, 1))
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
