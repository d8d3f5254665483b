package imaging

import (
	"context"
	"math"
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
	Voxels    int     `json:"voxels"`
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

// minLesionVoxels ignores specks smaller than this.
const minLesionVoxels = 20

// MarkLesions finds fluid: hyporeflective regions inside the retina,
// between the ILM and the RPE, grouped into 3-D connected regions. A
// region that reaches down to the RPE is subretinal, otherwise
// intraretinal.
func MarkLesions(ctx context.Context, v *Volume, l *Layers) ([]Lesion, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if l.Frames != v.Frames || l.Cols != v.Cols || l.Boundaries[ILM] == nil || l.Boundaries[RPE] == nil {
		return nil, invalidf("layers (%d×%d) do not match the volume (%d×%d)", l.Frames, l.Cols, v.Frames, v.Cols)
	}
	margin := max(1, int(8/v.Spacing.AxialUm+0.5))
	candidate := make([]bool, len(v.Data))
	forEachFrame(v.Frames, func(f int) {
		img := v.Frame(f)
		bg, peak := frameLevels(img, v.Rows, v.Cols)
		threshold := bg + 0.1*(peak-bg)
		for c := range v.Cols {
			top := int(l.Row(ILM, f, c)) + margin
			bottom := int(l.Row(RPE, f, c)) - margin
			for r := max(top, 0); r < min(bottom, v.Rows); r++ {
				if img[r*v.Cols+c] < threshold {
					candidate[(f*v.Rows+r)*v.Cols+c] = true
				}
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return regions(v, candidate, l.Boundaries[RPE], margin+1), nil
}

// regions groups marked voxels into 3-D connected lesions (6-neighbour),
// ignoring specks. A region that comes within nearRPE rows of the RPE
// (rpe: row per A-scan) is subretinal fluid, otherwise intraretinal.
func regions(v *Volume, candidate []bool, rpe []float32, nearRPE int) []Lesion {
	voxelMm3 := v.Spacing.AxialUm * v.Spacing.LateralUm * max(v.Spacing.FrameUm, v.Spacing.LateralUm) / 1e9
	pixelMm2 := v.Spacing.LateralUm * max(v.Spacing.FrameUm, v.Spacing.LateralUm) / 1e6
	seen := make([]bool, len(v.Data))
	var lesions []Lesion
	stack := []int{}
	for start, isCand := range candidate {
		if !isCand || seen[start] {
			continue
		}
		seen[start] = true
		stack = append(stack[:0], start)
		var n, sumF, sumC int
		touchesRPE := false
		footprint := map[int]bool{}
		boxes := map[int]*Box{}
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f, r, c := i/(v.Rows*v.Cols), (i/v.Cols)%v.Rows, i%v.Cols
			n++
			sumF += f
			sumC += c
			footprint[f*v.Cols+c] = true
			if b, ok := boxes[f]; ok {
				b.Row0, b.Row1, b.Col0, b.Col1 = min(b.Row0, r), max(b.Row1, r), min(b.Col0, c), max(b.Col1, c)
			} else {
				boxes[f] = &Box{Frame: f, Row0: r, Row1: r, Col0: c, Col1: c}
			}
			if r >= int(rpe[f*v.Cols+c])-nearRPE {
				touchesRPE = true
			}
			for _, d := range [][3]int{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}} {
				ff, rr, cc := f+d[0], r+d[1], c+d[2]
				if ff < 0 || ff >= v.Frames || rr < 0 || rr >= v.Rows || cc < 0 || cc >= v.Cols {
					continue
				}
				j := (ff*v.Rows+rr)*v.Cols + cc
				if candidate[j] && !seen[j] {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
		if n < minLesionVoxels {
			continue
		}
		les := Lesion{Type: IntraretinalFluid, Voxels: n,
			Frame: int(math.Round(float64(sumF) / float64(n))), Col: int(math.Round(float64(sumC) / float64(n))),
			AreaMm2: float64(len(footprint)) * pixelMm2, VolumeMm3: float64(n) * voxelMm3}
		if touchesRPE {
			les.Type = SubretinalFluid
		}
		for f := range v.Frames {
			if b, ok := boxes[f]; ok {
				les.Boxes = append(les.Boxes, *b)
			}
		}
		les.XMm = (float64(les.Col) - float64(v.Cols-1)/2) * v.Spacing.LateralUm / 1000
		les.YMm = (float64(les.Frame) - float64(v.Frames-1)/2) * v.Spacing.FrameUm / 1000
		lesions = append(lesions, les)
	}
	return lesions
}
