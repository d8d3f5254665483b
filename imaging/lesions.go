package imaging

import (
	"context"
	"math"
	"slices"
)

// Lesion types, as named in the report schema.
const (
	IntraretinalFluid = "intraretinal_fluid"
	SubretinalFluid   = "subretinal_fluid"
	Drusen            = "drusen"
	PED               = "ped"
)

// Lesion is one connected abnormal region.
type Lesion struct {
	Type string `json:"type"`
	// Frame and Col locate the centroid; XMm and YMm give it relative to
	// the scan centre (x lateral, y across B-scans).
	Frame     int     `json:"frame"`
	Col       int     `json:"col"`
	XMm       float64 `json:"xMm"`
	YMm       float64 `json:"yMm"`
	AreaMm2   float64 `json:"areaMm2"` // en-face footprint
	VolumeMm3 float64 `json:"volumeMm3"`
	// HeightUm is the region's greatest extent along the A-scan.
	HeightUm float64 `json:"heightUm"`
	Voxels   int     `json:"voxels"`
	// Boxes bound the lesion on each B-scan it crosses.
	Boxes []Box `json:"boxes,omitempty"`
}

// Box bounds a lesion on one B-scan (inclusive rows and columns).
type Box struct {
	Frame int `json:"frame"`
	Row0  int `json:"row0"`
	Col0  int `json:"col0"`
	Row1  int `json:"row1"`
	Col1  int `json:"col1"`
}

// Lesion detection thresholds.
const (
	// minLesionMm3 ignores regions smaller than about a dome 0.2 mm across
	// and 30 µm high: below what B-scans 120 µm apart resolve, and where
	// speckle and boundary noise leave specks.
	minLesionMm3 = 0.0005
	// minLesionVoxels also ignores regions of fewer voxels, which coarse
	// sampling can make large in mm³.
	minLesionVoxels = 30
	// minLesionSectionMm2 is minLesionMm3's dome cut through its middle
	// (about π/4 · 0.2 mm · 30 µm, rounded down): what a scan of one
	// B-scan, which has no volume to measure, sees of the least lesion.
	minLesionSectionMm2 = 0.004
	// fluidContrast is how much darker than the column's outer nuclear
	// layer a voxel must be to count as fluid (a factor; fluid is
	// near-black, the ONL the darkest tissue).
	fluidContrast = 2.5
	// minDrusenUm is the least RPE elevation over Bruch's membrane taken
	// as part of a deposit (and never less than 2.5 rows), and
	// minDrusenPeakUm (never less than twice that) the least a deposit
	// rises to somewhere: the healthy RPE band, its lower edge placed a
	// row or two high over a millimetre, is no deposit.
	minDrusenUm     = 10.0
	minDrusenPeakUm = 20.0
	// A raised region counts as a pigment epithelial detachment rather
	// than drusen when it is taller than pedHeightUm or wider than a
	// 1 mm disc.
	pedHeightUm = 150.0
	pedAreaMm2  = math.Pi * 0.5 * 0.5
)

// MarkLesions finds fluid and RPE elevations in a denoised volume and its
// layers, and lists them as 3-D connected regions:
//
//   - fluid: voxels between the ILM and the RPE markedly darker than the
//     outer nuclear layer of their A-scan, after correcting for vessel
//     shadows; a region lying mostly between the EZ and the RPE is
//     subretinal, otherwise intraretinal;
//   - drusen and PED: the RPE band's lower edge raised more than
//     minDrusenUm over Bruch's membrane (which the segmentation fits as a
//     baseline under raised RPE); or, where the deposit is as bright as
//     the band and its lower edge stays on the membrane, the band
//     thickened upwards into a filled dome (thickenedRPE, markDomes).
func MarkLesions(ctx context.Context, v *Volume, l *Layers) ([]Lesion, error) {
	m, err := FindLesionMasks(ctx, v, l)
	if err != nil {
		return nil, err
	}
	return m.Lesions(v, l)
}

// LesionMasks flags, per voxel of a volume, fluid and drusen (the deposit
// under a raised RPE). A nil mask marks nothing.
type LesionMasks struct {
	Fluid, Drusen []bool
}

// Lesion labels, one per voxel, as Labels writes them and a lesion model
// outputs them.
const (
	LabelNone   = 0
	LabelFluid  = 1
	LabelDrusen = 2
)

// MasksFromLabels reads a label volume (LabelNone, LabelFluid,
// LabelDrusen per voxel) into masks.
func MasksFromLabels(labels []float32) *LesionMasks {
	m := &LesionMasks{Fluid: make([]bool, len(labels)), Drusen: make([]bool, len(labels))}
	for i, label := range labels {
		m.Fluid[i], m.Drusen[i] = label == LabelFluid, label == LabelDrusen
	}
	return m
}

// Labels returns one label per voxel: LabelFluid, LabelDrusen or
// LabelNone.
func (m *LesionMasks) Labels() []uint8 {
	labels := make([]uint8, max(len(m.Fluid), len(m.Drusen)))
	for i := range labels {
		switch {
		case i < len(m.Fluid) && m.Fluid[i]:
			labels[i] = LabelFluid
		case i < len(m.Drusen) && m.Drusen[i]:
			labels[i] = LabelDrusen
		}
	}
	return labels
}

// Lesions lists the masks' connected regions, typed as MarkLesions types
// them: fluid below the EZ is subretinal, a large elevation is a PED.
func (m *LesionMasks) Lesions(v *Volume, l *Layers) ([]Lesion, error) {
	for _, mask := range [][]bool{m.Fluid, m.Drusen} {
		if mask != nil && len(mask) != len(v.Data) {
			return nil, invalidf("lesion mask has %d voxels for a volume of %d", len(mask), len(v.Data))
		}
	}
	if !l.has(EZ) || l.Frames != v.Frames || l.Cols != v.Cols {
		return nil, invalidf("layers do not match the volume or lack the EZ")
	}
	ez := l.Boundaries[EZ]
	var found []Lesion
	if m.Fluid != nil {
		found = regions(v, m.Fluid, func(f, r, c int) string {
			if float32(r) >= ez[f*v.Cols+c] {
				return SubretinalFluid
			}
			return IntraretinalFluid
		})
	}
	if m.Drusen != nil {
		found = append(found, drusenRegions(v, m.Drusen)...)
	}
	return found, nil
}

// drusenRegions lists RPE elevations, typed drusen or PED by size.
func drusenRegions(v *Volume, mask []bool) []Lesion {
	found := regions(v, mask, func(int, int, int) string { return Drusen })
	for i := range found {
		if found[i].HeightUm > pedHeightUm || found[i].AreaMm2 > pedAreaMm2 {
			found[i].Type = PED
		}
	}
	return found
}

// FindLesionMasks marks the fluid and drusen voxels of a denoised,
// segmented volume (see MarkLesions for how).
func FindLesionMasks(ctx context.Context, v *Volume, l *Layers) (*LesionMasks, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols {
		return nil, invalidf("layers (%d×%d) do not match the volume (%d×%d)", l.Frames, l.Cols, v.Frames, v.Cols)
	}
	if !l.has(BoundaryNames...) {
		return nil, invalidf("layers lack some of the boundaries %v", BoundaryNames)
	}
	fluid := make([]bool, len(v.Data))
	drusen := make([]bool, len(v.Data))
	minDrusen := float32(max(minDrusenUm/v.Spacing.AxialUm, 2.5)) // rows; boundary noise is about one each side
	peak := float32(max(minDrusenPeakUm/v.Spacing.AxialUm, 2*float64(minDrusen)))
	withDrusen := len(l.RPEBottom) == v.Frames*v.Cols // not given (a model's plain boundaries): BM is then never reliable, and Analyze withholds the lesions
	raised, lifted := make([]bool, v.Frames*v.Cols), make([]bool, v.Frames*v.Cols)
	thick, domes := make([]bool, v.Frames*v.Cols), make([]domeScan, v.Frames*v.Cols)
	usualGap := make([]float32, v.Frames)
	forEachFrame(v.Frames, func(f int) {
		if ctx.Err() != nil {
			return
		}
		markFluid(v, l, f, fluid)
		if withDrusen {
			usualGap[f] = raisedRPE(v, l, f, minDrusen, peak, raised, lifted)
			thickenedRPE(v, l, f, float64(minDrusen), thick, domes)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if withDrusen {
		markDrusen(v, l, raised, lifted, usualGap, drusen)
		markDomes(v, l, thick, domes, max(minDomeUm/v.Spacing.AxialUm, 3*float64(minDrusen)), drusen)
	}
	return &LesionMasks{Fluid: fluid, Drusen: drusen}, nil
}

// raisedRPE finds, on B-scan f, where a deposit may lift the RPE band
// off Bruch's membrane: raised where the band's lower edge stands over
// the membrane by least rows more than the B-scan's usual gap between
// the two (their lower quartile: the band's own thickness as the
// segmentation sees it, which deposits never cover three quarters of),
// and lifted where, besides, both the lower edge and the band's upper
// boundary (RPE, over its median height) stand peak rows higher than
// usual. It returns the usual gap.
func raisedRPE(v *Volume, l *Layers, f int, least, peak float32, raised, lifted []bool) float32 {
	gap, band := make([]float32, v.Cols), make([]float32, v.Cols)
	for c := range v.Cols {
		bm := l.Row(BM, f, c)
		gap[c], band[c] = bm-l.RPEBottom[f*v.Cols+c], bm-l.Row(RPE, f, c)
	}
	quantile := func(xs []float32, q int) float32 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return max(s[len(s)*q/4], 0)
	}
	usualGap, usualBand := quantile(gap, 1), quantile(band, 2)
	for c := range v.Cols {
		i := f*v.Cols + c
		raised[i] = gap[c]-usualGap >= least
		lifted[i] = min(gap[c]-usualGap, band[c]-usualBand) >= peak
	}
	return usualGap
}

// markDrusen marks the deposits: the regions of raised A-scans
// (raisedRPE), connected en face across A-scans and B-scans, in which
// the whole band is lifted somewhere — a dome, not a sliver where only
// the band's lower edge was placed a little high over a millimetre of
// healthy band. A deposit fills the gap, from the band's lower edge to
// the membrane less its B-scan's usual gap.
func markDrusen(v *Volume, l *Layers, raised, lifted []bool, usualGap []float32, drusen []bool) {
	enFaceRegions(v, raised, func(region []int) {
		if !slices.ContainsFunc(region, func(i int) bool { return lifted[i] }) {
			return
		}
		for _, i := range region {
			f, c := i/v.Cols, i%v.Cols
			r0 := max(int(math.Round(float64(l.RPEBottom[i]))), 0)
			r1 := min(int(math.Round(float64(l.Row(BM, f, c)-usualGap[f]))), v.Rows)
			for r := r0; r < r1; r++ {
				drusen[(f*v.Rows+r)*v.Cols+c] = true
			}
		}
	})
}

// markFluid marks the fluid voxels of B-scan f. Each A-scan is judged
// against the darkest tissue, the outer nuclear layer, in log intensity:
// the frame's typical ONL level, lowered by the A-scan's shadow (how much
// darker its RPE is than the frame's typical RPE).
func markFluid(v *Volume, l *Layers, f int, fluid []bool) {
	img := v.Frame(f)
	at := func(r, c int) float64 { return math.Log1p(float64(max(img[r*v.Cols+c], 0))) }
	onl := make([]float64, v.Cols)
	rpe := make([]float64, v.Cols)
	col := make([]float64, 0, v.Rows)
	for c := range v.Cols {
		col = col[:0]
		for r := int(l.Row(OPLONL, f, c)) + 1; r < int(l.Row(EZ, f, c))-1; r++ {
			col = append(col, at(r, c))
		}
		onl[c] = medianOf(col)
		col = col[:0]
		for r := int(l.Row(RPE, f, c)) + 1; r < int(l.Row(RPE, f, c))+4 && r < v.Rows; r++ {
			col = append(col, at(r, c))
		}
		rpe[c] = medianOf(col)
	}
	onlLevel := medianOf(slices.Clone(onl))
	rpeLevel := medianOf(slices.Clone(rpe))
	margin := max(1, int(8/v.Spacing.AxialUm+0.5))
	for c := range v.Cols {
		shadow := max(rpeLevel-rpe[c], 0)
		threshold := onlLevel - shadow - math.Log(fluidContrast)
		top := int(l.Row(ILM, f, c)) + margin
		bottom := int(l.Row(RPE, f, c))
		for r := max(top, 0); r < min(bottom, v.Rows); r++ {
			if at(r, c) < threshold {
				fluid[(f*v.Rows+r)*v.Cols+c] = true
			}
		}
	}
}

// medianOf sorts xs and returns its middle value (0 when empty).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// regions groups marked voxels into 3-D connected lesions (6-neighbour),
// ignoring specks (minLesionMm3; minLesionSectionMm2 on a scan of one
// B-scan). Each region takes the type most of its voxels get from
// typeOf.
func regions(v *Volume, mask []bool, typeOf func(f, r, c int) string) []Lesion {
	voxelMm3 := v.Spacing.AxialUm * v.Spacing.LateralUm * max(v.Spacing.FrameUm, v.Spacing.LateralUm) / 1e9
	pixelMm2 := v.Spacing.LateralUm * max(v.Spacing.FrameUm, v.Spacing.LateralUm) / 1e6
	sectionMm2 := v.Spacing.AxialUm * v.Spacing.LateralUm / 1e6 // a voxel seen on its B-scan
	seen := make([]bool, len(v.Data))
	var lesions []Lesion
	stack := []int{}
	for start, marked := range mask {
		if !marked || seen[start] {
			continue
		}
		seen[start] = true
		stack = append(stack[:0], start)
		var n, sumF, sumC int
		votes := map[string]int{}
		footprint := map[int]bool{}
		boxes := map[int]*Box{}
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f, r, c := i/(v.Rows*v.Cols), (i/v.Cols)%v.Rows, i%v.Cols
			n++
			sumF += f
			sumC += c
			votes[typeOf(f, r, c)]++
			footprint[f*v.Cols+c] = true
			if b, ok := boxes[f]; ok {
				b.Row0, b.Row1, b.Col0, b.Col1 = min(b.Row0, r), max(b.Row1, r), min(b.Col0, c), max(b.Col1, c)
			} else {
				boxes[f] = &Box{Frame: f, Row0: r, Row1: r, Col0: c, Col1: c}
			}
			for _, d := range [][3]int{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}} {
				ff, rr, cc := f+d[0], r+d[1], c+d[2]
				if ff < 0 || ff >= v.Frames || rr < 0 || rr >= v.Rows || cc < 0 || cc >= v.Cols {
					continue
				}
				j := (ff*v.Rows+rr)*v.Cols + cc
				if mask[j] && !seen[j] {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
		if n < minLesionVoxels || v.Frames > 1 && float64(n)*voxelMm3 < minLesionMm3 ||
			v.Frames == 1 && float64(n)*sectionMm2 < minLesionSectionMm2 {
			continue
		}
		les := Lesion{Voxels: n,
			Frame: int(math.Round(float64(sumF) / float64(n))), Col: int(math.Round(float64(sumC) / float64(n))),
			AreaMm2: float64(len(footprint)) * pixelMm2, VolumeMm3: float64(n) * voxelMm3}
		for t, count := range votes {
			if count > votes[les.Type] || (count == votes[les.Type] && t < les.Type) {
				les.Type = t
			}
		}
		for f := range v.Frames {
			if b, ok := boxes[f]; ok {
				les.Boxes = append(les.Boxes, *b)
				les.HeightUm = max(les.HeightUm, float64(b.Row1-b.Row0+1)*v.Spacing.AxialUm)
			}
		}
		les.XMm, les.YMm = v.PositionMm(les.Frame, les.Col)
		lesions = append(lesions, les)
	}
	return lesions
}
