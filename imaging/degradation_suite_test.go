package imaging

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// suiteScan is one scan of the degradation suite: its levels as the
// device stored them, their range, and the clean scan's truth.
type suiteScan struct {
	name   string
	levels *Volume
	peak   float64
	truth  suiteTruth
}

// suiteTruth is what the clean scan's truth says of each figure (the
// device's segmentation of a real scan, the phantom's geometry), and
// how far octflow's own clean result already is from it.
type suiteTruth struct {
	figures map[string]float64 // figure → µm
	// cleanErr is octflow's error on the clean scan, per figure.
	cleanErr map[string]float64
	// lesionFree: no lesion may be reported; fluid and drusen: the
	// masks a reported lesion set must match (Dice ≥ 0.8).
	lesionFree         bool
	fluid, drusen      []bool
	foveaCol           int // a line's pit, from the truth
	lineCentralMissing bool
	// rows is the truth's row of each boundary it knows, per A-scan
	// ([frame*cols+col]; NaN where it has none): the device's ILM,
	// RNFL/GCL and BM, the phantom's eight boundaries.
	rows map[string][]float64
}

// figureBound is how far a reported figure may be from the clean
// scan's truth: 10 µm, the bound, whatever octflow's own error
// on the clean scan (cleanErr, logged with a failure).
func figureBound(float64) float64 { return 10 }

// knownGaps are the suite's failures that no confidence yet catches,
// each listed in docs/imaging.md: the case ("scan, family severity:
// figure") and what goes wrong. Only where the gate did not call the
// scan full with a good signal; anything else out of bounds fails.
// None at present (the last, a 0.4 mirror's inner temporal subfield
// 12.3 µm off, is withheld since subfields must be covered evenly).
var knownGaps = map[string]string{}

// suiteResult is one degraded scan's outcome.
type suiteResult struct {
	analysis *Analysis
	reported map[string]float64 // figure → value, only those reported
	withheld map[string]string  // figure → reason
	lesions  []Lesion           // reported (nil when withheld)
	masks    *LesionMasks
	layers   *Layers
	denoised *Volume
}

// runSuite takes degraded levels through every stage, as the pipeline
// would, and collects the figures the analysis reports.
func runSuite(t testing.TB, levels *Volume) suiteResult {
	t.Helper()
	ctx := context.Background()
	w, _ := Normalize(levels)
	den, err := Denoise(ctx, w, DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(ctx, den, l)
	if err != nil {
		t.Fatal(err)
	}
	r := suiteResult{analysis: a, reported: map[string]float64{}, withheld: map[string]string{}, layers: l, denoised: den}
	for _, wh := range a.Withheld {
		r.withheld[wh.Figure] = wh.Reason
	}
	switch {
	case a.rnfl() != nil:
		r.reported[FigureRNFLGlobal] = a.rnfl().GlobalUm
		for s, x := range a.rnfl().Sectors {
			r.reported["rnfl:"+s] = x
		}
	case a.line() != nil && a.line().FoveaCol != nil:
		r.reported[FigureCentral] = a.line().CentralThicknessUm
	case a.cube() != nil:
		r.reported[FigureCST] = a.cube().CentralSubfieldThicknessUm
		for k, x := range a.cube().ETDRS {
			r.reported[FigureETDRS+k] = x
		}
	}
	if a.Pattern == Cube && a.Quality.Gradable != Ungradable {
		if r.masks, err = FindLesionMasks(ctx, den, l); err != nil {
			t.Fatal(err)
		}
		if a.LesionsWithheld() == "" {
			found, err := r.masks.Lesions(den, l)
			if err != nil {
				t.Fatal(err)
			}
			r.lesions = []Lesion{}
			for _, les := range found {
				if a.LesionKindWithheld(les.Type) == "" {
					r.lesions = append(r.lesions, les)
				}
			}
		}
	}
	return r
}

// realSuiteScan reads a real scan and the device's figures.
func realSuiteScan(t testing.TB, name string) suiteScan {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("real scans are read in tests")
	}
	v, dev := readRealScan(tt, name)
	s := suiteScan{name: name, levels: v, peak: 255, truth: suiteTruth{figures: map[string]float64{}, cleanErr: map[string]float64{}, rows: map[string][]float64{}}}
	for b, device := range map[string][]*float64{ILM: dev.ILM, RNFLGCL: dev.RNFL, BM: dev.BM} {
		rows := make([]float64, len(device))
		for c, x := range device {
			rows[c] = math.NaN()
			if x != nil {
				rows[c] = *x
			}
		}
		s.truth.rows[b] = rows
	}
	switch v.Pattern {
	case Circle:
		sums, counts := map[string]float64{}, map[string]int{}
		var sum float64
		var n int
		for c := range dev.ILM {
			if dev.ILM[c] != nil && dev.RNFL[c] != nil {
				x := (*dev.RNFL[c] - *dev.ILM[c]) * dev.ScaleZUm
				sec := rnflSector(360 * float64(c) / float64(len(dev.ILM)))
				sums[sec] += x
				counts[sec]++
				sum += x
				n++
			}
		}
		s.truth.figures[FigureRNFLGlobal] = sum / float64(n)
		for sec, x := range sums {
			s.truth.figures["rnfl:"+sec] = x / float64(counts[sec])
		}
	case Line:
		mmPerCol := v.Spacing.LateralUm / 1000
		meanAround := func(c0 int, mm float64) float64 {
			var sum float64
			var n int
			for c := range v.Cols {
				if math.Abs(float64(c-c0))*mmPerCol <= mm && dev.ILM[c] != nil && dev.BM[c] != nil {
					sum, n = sum+(*dev.BM[c]-*dev.ILM[c])*dev.ScaleZUm, n+1
				}
			}
			return sum / float64(max(n, 1))
		}
		pit, best := -1, math.Inf(1)
		for c := range v.Cols {
			if math.Abs(float64(c)-float64(v.Cols-1)/2)*mmPerCol <= 1 {
				if x := meanAround(c, 0.1); x < best {
					pit, best = c, x
				}
			}
		}
		s.truth.figures[FigureCentral] = meanAround(pit, 0.5)
		s.truth.foveaCol = pit
	}
	return s
}

// phantomSuiteScan writes a full-size phantom as an 8-bit power export
// (the real scans' encoding) and takes its truth from its geometry.
func phantomSuiteScan(t testing.TB, o PhantomOptions) suiteScan {
	t.Helper()
	return phantomSuiteScanIn(t, o, ExportPow8)
}

// phantomSuiteScanIn is phantomSuiteScan in export e (and the options'
// look).
func phantomSuiteScanIn(t testing.TB, o PhantomOptions, e Export) suiteScan {
	t.Helper()
	p := NewPhantom(o)
	levels, _, err := o.Look.Export(p.Volume, e)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := p.Truth(context.Background(), o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	s := suiteScan{name: fmt.Sprintf("phantom seed %d%s%s", o.Seed, map[bool]string{true: " fluid"}[o.Fluid], map[bool]string{true: " drusen"}[o.Drusen]),
		levels: levels, peak: 255,
		truth: suiteTruth{figures: map[string]float64{FigureCST: truth.Measurements.CentralSubfieldThicknessUm}, cleanErr: map[string]float64{},
			lesionFree: !o.Fluid && !o.Drusen, fluid: p.FluidMask, drusen: p.DrusenMask, rows: p.Boundaries}}
	for k, x := range truth.Measurements.ETDRS {
		s.truth.figures[FigureETDRS+k] = x
	}
	return s
}

// degradationFamilies are the suite's faults at graded severities, the
// mildest first in each family.
func degradationFamilies() []degradation {
	return []degradation{
		additive(0.01), additive(0.025), additive(0.05), additive(0.08), additive(0.12),
		speckle(0.2), speckle(0.4),
		weak(0.5, 0.02), weak(0.33, 0.03), weak(0.25, 0.04),
		blur(1.5), blur(3),
		vignette(0.6), vignette(0.4),
		motion(10), motion(30),
		clipping(0.8), clipping(0.6),
		mirror(0.2), mirror(0.4),
	}
}

// reducedPhantomFamilies are the faults the default suite puts the
// phantoms through: the mild noise the headline figures must survive
// (σ 2.5% and 5%), and each family's strongest severity, where lesions
// and subfields are withheld or go wrong if anything does.
func reducedPhantomFamilies() []degradation {
	return []degradation{
		additive(0.025), additive(0.05), additive(0.12),
		speckle(0.4), weak(0.25, 0.04), blur(3), vignette(0.4), motion(30), clipping(0.6), mirror(0.4),
	}
}

// judge checks one degraded scan's outcome against the suite's rules
// and returns a line of the calibration table per figure kind.
func judge(t *testing.T, s suiteScan, d degradation, r suiteResult) {
	t.Helper()
	name := fmt.Sprintf("%s, %s %.3g", s.name, d.family, d.severity)
	a := r.analysis
	for fig, got := range r.reported {
		want, ok := s.truth.figures[fig]
		if !ok {
			continue
		}
		if err := got - want; math.Abs(err) > figureBound(s.truth.cleanErr[fig]) {
			// The gate and the figures must agree: a scan called full
			// with a good signal carries no figure out of its bound,
			// known gap or not.
			if a.Quality.Gradable == Gradable && a.Quality.Grade == "good" {
				t.Errorf("%s: gate full/good while %s is %.1f µm, %.1f µm from the truth (bound %.0f µm)",
					name, fig, got, err, figureBound(s.truth.cleanErr[fig]))
				continue
			}
			if gap, known := knownGaps[name+": "+fig]; known {
				t.Logf("known gap (docs/imaging.md): %s: %s reported %.1f µm, the truth %.1f: %s", name, fig, got, want, gap)
				continue
			}
			t.Errorf("%s: %s reported %.1f µm, the truth %.1f (bound %.0f µm; clean error %+.1f), gate %s/%s: a wrong figure reported as reliable",
				name, fig, got, want, figureBound(s.truth.cleanErr[fig]), s.truth.cleanErr[fig], a.Quality.Gradable, a.Quality.Grade)
		}
	}
	if a.Quality.Gradable == Gradable && len(r.withheld) > 0 {
		t.Errorf("%s: gate full while figures are withheld (%d)", name, len(r.withheld))
	}
	for fig, reason := range r.withheld {
		if reason == "" {
			t.Errorf("%s: %s withheld without a reason", name, fig)
		}
		if _, both := r.reported[fig]; both {
			t.Errorf("%s: %s both reported and withheld", name, fig)
		}
	}
	// Nothing unmeasured is carried as a number.
	if !a.Measurable() && len(a.NotMeasurable) == 0 {
		t.Errorf("%s: no measurement and no reason", name)
	}
	if s.truth.lesionFree && len(r.lesions) > 0 {
		t.Errorf("%s: %d lesion(s) reported on a lesion-free volume (gate %s)", name, len(r.lesions), a.Quality.Gradable)
	}
	if r.lesions != nil && r.masks != nil {
		if s.truth.fluid != nil && a.LesionKindWithheld(IntraretinalFluid) == "" {
			if dc := dice(r.masks.Fluid, s.truth.fluid); dc < 0.8 {
				t.Errorf("%s: fluid reported with Dice %.3f, want ≥ 0.8 or withheld", name, dc)
			}
		}
		if s.truth.drusen != nil && a.LesionKindWithheld(Drusen) == "" {
			if dc := dice(r.masks.Drusen, s.truth.drusen); dc < 0.8 {
				t.Errorf("%s: drusen reported with Dice %.3f, want ≥ 0.8 or withheld", name, dc)
			}
		}
	}
}

// calibration accumulates the docs' table: per family and severity,
// each figure kind's worst error when reported and how often withheld.
type calibration struct {
	rows map[string]*calibrationRow
	keys []string
	// boundaries counts, per boundary, the graded A-scans in which it
	// was called reliable and, of those, the ones within
	// reliableWithinPx of the truth.
	boundaries map[string]*boundaryCalibration
}

// boundaryCalibration is how often a boundary called reliable was where
// the truth has it.
type boundaryCalibration struct {
	reliable, within int
	// worst is the degradation with the lowest share within, and that
	// share (over at least minCalibrationScans reliable A-scans).
	worst      string
	worstShare float64
}

// reliableWithinPx is how far from the truth a boundary called reliable
// may be, and minReliableWithin the share of its reliable A-scans over
// the suite that must be so (the calibration).
const (
	reliableWithinPx    = 2
	minReliableWithin   = 0.95
	minCalibrationScans = 200
)

type calibrationRow struct {
	worst    map[string]float64 // figure kind → worst |error| reported
	reported map[string]int
	withheld map[string]int
	verdicts map[Gradability]int
	lesions  int // lesions reported on lesion-free volumes
}

// figureKind groups figures for the table.
func figureKind(fig string) string {
	switch {
	case strings.HasPrefix(fig, "rnfl:"):
		return "RNFL sector"
	case strings.HasPrefix(fig, FigureETDRS):
		return "ETDRS subfield"
	}
	return map[string]string{FigureRNFLGlobal: "RNFL global", FigureCentral: "line central", FigureCST: "CST"}[fig]
}

var calibrationKinds = []string{"RNFL global", "RNFL sector", "line central", "CST", "ETDRS subfield"}

func (c *calibration) add(s suiteScan, d degradation, r suiteResult) {
	key := fmt.Sprintf("%s %.3g", d.family, d.severity)
	row, ok := c.rows[key]
	if !ok {
		row = &calibrationRow{worst: map[string]float64{}, reported: map[string]int{}, withheld: map[string]int{}, verdicts: map[Gradability]int{}}
		c.rows[key] = row
		c.keys = append(c.keys, key)
	}
	row.verdicts[r.analysis.Quality.Gradable]++
	for fig, want := range s.truth.figures {
		kind := figureKind(fig)
		if got, ok := r.reported[fig]; ok {
			row.reported[kind]++
			row.worst[kind] = max(row.worst[kind], math.Abs(got-want))
		} else {
			row.withheld[kind]++
		}
	}
	if s.truth.lesionFree {
		row.lesions += len(r.lesions)
	}
	a := r.analysis
	if a.evidence.reliable == nil || r.layers == nil {
		return
	}
	cols := s.levels.Cols
	for b, truth := range s.truth.rows {
		ok, found := a.evidence.reliable[b], r.layers.Boundaries[b]
		if len(ok) != len(truth) || len(found) != len(truth) {
			continue
		}
		group := "phantoms"
		if strings.HasPrefix(s.name, "spectralis") {
			group = "real scans"
		}
		bc := c.boundaries[group+"|"+b]
		if bc == nil {
			bc = &boundaryCalibration{worstShare: 2}
			c.boundaries[group+"|"+b] = bc
		}
		var n, k int
		for i, want := range truth {
			if !ok[i] || !a.Quality.Mask[i] || math.IsNaN(want) {
				continue
			}
			n++
			if math.Abs(float64(found[i])-want-motionShift(d, cols, i%cols)) <= reliableWithinPx {
				k++
			}

		}
		bc.reliable += n
		bc.within += k

		if share := float64(k) / float64(max(n, 1)); n >= minCalibrationScans && share < bc.worstShare {
			bc.worst, bc.worstShare = s.name+", "+key, share
		}
	}
}

// boundaryTable is the per-boundary calibration: how often a boundary
// called reliable was within reliableWithinPx of the truth, over the
// suite, and where it was least so.
func (c *calibration) boundaryTable() string {
	var b strings.Builder
	b.WriteString("\n| scans | boundary | A-scans called reliable | within 2 px of the truth | worst scan and degradation |\n|---|---|---|---|---|\n")
	for _, group := range []string{"real scans", "phantoms"} {
		for _, name := range append(slices.Clone(BoundaryNames), rpeBottomName) {
			bc, ok := c.boundaries[group+"|"+name]
			if !ok {
				continue
			}
			if bc.reliable == 0 {
				fmt.Fprintf(&b, "| %s | %s | 0 | (never called reliable) | |\n", group, name)
				continue
			}
			worst := ""
			if bc.worstShare <= 1 {
				worst = fmt.Sprintf("%.1f%% (%s)", 100*bc.worstShare, bc.worst)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f%% | %s |\n", group, name, bc.reliable, 100*float64(bc.within)/float64(max(bc.reliable, 1)), worst)
		}
	}
	return b.String()
}

func (c *calibration) table() string {
	var b strings.Builder
	b.WriteString("\n| degradation | verdicts | " + strings.Join(calibrationKinds, " | ") + " | lesions on lesion-free |\n|---|---|")
	b.WriteString(strings.Repeat("---|", len(calibrationKinds)+1) + "\n")
	for _, key := range c.keys {
		row := c.rows[key]
		var verdicts []string
		for _, g := range []Gradability{Gradable, PartlyGradable, Ungradable} {
			if row.verdicts[g] > 0 {
				verdicts = append(verdicts, fmt.Sprintf("%s %d", g, row.verdicts[g]))
			}
		}
		fmt.Fprintf(&b, "| %s | %s |", key, strings.Join(verdicts, ", "))
		for _, k := range calibrationKinds {
			n := row.reported[k] + row.withheld[k]
			switch {
			case n == 0:
				b.WriteString(" |")
			case row.reported[k] == 0:
				fmt.Fprintf(&b, " withheld %d/%d |", row.withheld[k], n)
			default:
				fmt.Fprintf(&b, " ≤ %.1f µm, withheld %d/%d |", row.worst[k], row.withheld[k], n)
			}
		}
		fmt.Fprintf(&b, " %d |\n", row.lesions)
	}
	return b.String()
}

// calibrationSeed draws the noise of the suite's degradations whose
// thresholds were tuned on it; heldOutSeeds draw it anew for the noisy
// families (heldOutFamilies), which the thresholds never saw: a
// boundary called reliable must hold its ≥ 95% on them as well.
const calibrationSeed = 1

var (
	heldOutSeeds    = []uint64{2, 3}
	heldOutFamilies = map[string]bool{"additive": true, "speckle": true, "weak": true, "vignette": true}
)

// TestAccuracyUnderDegradation is the degradation suite: real scans
// (with the device's segmentation) and phantoms (with their geometry)
// degraded by realistic acquisition faults at graded severities, each
// run through every stage. Every figure reported must be within 10 µm
// of the clean truth, whatever the gate's verdict (a known gap, listed
// in docs/imaging.md, only where the gate did not call the scan full
// with a good signal); a scan called full withholds nothing; every
// figure withheld has its reason; no lesion is reported on a
// lesion-free volume, and reported fluid and drusen keep Dice ≥ 0.8.
// Up to additive noise of σ 5% of the range, RNFL global, the line's
// central thickness and the CST are still reported. A boundary called
// reliable must be within 2 px of the truth in ≥ 95% of the A-scans so
// called, over the real scans and over the phantoms, on the noise the
// thresholds were calibrated on (calibrationSeed) and on noise drawn
// anew (heldOutSeeds). It logs the calibration tables of
// docs/imaging.md.
//
// By default (make test, without the race detector) the phantoms are
// half-size (25 B-scans of 512 A-scans, 250 µm apart) and go through
// reducedPhantomFamilies; with OCTFLOW_DEGRADATION=full they are
// full-size (49 × 512) and go through every family (several minutes
// more).
func TestAccuracyUnderDegradation(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("the degradation suite: run without -short and -race (make test does)")
	}
	full := os.Getenv("OCTFLOW_DEGRADATION") == "full"
	phantom := func(o PhantomOptions) PhantomOptions {
		if !full {
			o.Frames = 25
		}
		return o
	}
	scans := []suiteScan{
		realSuiteScan(t, "spectralis-circle-2"),
		realSuiteScan(t, "spectralis-circle-4"),
		realSuiteScan(t, "spectralis-line-0"),
		phantomSuiteScan(t, phantom(PhantomOptions{Seed: 1})),
		phantomSuiteScan(t, phantom(PhantomOptions{Seed: 4, Fluid: true, Drusen: true})),
	}
	newCalibration := func() *calibration {
		return &calibration{rows: map[string]*calibrationRow{}, boundaries: map[string]*boundaryCalibration{}}
	}
	cal, held := newCalibration(), newCalibration()
	for _, s := range scans {
		clean := runSuite(t, s.levels)
		for fig, want := range s.truth.figures {
			got, ok := clean.reported[fig]
			if !ok {
				t.Logf("%s: clean scan withholds %s (%q)", s.name, fig, clean.withheld[fig])
				continue
			}
			s.truth.cleanErr[fig] = got - want
		}
		judge(t, s, degradation{family: "clean"}, clean)
		for _, typ := range []string{IntraretinalFluid, Drusen} {
			if why := clean.analysis.LesionKindWithheld(typ); !s.truth.lesionFree && why != "" {
				t.Errorf("%s: clean scan withholds its %s (%q)", s.name, KindFigure(typ), why)
			}
		}
		for _, headline := range []string{FigureRNFLGlobal, FigureCentral, FigureCST} {
			if _, ok := s.truth.figures[headline]; ok {
				if _, rep := clean.reported[headline]; !rep {
					t.Errorf("%s: clean scan withholds %s (%q)", s.name, headline, clean.withheld[headline])
				}
			}
		}
		cal.add(s, degradation{family: "clean"}, clean)
		held.add(s, degradation{family: "clean"}, clean)
		families := degradationFamilies()
		if !full && strings.HasPrefix(s.name, "phantom") {
			families = reducedPhantomFamilies()
		}
		for _, d := range families {
			seeds := []uint64{calibrationSeed}
			if heldOutFamilies[d.family] {
				seeds = append(seeds, heldOutSeeds...)
			}
			for _, seed := range seeds {
				r := runSuite(t, degrade(s.levels, s.peak, d, seed))
				judge(t, s, d, r)
				// The held-out suite is the suite with its noise drawn
				// anew: the faults that draw none are the same in both.
				switch {
				case !heldOutFamilies[d.family]:
					cal.add(s, d, r)
					held.add(s, d, r)
				case seed == calibrationSeed:
					cal.add(s, d, r)
				default:
					held.add(s, d, r)
				}
				// Under mild noise the headline figures are still there.
				if d.family == "additive" && d.severity <= 0.05 {
					for _, fig := range []string{FigureRNFLGlobal, FigureCentral, FigureCST} {
						if _, ok := s.truth.figures[fig]; ok {
							if _, rep := r.reported[fig]; !rep {
								t.Errorf("%s at σ %.0f%% (seed %d): %s withheld (%q)", s.name, 100*d.severity, seed, fig, r.withheld[fig])
							}
						}
					}
				}
			}
		}
	}
	for _, c := range []*calibration{cal, held} {
		slices.SortStableFunc(c.keys, func(a, b string) int { return cmp.Compare(familyOrder(a), familyOrder(b)) })
	}
	t.Log("calibration seed:" + cal.table())
	t.Log("held-out seeds:" + held.table())
	t.Log("calibration seed:" + cal.boundaryTable())
	t.Log("held-out seeds:" + held.boundaryTable())
	// A boundary called reliable is where the truth has it (within 2 px)
	// in at least 95% of the A-scans so called, over the suite's real
	// scans and over its phantoms, on the calibration seed and on the
	// held-out ones.
	for which, c := range map[string]*calibration{"calibration seed": cal, "held-out seeds": held} {
		for name, bc := range c.boundaries {
			if share := float64(bc.within) / float64(max(bc.reliable, 1)); bc.reliable > 0 && share < minReliableWithin {
				t.Errorf("%s, %s: called reliable in %d A-scans, within %d px of the truth in %.1f%% of them, want ≥ %.0f%%",
					which, name, bc.reliable, reliableWithinPx, 100*share, 100*minReliableWithin)
			}
		}
	}
}

func familyOrder(key string) int {
	for i, f := range []string{"clean", "additive", "speckle", "weak", "blur", "vignette", "motion", "clipping", "mirror"} {
		if strings.HasPrefix(key, f+" ") {
			return i
		}
	}
	return 99
}
