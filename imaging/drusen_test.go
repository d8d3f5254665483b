package imaging

import (
	"math"
	"testing"
)

// domeRise rises peak rows at centre, over the A-scans within half of it.
func domeRise(centre, half int, peak float64) func(c int) float64 {
	return func(c int) float64 {
		if d := float64(c-centre) / float64(half); math.Abs(d) < 1 {
			return peak * math.Sqrt(1-d*d)
		}
		return 0
	}
}

// domeBScan draws one B-scan of a retina over a flat RPE band (rows
// 80–89, Bruch's membrane at 90, 9000 bright) whose top rises as rise
// says (rows, per A-scan), the band's lower edge staying on the
// membrane. Where it rises, draw gives each row r of A-scan c from the
// raised top down to the membrane. With sink, the band thickens
// downwards instead: its top stays, its lower edge (and the membrane
// with it, as the segmentation places it) sinks by the rise, draw
// giving the rows from the band's top to its sunk edge. It returns the
// volume and its boundaries as a segmenter would place them.
func domeBScan(rise func(c int) float64, draw func(r, c, top int) float32, sink bool) (*Volume, *Layers) {
	const rows, cols, bandTop, bm = 120, 200, 80, 90
	v := NewVolume(1, rows, cols, Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 11.7})
	l := &Layers{Frames: 1, Cols: cols, Boundaries: map[string][]float32{}, RPEBottom: make([]float32, cols)}
	for _, n := range BoundaryNames {
		l.Boundaries[n] = make([]float32, cols)
	}
	for c := range cols {
		h := int(math.Round(rise(c)))
		top, bottom := bandTop-h, bm
		if sink {
			top, bottom = bandTop, bm+h
		}
		for r := range rows {
			val := float32(2000) // the retina over the band, as dark as the ONL
			switch {
			case r < 15:
				val = 100 // vitreous
			case r >= top && r < bottom && h > 0:
				val = draw(r, c, top)
			case r >= top && r < bottom:
				val = 9000 // the RPE band
			case r >= bottom:
				val = 3000 // choroid
			}
			v.Data[r*cols+c] = val
		}
		for i, row := range []float32{15, 22, 32, 42, 52, float32(top - 2), float32(top), float32(bottom)} {
			l.Boundaries[BoundaryNames[i]][c] = row
		}
		l.RPEBottom[c] = float32(bottom)
	}
	return v, l
}

// TestADomeFilledAsBrightAsTheBandIsADruse: the RPE band thickened
// upwards into a dome 46 µm high, the RPE riding on top of material
// about as bright as the band, its lower edge on Bruch's membrane, is a
// druse outlined where it rises. The same rise is no druse where the
// image does not show a filled dome topped by the RPE: the RPE under a
// dark gap (the band above it taken for the band's top), a filling with
// no ridge brighter than the band under it, a bright line over material
// as dim as the retina (the band shadowed under it), a rise of 19 µm
// (the band's normal undulation), a crest of 46 µm over 3 A-scans only,
// a dome cut off by the B-scan's end, or the band thickened downwards,
// its top flat.
func TestADomeFilledAsBrightAsTheBandIsADruse(t *testing.T) {
	const bandTop = 80
	filled := func(r, c, top int) float32 {
		if r < top+3 {
			return 20000 // the RPE, lifted: the band's brightest ridge
		}
		return 8000 // on a deposit about as bright as the band
	}
	gapped := func(r, c, top int) float32 {
		switch {
		case r < top+3:
			return 20000 // a bright band on top
		case r >= bandTop-2 && r < bandTop:
			return 2000 // over a gap as dark as the retina, 2 rows
		}
		return 9000 // over the RPE band
	}
	plain := func(int, int, int) float32 { return 8000 }
	shadowed := func(r, c, top int) float32 {
		if r < top+3 {
			return 20000 // a bright line
		}
		return 2500 // over material, and a band, as dim as the retina
	}
	spike := func(c int) float64 { // 23 µm high, 46 µm over 3 A-scans
		if c >= 99 && c <= 101 {
			return 12
		}
		return domeRise(100, 10, 6)(c)
	}
	for _, tc := range []struct {
		name   string
		centre int
		rise   func(c int) float64
		draw   func(r, c, top int) float32
		sink   bool
		want   bool
	}{
		{"filled dome, 46 µm", 100, domeRise(100, 10, 12), filled, false, true},
		{"a bright band over a gap", 100, domeRise(100, 10, 12), gapped, false, false},
		{"filled, its top no brighter than the band under it", 100, domeRise(100, 10, 12), plain, false, false},
		{"a bright line over material as dim as the retina", 100, domeRise(100, 10, 12), shadowed, false, false},
		{"filled, 19 µm", 100, domeRise(100, 10, 5), filled, false, false},
		{"filled, 46 µm over 3 A-scans only", 100, spike, filled, false, false},
		{"filled, cut off by the B-scan's end", 3, domeRise(3, 10, 12), filled, false, false},
		{"the band thickened downwards, its lower edge sunk", 100, domeRise(100, 10, 12), filled, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, l := domeBScan(tc.rise, tc.draw, tc.sink)
			lesions, err := MarkLesions(t.Context(), v, l)
			if err != nil {
				t.Fatal(err)
			}
			var drusen []Lesion
			for _, les := range lesions {
				if les.Type == Drusen || les.Type == PED {
					drusen = append(drusen, les)
				}
			}
			if !tc.want {
				if len(drusen) > 0 {
					t.Errorf("drusen %+v where the image shows no filled dome", drusen)
				}
				return
			}
			if len(drusen) != 1 || drusen[0].Type != Drusen {
				t.Fatalf("lesions %+v, want one druse", lesions)
			}
			b := drusen[0].Boxes[0]
			// The deposit is the rise: rows 68–79 at the crest, over the
			// A-scans where it stands at least 10 µm.
			if b.Col0 < tc.centre-10 || b.Col1 > tc.centre+10 || b.Row0 != 68 || b.Row1 != 79 {
				t.Errorf("box %+v, want A-scans within %d±10, rows 68–79", b, tc.centre)
			}
		})
	}
}
