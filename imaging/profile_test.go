package imaging

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestACircleIsMeasuredWhole: the RNFL of a circle scan is given only
// when every sector was graded, and its global mean weighs each sector by
// its length, however unevenly the A-scans were graded.
func TestACircleIsMeasuredWhole(t *testing.T) {
	const cols = 360 // one A-scan per degree
	v := NewVolume(1, 200, cols, Spacing{AxialUm: 4, LateralUm: 30, FrameUm: 30})
	v.Pattern = Circle
	l := &Layers{Frames: 1, Cols: cols, Boundaries: map[string][]float32{}}
	for _, n := range []string{ILM, RNFLGCL, BM} {
		l.Boundaries[n] = make([]float32, cols)
	}
	for c := range cols {
		nfl := float32(20) // 80 µm
		if rnflSector(float64(c)) == "T" {
			nfl = 10 // 40 µm
		}
		l.Boundaries[ILM][c], l.Boundaries[RNFLGCL][c], l.Boundaries[BM][c] = 50, 50+nfl, 120
	}
	all := func(keep func(c int) bool) []bool {
		m := make([]bool, cols)
		for c := range m {
			m[c] = keep(c)
		}
		return m
	}
	for _, c := range []struct {
		name    string
		mask    []bool
		global  float64 // 0: not measurable
		missing string
	}{
		{"all graded", nil, 40*0.25 + 80*0.75, ""},
		// Every other A-scan outside T: an A-scan mean would be 53.3 µm.
		{"T graded twice as densely", all(func(c int) bool { return rnflSector(float64(c)) == "T" || c%2 == 0 }), 40*0.25 + 80*0.75, ""},
		{"TS lost", all(func(c int) bool { return rnflSector(float64(c)) != "TS" }), 0, "sector TS"},
		{"T and N lost", all(func(c int) bool { s := rnflSector(float64(c)); return s != "T" && s != "N" }), 0, "sectors T, N"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := MeasureRNFL(v, l, c.mask)
			if c.global == 0 {
				if !errors.Is(err, ErrNotMeasurable) || !strings.Contains(err.Error(), c.missing) || m != nil {
					t.Fatalf("measured %+v, err %v; want not measurable for %s", m, err, c.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(m.GlobalUm-c.global) > 0.05 || len(m.Sectors) != len(RNFLSectors) {
				t.Errorf("global %.1f µm, sectors %v; want %.1f and all six", m.GlobalUm, m.Sectors, c.global)
			}
		})
	}
}

// TestARetinaCutByTheTopOfTheImageIsNotGraded moves a phantom's line
// scan up until its retina just leaves the top of the image where it is
// highest: there the A-scans are not graded, and the quality gate says
// why. Moved up only until 60 µm of vitreous remain above it, the same
// line is graded in full.
func TestARetinaCutByTheTopOfTheImageIsNotGraded(t *testing.T) {
	o := PhantomOptions{Seed: 3, Frames: 1, Rows: 248, Cols: 256}
	p := NewPhantom(o)
	top := math.Inf(1)
	for _, r := range p.Boundaries[ILM] {
		top = min(top, r)
	}
	gap := int(math.Ceil(60 / p.Volume.Spacing.AxialUm))
	for _, c := range []struct {
		name  string
		shift int
		cut   bool
	}{{"cut", int(top) + 3, true}, {"60 µm below the top", int(top) - gap, false}} {
		t.Run(c.name, func(t *testing.T) {
			line := NewVolume(1, o.Rows, o.Cols, p.Volume.Spacing)
			line.Pattern = Line
			for r := range o.Rows { // rolled up: what leaves the top comes in at the bottom
				from := (r + c.shift) % o.Rows
				copy(line.Data[r*o.Cols:(r+1)*o.Cols], p.Volume.Data[from*o.Cols:(from+1)*o.Cols])
			}
			a, _ := analyze(t, line)
			said := strings.Contains(strings.Join(a.Quality.Reasons, "; "), "top of the image")
			if said != c.cut {
				t.Errorf("reasons %q; want the retina cut at the top of the image: %v", a.Quality.Reasons, c.cut)
			}
			if !c.cut && a.Quality.Gradable != Gradable {
				t.Errorf("quality %s %q, want full", a.Quality.Gradable, a.Quality.Reasons)
			}
			for col := range o.Cols {
				if p.Boundaries[ILM][col] < float64(c.shift) && a.Quality.Mask[col] {
					t.Fatalf("A-scan %d, whose retina the image cuts, graded", col)
				}
			}
		})
	}
}
