package imaging

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestAccuracyOnPhantomsInOtherDevicesLooks draws full-size
// phantoms, healthy and with fluid and drusen, in each of the Looks
// other devices' exports show (finer axial sampling, a curved retina,
// darker vessel shadows, JPEG-compressed B-scans),
// each written in every export (a JPEG look in the 8-bit ones), and
// holds them to the figures the phantoms in the zero Look are held to
// (TestAccuracyOnFullSizePhantoms): every boundary within 1 px of the
// phantoms' own sampling (3.9 µm) mean absolute error, fluid and drusen
// Dice ≥ 0.8, the central subfield
// within 5 µm, every ETDRS subfield within 8 µm, the volume within
// 0.1 mm³, every layer's mean within 3 µm, the lesion types of the
// truth and none in a healthy eye; and the analysis gives a thickness
// over at least minLookGradedShare of the A-scans (a look the
// reliability judgments were not tuned on must not be refused). It logs
// the table docs/imaging.md quotes.
func TestAccuracyOnPhantomsInOtherDevicesLooks(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size phantoms: run without -short (make test does)")
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| look | phantom | export (found) | worst boundary MAE µm | CST error µm | worst ETDRS subfield µm | volume error mm³ | worst layer mean µm | fluid Dice | drusen Dice | lesions | graded share |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, look := range Looks {
		for _, o := range []PhantomOptions{{Seed: 1}, {Seed: 4, Fluid: true, Drusen: true}} {
			o.Look = look
			for _, e := range Exports {
				if look.JPEGQuality > 0 && e == ExportLinear16 {
					continue // stored without loss: the look's shadows alone
				}
				name := fmt.Sprintf("%s, seed %d fluid=%v drusen=%v, %s", look.Name, o.Seed, o.Fluid, o.Drusen, e)
				a := measureAccuracy(t, o, e, true)
				axialUm := depthUm / float64(cmp.Or(look.Rows, o.Rows, 496))
				worst, worstName := 0.0, ""
				for _, n := range BoundaryNames {
					um := a.maePx[n] * axialUm
					if um > worst {
						worst, worstName = um, n
					}
					if um > maxLookBoundaryUm {
						t.Errorf("%s: %s mean absolute error %.1f µm (%.2f px), want ≤ %.1f µm", name, n, um, a.maePx[n], maxLookBoundaryUm)
					}
				}
				checkPhantomFigures(t, name, o, a)
				if a.share < minLookGradedShare {
					t.Errorf("%s: a thickness over %.0f%% of the A-scans, want ≥ %.0f%%", name, 100*a.share, 100*minLookGradedShare)
				}
				fmt.Fprintf(&table, "| %s | seed %d fluid=%v drusen=%v | %s (%s) | %.1f (%s) | %+.1f | %.1f | %+.3f | %.1f | %.3f | %.3f | %s | %.0f%% |\n",
					look.Name, o.Seed, o.Fluid, o.Drusen, e, a.intensity.Encoding, worst, worstName, a.cstErrUm, a.etdrsErrUm, a.volErrMm3, a.layerErrUm,
					a.fluidDice, a.drusenDice, lesionTypes(a.found), 100*a.share)
			}
		}
	}
	t.Log(table.String())
}

// maxLookBoundaryUm is a boundary's largest mean absolute error in a
// look: 1 px of the phantoms' own sampling (1.92 mm over 496 rows).
const maxLookBoundaryUm = depthUm / 496

// minLookGradedShare is the least share of a phantom's A-scans, in any
// look and export, that the analysis gives a thickness (the clean real
// scans' goal, issue 38).
const minLookGradedShare = 0.85

// TestAccuracyOfALookNotYetMeasuredIsNoWrongFigure draws phantoms, healthy and
// with fluid and drusen, in each of the UnmeasuredLooks, and holds the
// analysis to the degradation suite's rules (judge): every figure it
// reports within 10 µm of the truth, nothing both reported and withheld,
// a reason for what it withholds, no lesion on the healthy eye and any
// lesion it reports found with a Dice of 0.8. It logs what it reported.
func TestAccuracyOfALookNotYetMeasuredIsNoWrongFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("phantoms through the analysis: run without -short (make test does)")
	}
	for _, look := range UnmeasuredLooks {
		for _, o := range []PhantomOptions{{Seed: 1}, {Seed: 4, Fluid: true, Drusen: true}} {
			o.Look, o.Frames = look, 25
			for _, e := range Exports {
				if look.JPEGQuality > 0 && e == ExportLinear16 {
					continue
				}
				s := phantomSuiteScanIn(t, o, e)
				s.name += ", " + string(e)
				r := runSuite(t, s.levels)
				judge(t, s, degradation{family: look.Name}, r)
				t.Logf("%s in the look %q: gate %s, a thickness over %.0f%% of the A-scans, %d figures reported, %d withheld, %d lesions reported",
					s.name, look.Name, r.analysis.Quality.Gradable, 100*r.analysis.ThicknessShare(nil), len(r.reported), len(r.withheld), len(r.lesions))
			}
		}
	}
}

// TestParseLookFindsEveryLookByItsName: every look of Looks and
// UnmeasuredLooks by its name, "" the zero Look, and anything else an
// error that names the choices.
func TestParseLookFindsEveryLookByItsName(t *testing.T) {
	for _, want := range append(slices.Clone(Looks), UnmeasuredLooks...) {
		if got, err := ParseLook(want.Name); err != nil || got != want {
			t.Errorf("ParseLook(%q) = %+v, %v; want %+v", want.Name, got, err, want)
		}
	}
	if got, err := ParseLook(""); err != nil || got != (Look{}) {
		t.Errorf(`ParseLook("") = %+v, %v; want the zero Look`, got, err)
	}
	if _, err := ParseLook("spectralis"); err == nil || !strings.Contains(err.Error(), Looks[0].Name) {
		t.Errorf(`ParseLook("spectralis"): %v, want an error naming the looks`, err)
	}
}

// TestAJPEGLookCompressesOnlyAnEightBitExport: a look's JPEG quality
// changes the levels of an 8-bit export, keeping every 8 × 8 block's mean
// level (within 2 levels: JPEG keeps the mean and loses the speckle's
// detail), and leaves a 16-bit one as it was.
func TestAJPEGLookCompressesOnlyAnEightBitExport(t *testing.T) {
	const rows, cols = 128, 96
	p := NewPhantom(PhantomOptions{Seed: 1, Frames: 2, Rows: rows, Cols: cols})
	look := Look{JPEGQuality: 75}
	for _, e := range Exports {
		plain, _ := e.Levels(p.Volume)
		got, bits, err := look.Export(p.Volume, e)
		if err != nil {
			t.Fatal(err)
		}
		var changed int
		for i := range got.Data {
			if got.Data[i] != plain.Data[i] {
				changed++
			}
		}
		var worst float64 // the largest change of an 8 × 8 block's mean level
		for f := range got.Frames {
			for r0 := 0; r0 < rows; r0 += 8 {
				for c0 := 0; c0 < cols; c0 += 8 {
					var d float64
					for r := r0; r < r0+8; r++ {
						for c := c0; c < c0+8; c++ {
							i := (f*rows+r)*cols + c
							d += float64(got.Data[i] - plain.Data[i])
						}
					}
					worst = max(worst, math.Abs(d/64))
				}
			}
		}
		switch {
		case bits == 16 && changed > 0:
			t.Errorf("%s: %d samples changed, want none (stored without loss)", e, changed)
		case bits == 8 && changed < len(got.Data)/10:
			t.Errorf("%s: %d of %d samples changed, want JPEG's loss", e, changed, len(got.Data))
		case bits == 8 && worst > 2:
			t.Errorf("%s: a block's mean level moved by %.1f, want ≤ 2", e, worst)
		}
	}
}

// TestUnaveragedSpeckleIsFullyDevelopedAndGrained: the unaveraged look's
// speckle has mean 1 and a contrast of 1 (exponential intensity, fully
// developed), and is correlated over its grain and not beyond it.
func TestUnaveragedSpeckleIsFullyDevelopedAndGrained(t *testing.T) {
	const rows, cols = 256, 256
	corr := func(s []float64, dr, dc int) float64 {
		var sxy, sx, sy, sxx, syy float64
		var n int
		for r := 0; r+dr < rows; r++ {
			for c := 0; c+dc < cols; c++ {
				x, y := s[r*cols+c], s[(r+dr)*cols+c+dc]
				sxy, sx, sy, sxx, syy, n = sxy+x*y, sx+x, sy+y, sxx+x*x, syy+y*y, n+1
			}
		}
		m := float64(n)
		return (sxy/m - sx*sy/m/m) / math.Sqrt((sxx/m-sx*sx/m/m)*(syy/m-sy*sy/m/m))
	}
	for _, c := range []struct {
		grainRows, grainCols int
		down, across         bool // correlated with the next sample down, across
	}{{2, 1, true, false}, {1, 2, false, true}, {1, 1, false, false}} {
		s := grainedSpeckle(rand.New(rand.NewPCG(1, 2)), rows, cols, c.grainRows, c.grainCols)
		var sum, sq float64
		for _, x := range s {
			sum, sq = sum+x, sq+x*x
		}
		mean := sum / float64(len(s))
		contrast := math.Sqrt(sq/float64(len(s))-mean*mean) / mean
		if math.Abs(mean-1) > 1e-9 || contrast < 0.9 || contrast > 1.1 {
			t.Errorf("grain %d×%d: mean %.3f, contrast %.2f, want 1 and about 1", c.grainRows, c.grainCols, mean, contrast)
		}
		// A grain of two samples at half height: the next sample
		// correlated by a half, the one after by 0.06.
		for _, d := range []struct {
			name       string
			dr, dc     int
			correlated bool
		}{{"down", 1, 0, c.down}, {"across", 0, 1, c.across}} {
			if r := corr(s, d.dr, d.dc); d.correlated && math.Abs(r-0.5) > 0.1 || !d.correlated && math.Abs(r) > 0.1 {
				t.Errorf("grain %d×%d: correlation with the next sample %s %.2f, want %v", c.grainRows, c.grainCols, d.name, r,
					map[bool]string{true: "0.5", false: "none"}[d.correlated])
			}
			if r := corr(s, 2*d.dr, 2*d.dc); math.Abs(r) > 0.15 {
				t.Errorf("grain %d×%d: correlation two samples %s %.2f, want none", c.grainRows, c.grainCols, d.name, r)
			}
		}
	}
}

// TestACurvedLookLowersTheRetinaTowardsTheFieldsEdge: a curved look's
// retina lies CurvatureUm deeper at the field's edge than the phantom's
// own, and where it was at the centre.
func TestACurvedLookLowersTheRetinaTowardsTheFieldsEdge(t *testing.T) {
	o := PhantomOptions{Seed: 1, Frames: 5, Cols: 101}
	plain := NewPhantom(o)
	o.Look = Look{CurvatureUm: 120}
	curved := NewPhantom(o)
	axialUm := depthUm / 496
	mid := 2*101 + 50 // the middle B-scan's middle A-scan
	for _, c := range []struct {
		name    string
		i       int
		along   float64 // how far towards the field's edge, 0 to 1
		acrossY bool    // towards the first B-scan
	}{{"centre", mid, 0, false}, {"nasal edge", 2*101 + 100, 1, false}, {"temporal edge", 2 * 101, 1, false}, {"first B-scan's middle", 50, 1, true}} {
		// x at A-scan 0 and 100 is ±3 mm less half an A-scan's spacing;
		// y at the first of 5 B-scans is 3 mm less half a B-scan's
		// spacing (1.2 mm) from the middle one.
		want := 120 * math.Pow(c.along*(1-1.0/101), 2)
		if c.acrossY {
			want = 120 * math.Pow(c.along*(1-1.0/5), 2)
		}
		for _, b := range []string{ILM, BM} {
			if got := (curved.Boundaries[b][c.i] - plain.Boundaries[b][c.i]) * axialUm; math.Abs(got-want) > 0.5 {
				t.Errorf("%s, %s: %.1f µm deeper, want %.1f", c.name, b, got, want)
			}
		}
	}
}

// TestTheZeroLookDrawsThePhantomAsBefore: the zero Look draws the very
// phantom drawn before looks were added (its samples' and boundaries'
// SHA-256, taken then from the code of ff4303a), so that every figure
// measured on the phantoms stands: the speckle's draws in the same order,
// no curvature, the same shadow.
func TestTheZeroLookDrawsThePhantomAsBefore(t *testing.T) {
	p := NewPhantom(PhantomOptions{Seed: 3, Frames: 2, Rows: 64, Cols: 48, Fluid: true, Drusen: true})
	h := sha256.New()
	for _, x := range p.Volume.Data {
		h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
	}
	for _, n := range BoundaryNames {
		for _, x := range p.Boundaries[n] {
			h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(x)))
		}
	}
	const before = "a09a8b1024dc3d9cafac09bc09a0a6053095245f4cdeacf45aad27c471df94e4"
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != before {
		t.Errorf("the zero Look's phantom hashes to %s, before looks to %s", got, before)
	}
}
