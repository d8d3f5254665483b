package imaging

import (
	"slices"
	"testing"
)

// TestACirclesRNFLIsPairedAlongTheBScan: where both partners of the
// strongest inner edge are faint and their strengths cross back and
// forth from A-scan to A-scan, RNFL/GCL does not hop between them; it
// moves from the strongest edge to the one above only once, where the
// evidence turns for good.
func TestACirclesRNFLIsPairedAlongTheBScan(t *testing.T) {
	const rows, cols = 120, 200
	const strongestRow, aboveRow, belowRow = 60, 48, 72
	s := newFrameSegmenter(rows, cols, Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120})
	strongest, above, below := s.scratch(0), s.scratch(1), s.scratch(2)
	set := func(r, c int, strength float32) { s.pf.grad[r*cols+c] = -strength }
	for c := range cols {
		strongest[c], above[c], below[c] = strongestRow, aboveRow, belowRow
		set(strongestRow, c, 1)
		// The partner below is stronger on average over the first half,
		// the one above over the second, but in four A-scans of every ten the
		// other way round.
		hi, lo := float32(0.5), float32(0.15)
		if c%10 < 4 {
			hi, lo = 0.15, 0.45
		}
		if c < cols/2 {
			set(belowRow, c, hi)
			set(aboveRow, c, lo)
		} else {
			set(aboveRow, c, hi)
			set(belowRow, c, lo)
		}
	}
	s.pairAlong(strongest, above, below)
	flips := 0
	for c := 1; c < cols; c++ {
		if s.nfl[c] != s.nfl[c-1] {
			flips++
		}
	}
	if flips != 1 {
		t.Errorf("RNFL/GCL changed partner %d times along the B-scan, want once", flips)
	}
	for c := range cols {
		want, wantIPL := strongestRow, belowRow
		if c >= cols/2 {
			want, wantIPL = aboveRow, strongestRow
		}
		if c > cols/2-4 && c < cols/2+4 {
			continue // where it turns
		}
		if s.nfl[c] != want || s.iplinl[c] != wantIPL {
			t.Fatalf("A-scan %d: RNFL/GCL at %d and IPL/INL at %d, want %d and %d", c, s.nfl[c], s.iplinl[c], want, wantIPL)
		}
	}
}

// TestAFaintRNFLIsReliableOnlyInAClearBScan: a circle's RNFL/GCL
// supported at a contrast-to-noise ratio between faintRNFLMinCNR and
// minCNRFor is called reliable between two A-scans already reliable
// within reach on either side, where the B-scan's RNFL/GCL is reliable
// over clearRNFLShare of the A-scans outside the shadows, and nowhere
// else: not under the ratio, not unsupported, not in a shadow, not with
// a reliable A-scan within reach on one side only, and not in a B-scan
// whose boundary is faint all over (a weak signal).
func TestAFaintRNFLIsReliableOnlyInAClearBScan(t *testing.T) {
	const cols, reach = 100, 5
	for _, c := range []struct {
		name      string
		clearTail bool // A-scans 82–94 reliable before: 49 of the 95 outside the shadows, else 36
		want      bool
	}{
		{"a clear B-scan", true, true},
		{"a faint B-scan", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, sure, cnr, shadow := make([]bool, cols), make([]bool, cols), make([]float64, cols), make([]bool, cols)
			for i := range cols {
				shadow[i] = i >= 95
				ok[i] = true
				switch {
				case i <= 70 && i%2 == 0, i >= 82 && i < 95 && c.clearTail:
					sure[i], cnr[i] = true, 9
				default: // faint: between reliable A-scans up to 70, a run of 11 from 71 to 81
					cnr[i] = faintRNFLMinCNR
				}
				if shadow[i] {
					cnr[i] = 6
				}
			}
			ok[65], cnr[65] = false, 6 // unsupported
			cnr[67] = faintRNFLMinCNR - 0.01
			faintRNFLReliable(ok, sure, cnr, shadow, cols, reach)
			for i := range cols {
				want := i <= 70 && i%2 == 0 || i >= 82 && i < 95 && c.clearTail
				if i < 70 && i%2 == 1 && i != 65 && i != 67 {
					want = c.want
				}
				if sure[i] != want {
					t.Errorf("A-scan %d (contrast-to-noise ratio %.2f, supported %v, in a shadow %v): reliable %v, want %v", i, cnr[i], ok[i], shadow[i], sure[i], want)
				}
			}
		})
	}
}

// TestAFaintRNFLIsAnchoredAcrossAVesselsShadow: the reliable A-scans a
// faint RNFL/GCL needs on either side may lie beyond a vessel's shadow
// (which the RNFL bridges), counted in A-scans outside it.
func TestAFaintRNFLIsAnchoredAcrossAVesselsShadow(t *testing.T) {
	const cols, reach = 100, 5
	ok, sure, cnr, shadow := make([]bool, cols), make([]bool, cols), make([]float64, cols), make([]bool, cols)
	for i := range cols {
		ok[i], shadow[i] = true, i >= 50 && i < 60
		sure[i], cnr[i] = true, 9
		if i == 49 || i == 60 || shadow[i] {
			sure[i], cnr[i] = false, faintRNFLMinCNR
		}
	}
	faintRNFLReliable(ok, sure, cnr, shadow, cols, reach)
	for _, i := range []int{49, 60} {
		if !sure[i] {
			t.Errorf("A-scan %d, faint between reliable A-scans on either side of a shadow: not called reliable", i)
		}
	}
	for i := 50; i < 60; i++ {
		if sure[i] {
			t.Errorf("A-scan %d, in the shadow: called reliable", i)
		}
	}
}

// TestAFaintRNFLTheBridgeConfirmsIsReliable: in a clear B-scan, a
// supported, steady RNFL/GCL outside the shadows whose thickness lies
// within bridgeAgreeUm of the straight bridge between the A-scans
// reliable by their contrast on either side is called reliable, however
// far those are; one that strays from the bridge, moved under the second
// denoising, is unsupported or lies in a shadow is not, and nothing is
// in a B-scan whose RNFL/GCL is faint all over.
func TestAFaintRNFLTheBridgeConfirmsIsReliable(t *testing.T) {
	const cols = 100
	// A-scans 0–39 reliable by their contrast, 60–99 too in a clear
	// B-scan (75 of the 95 outside the shadows), else 41 of 95; the
	// thickness falls from 100 µm at A-scan 39 to 80 µm at 60, and the
	// stretch between follows that bridge.
	cases := []struct {
		name     string
		at       int
		thick    float64 // µm
		movedUm  float64
		ok       bool
		shadowed bool
		clear    bool
		want     bool
	}{
		{"on the bridge", 45, 100 - 20*6.0/21, 0, true, false, true, true},
		{"within the agreement", 50, 100 - 20*11.0/21 + bridgeAgreeUm - 0.1, 1, true, false, true, true},
		{"strays from the bridge", 50, 100 - 20*11.0/21 + bridgeAgreeUm + 0.1, 0, true, false, true, false},
		{"moved under the second denoising", 45, 100 - 20*6.0/21, bridgeSteadyUm + 0.1, true, false, true, false},
		{"unsupported", 45, 100 - 20*6.0/21, 0, false, false, true, false},
		{"in a shadow", 45, 100 - 20*6.0/21, 0, true, true, true, false},
		{"in a faint B-scan", 45, 100 - 20*6.0/21, 0, true, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, sure, shadow := make([]bool, cols), make([]bool, cols), make([]bool, cols)
			moved, thick := make([]float64, cols), make([]float64, cols)
			for i := range cols {
				ok[i], shadow[i] = true, i >= 95
				sure[i] = !shadow[i] && (i < 40 || i >= 60 && (c.clear || i >= 94))
				switch {
				case i < 40:
					thick[i] = 100
				case i >= 60:
					thick[i] = 80
				default:
					thick[i] = 100 - 20*float64(i-39)/21 + 30 // strays, but for the A-scan tested
				}
			}
			thick[c.at], moved[c.at], ok[c.at], shadow[c.at] = c.thick, c.movedUm, c.ok, c.shadowed
			if c.shadowed {
				sure[c.at] = false
			}
			base := slices.Clone(sure)
			bridged := bridgedRNFLReliable(ok, sure, base, moved, thick, shadow, cols)
			for i := range cols {
				if want := i == c.at && c.want; bridged[i] != want {
					t.Errorf("A-scan %d: told as called reliable by the bridge %v, want %v", i, bridged[i], want)
				}
				want := base[i] || i == c.at && c.want
				if sure[i] != want {
					t.Errorf("A-scan %d (thickness %.1f µm, moved %.1f µm, supported %v, in a shadow %v): reliable %v, want %v", i, thick[i], moved[i], ok[i], shadow[i], sure[i], want)
				}
			}
		})
	}
}

// TestTheBridgeIsBetweenTheAnchorsOfTheirContrast: the bridge runs
// between the A-scans reliable by their contrast (base), not those a
// faint stretch made reliable before it; around the circle, across its
// first A-scan; and in each B-scan of a volume between that B-scan's own
// anchors.
func TestTheBridgeIsBetweenTheAnchorsOfTheirContrast(t *testing.T) {
	const cols = 100
	t.Run("not from an A-scan called reliable as faint", func(t *testing.T) {
		ok, sure, shadow, moved, thick := make([]bool, cols), make([]bool, cols), make([]bool, cols), make([]float64, cols), make([]float64, cols)
		for i := range cols {
			ok[i], sure[i], thick[i] = true, i < 40 || i >= 60, 100
		}
		base := slices.Clone(sure)
		sure[42], thick[42] = true, 130 // reliable as faint, off the bridge
		bridgedRNFLReliable(ok, sure, base, moved, thick, shadow, cols)
		if !sure[45] {
			t.Error("A-scan 45, on the bridge between A-scans 39 and 60: not called reliable")
		}
	})
	t.Run("across the circle's first A-scan", func(t *testing.T) {
		ok, sure, shadow, moved, thick := make([]bool, cols), make([]bool, cols), make([]bool, cols), make([]float64, cols), make([]float64, cols)
		for i := range cols {
			ok[i], sure[i] = true, i >= 10 && i < 90
			thick[i] = 100
			if i >= 90 || i < 10 {
				thick[i] = 140 // off any bridge, for all but the A-scan tested
			}
		}
		thick[10], thick[89] = 80, 120
		thick[0] = 120 - 40*11.0/21 // on the bridge from A-scan 89 (120 µm) to 10 (80 µm), 11 A-scans along it
		base := slices.Clone(sure)
		bridgedRNFLReliable(ok, sure, base, moved, thick, shadow, cols)
		for i := range cols {
			if want := base[i] || i == 0; sure[i] != want {
				t.Errorf("A-scan %d (%.1f µm): reliable %v, want %v", i, thick[i], sure[i], want)
			}
		}
	})
	t.Run("each B-scan between its own anchors", func(t *testing.T) {
		n := 2 * cols
		ok, sure, shadow, moved, thick := make([]bool, n), make([]bool, n), make([]bool, n), make([]float64, n), make([]float64, n)
		for i := range n {
			c := i % cols
			ok[i], sure[i] = true, c < 40 || c >= 60
			thick[i] = 100 + 50*float64(i/cols) // 100 µm in the first B-scan, 150 in the second
		}
		thick[45], thick[cols+45] = 150, 100 // each on the other B-scan's bridge
		base := slices.Clone(sure)
		bridgedRNFLReliable(ok, sure, base, moved, thick, shadow, cols)
		for _, i := range []int{45, cols + 45} {
			if sure[i] {
				t.Errorf("A-scan %d of B-scan %d, %.0f µm on a bridge of %.0f µm: called reliable", i%cols, i/cols, thick[i], thick[i-45])
			}
		}
		if !sure[46] || !sure[cols+46] {
			t.Error("the A-scans on their own B-scan's bridge: not called reliable")
		}
	})
}

// TestASectorIsJudgedOnTheContrastsOwnEvidence: the circle's figures are
// judged on RNFL/GCL where its contrast calls it reliable; an A-scan the
// bridge alone confirms counts as bridged there, and nothing else changes.
func TestASectorIsJudgedOnTheContrastsOwnEvidence(t *testing.T) {
	rel := map[string][]bool{ILM: {true, true, true, true}, RNFLGCL: {true, true, false, true}}
	bridged := []bool{false, true, false, false}
	got := sectorEvidence(rel, bridged)
	if want := []bool{true, false, false, true}; !slices.Equal(got[RNFLGCL], want) {
		t.Errorf("RNFL/GCL judged on %v, want %v", got[RNFLGCL], want)
	}
	if !slices.Equal(got[ILM], rel[ILM]) || !slices.Equal(rel[RNFLGCL], []bool{true, true, false, true}) {
		t.Errorf("the ILM judged on %v (was %v), the evidence itself now %v", got[ILM], rel[ILM], rel[RNFLGCL])
	}
	if same := sectorEvidence(rel, nil); !slices.Equal(same[RNFLGCL], rel[RNFLGCL]) {
		t.Errorf("with none bridged, RNFL/GCL judged on %v", same[RNFLGCL])
	}
}

// TestASectorIsNotReportedOnTheBridgesWordAlone: in a clear circle
// (RNFL/GCL reliable by its contrast in 90% of the A-scans), sector TS is
// reliable by its contrast in only a fifth of its A-scans and the bridge
// alone confirms the rest (bridgedRNFLReliable, on the same evidence as
// judgeBoundaries gives it). vouch judges the sector on its contrast's
// own evidence (sectorEvidence): TS is withheld for its 20%, under the
// 45% a sector needs, while the RNFL global and the other sectors are
// reported. Counting the bridge-confirmed A-scans, TS would be reported.
func TestASectorIsNotReportedOnTheBridgesWordAlone(t *testing.T) {
	const n = 768 // one B-scan; sector TS is A-scans 96–191 (45°–90°)
	v := NewVolume(1, 64, n, Spacing{AxialUm: 3.9, LateralUm: 14})
	v.Pattern = Circle
	all, shadow := make([]bool, n), make([]bool, n)
	sure, moved, thick := make([]bool, n), make([]float64, n), make([]float64, n)
	for i := range n {
		all[i] = true
		sure[i] = rnflSector(360*float64(i)/n) != "TS" || i%5 == 0
		thick[i] = 23.4 // the bridge's own course: every unclear A-scan agrees with it
	}
	base := slices.Clone(sure)
	bridged := bridgedRNFLReliable(all, sure, base, moved, thick, shadow, n)
	var inTS, clearTS, bridgedTS int
	for i := range n {
		if rnflSector(360*float64(i)/n) == "TS" {
			inTS++
			if base[i] {
				clearTS++
			}
			if bridged[i] {
				bridgedTS++
			}
		}
	}
	if clearTS+bridgedTS != inTS {
		t.Fatalf("sector TS: %d of %d A-scans reliable by contrast, %d bridge-confirmed; want the bridge to confirm the rest", clearTS, inTS, bridgedTS)
	}
	l := &Layers{Frames: 1, Cols: n, Boundaries: map[string][]float32{}}
	for k, name := range BoundaryNames {
		l.Boundaries[name] = make([]float32, n)
		for i := range n {
			l.Boundaries[name][i] = float32(10 + 6*k) // RNFL/GCL 6 rows (23.4 µm) under the ILM
		}
	}
	a := &Analysis{Pattern: Circle, Quality: Quality{Gradable: Gradable, SignalStrength: 9, GradableFraction: 1, Mask: all},
		Figures: &RNFLMeasurements{GlobalUm: 23.4, Sectors: map[string]float64{}},
		evidence: boundaryEvidence{supported: map[string][]bool{ILM: all, RNFLGCL: all},
			reliable: map[string][]bool{ILM: all, RNFLGCL: sure}, bridged: bridged}}
	for _, s := range RNFLSectors {
		a.rnfl().Sectors[s] = 23.4
	}
	a.vouch(v, l, l, a.evidence.reliable, all, shadow)
	if a.rnfl() == nil {
		t.Fatalf("the RNFL thickness withheld on a clear circle: %+v", a.Withheld)
	}
	why := map[string]string{}
	for _, w := range a.Withheld {
		why[w.Figure] = w.Reason
	}
	want := unreliableReason(RNFLGCL, float64(clearTS)/float64(inTS), minOwnSectorShare, "of sector TS")
	if got := why[FigureRNFLSector+"TS"]; got != want {
		t.Errorf("sector TS withheld for %q, want %q (reported: %v)", got, want, a.rnfl().Sectors)
	}
	for _, s := range RNFLSectors {
		if _, ok := a.rnfl().Sectors[s]; ok == (s == "TS") {
			t.Errorf("sector %s reported %v, want %v", s, ok, s != "TS")
		}
	}
	if why[FigureRNFLGlobal] != "" {
		t.Errorf("the RNFL global withheld: %q", why[FigureRNFLGlobal])
	}
}
