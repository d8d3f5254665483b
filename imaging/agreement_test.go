package imaging

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// lesionLine is one B-scan of a small phantom with fluid and drusen
// (7 B-scans of 248 × 256 over the 6 × 6 mm field), in the 8-bit power export
// with additive noise of σ (share of the range) drawn from noise: a
// line scan, which the analysis judges like a cube in a fraction of the
// time.
func lesionLine(t *testing.T, seed uint64, frame int, sigma float64, noise uint64) *Volume {
	t.Helper()
	levels, ok := lesionPhantoms[seed]
	if !ok {
		p := NewPhantom(PhantomOptions{Seed: seed, Frames: 7, Rows: 248, Cols: 256, Fluid: true, Drusen: true})
		levels, _ = ExportPow8.Levels(p.Volume)
		lesionPhantoms[seed] = levels
	}
	line := NewVolume(1, levels.Rows, levels.Cols, levels.Spacing)
	copy(line.Data, levels.Frame(frame))
	line.Pattern = Line
	return degrade(line, 255, additive(sigma), noise)
}

// lesionPhantoms are the phantoms' levels by seed, made once (the
// subtests that use them run one after another).
var lesionPhantoms = map[uint64]*Volume{}

// TestLesionsAreWithheldUnderTheAgreementTheyNeed pins the verdict on
// either side of the calibrated agreement, kind by kind: the fluid (or
// drusen) found must agree (Dice) between the scan as denoised and
// denoised again more strongly, 0.8 or more, every region of the kind
// found either way must be found again over half its voxels, and none
// may be a one-B-scan streak; else that kind is withheld, with the
// reason, and the other kind's verdict is its own.
func TestLesionsAreWithheldUnderTheAgreementTheyNeed(t *testing.T) {
	for _, c := range []struct {
		ag                agreement
		wantFluid, wantDr string // "": reported
	}{
		{agreement{dice: [2]float64{1, 1}}, "", ""},
		{agreement{dice: [2]float64{0.81, 0.95}}, "", ""},
		{agreement{dice: [2]float64{0.95, 0.80}}, "", ""},
		{agreement{dice: [2]float64{0.79, 0.95}}, "the fluid found changes", ""},
		{agreement{dice: [2]float64{0.95, 0.795}}, "", "the drusen found changes"},
		{agreement{dice: [2]float64{0.9, 0.9}, unmatched: [2]int{0, 1}}, "", "1 of the drusen regions found is not found again"},
		{agreement{dice: [2]float64{0.5, 0.9}, unmatched: [2]int{1, 0}}, "the fluid found changes", ""},
		{agreement{dice: [2]float64{1, 1}, flat: [2]int{2, 1}}, "2 of the fluid regions found lie in one B-scan only", "1 of the drusen regions found lies in one B-scan only"},
	} {
		for kind, want := range []string{c.wantFluid, c.wantDr} {
			got := lesionVerdict(c.ag, kind)
			if want == "" && got != "" || want != "" && !strings.HasPrefix(got, want) {
				t.Errorf("%+v, kind %d: %q, want %q", c.ag, kind, got, want)
			}
		}
	}
}

// TestAKindFoundUnsteadilyWithholdsThatKind: unsteady drusen withhold
// the drusen and leave the fluid reported (a real DME scan's cysts were
// hidden by drusen found unsteadily where the retina left the image),
// and the other way round; both unsteady, or a streak of either kind,
// withhold every lesion.
func TestAKindFoundUnsteadilyWithholdsThatKind(t *testing.T) {
	for _, c := range []struct {
		ag   agreement
		want string
	}{
		{agreement{dice: [2]float64{1, 1}}, ""},
		{agreement{dice: [2]float64{0.95, 0.5}}, FigureDrusen},
		{agreement{dice: [2]float64{0.95, 0.9}, unmatched: [2]int{0, 1}}, FigureDrusen},
		{agreement{dice: [2]float64{0.6, 0.9}}, FigureFluid},
		{agreement{dice: [2]float64{0.6, 0.5}}, FigureLesions},
		{agreement{dice: [2]float64{1, 1}, flat: [2]int{0, 1}}, FigureLesions},
		{agreement{dice: [2]float64{1, 1}, flat: [2]int{1, 0}}, FigureLesions},
	} {
		figure, why := lesionWithholding(c.ag)
		if figure != c.want || (why == "") != (c.want == "") {
			t.Errorf("%+v: withholds %q (%q), want %q", c.ag, figure, why, c.want)
		}
	}
}

// TestLesionsAreReportedOnlyWhereTwoDenoisingsAgree runs the lesion
// agreement check on phantom lines in the unit pass (the full-size
// accuracy run, which -short skips, catches it too, minutes later): a
// line whose two denoisings agree on its lesions reports them, one where
// a kind's Dice falls to nothing or a lesion comes and goes withholds
// them, with the reason. Each fixture is checked to sit where it should
// before the verdict is (the threshold itself is pinned by
// TestLesionsAreWithheldUnderTheAgreementTheyNeed).
func TestLesionsAreReportedOnlyWhereTwoDenoisingsAgree(t *testing.T) {
	const need = 0.8 // the test's own copy of the calibrated agreement
	for _, c := range []struct {
		seed       uint64
		frame      int
		sigma      float64
		noise      uint64
		lo, hi     float64 // where the fixture's lesser Dice lies
		unmatched  bool    // a lesion is not found again
		wantReason string  // "": the lesions are reported
	}{
		{4, 3, 0.04, 18, need, 0.9, false, ""},                   // drusen 0.887
		{5, 2, 0.04, 5, 0, 0.5, true, "the fluid found changes"}, // fluid 0.00
		{4, 3, 0.08, 18, need, 1, true, "not found again"},       // fluid 0.919; one region comes and goes
	} {
		name := fmt.Sprintf("phantom %d B-scan %d σ %.2f noise %d", c.seed, c.frame, c.sigma, c.noise)
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w, _ := Normalize(lesionLine(t, c.seed, c.frame, c.sigma, c.noise))
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
			// The fixture: what the check sees.
			alt, err := Denoise(ctx, den, DenoiseOptions{Strength: altStrength})
			if err != nil {
				t.Fatal(err)
			}
			again, err := SegmentLayers(ctx, alt)
			if err != nil {
				t.Fatal(err)
			}
			ag, err := lesionAgreement(ctx, den, alt, l, again, a.Quality.Mask)
			if err != nil {
				t.Fatal(err)
			}
			fluid, drusen := ag.dice[kindFluid], ag.dice[kindDrusen]
			unmatched, flat := ag.unmatched[kindFluid]+ag.unmatched[kindDrusen], ag.flat[kindFluid]+ag.flat[kindDrusen]
			worst := min(fluid, drusen)
			if worst < c.lo || worst >= c.hi || (unmatched > 0) != c.unmatched || flat != 0 {
				t.Fatalf("test fixture drifted (the stages changed): Dice fluid %.3f, drusen %.3f, %d unmatched, %d flat; want the lesser in [%.2f, %.2f), unmatched %v: choose another line",
					fluid, drusen, unmatched, flat, c.lo, c.hi, c.unmatched)
			}
			got := a.LesionKindWithheld(IntraretinalFluid) + a.LesionKindWithheld(Drusen)
			switch {
			case c.wantReason == "" && got != "":
				t.Errorf("lesions withheld although both denoisings agree (Dice fluid %.3f, drusen %.3f, %.1f needed; every lesion found again): %q", fluid, drusen, need, got)
			case c.wantReason != "" && got == "":
				t.Errorf("lesions reported although the two denoisings disagree (Dice fluid %.3f, drusen %.3f, %.1f needed; %d lesions not found again): noise, not the eye, decides what is found",
					fluid, drusen, need, unmatched)
			case c.wantReason != "" && !strings.Contains(got, c.wantReason):
				t.Errorf("lesions withheld for %q, want the disagreement (%q) named", got, c.wantReason)
			}
		})
	}
}
