package api

import (
	"slices"
	"strings"
	"testing"
	"time"

	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/exam"
)

// A campus shares the normal and low buckets while it sends exams: one
// that has sent none for campusWindow takes no part of them.
func TestACampusSharesTheBucketsOnlyWhileItSendsExams(t *testing.T) {
	a := newCampusActivity()
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		campus string
		at     time.Duration
		want   []string
	}{
		{"north", 0, []string{"north"}},
		{"south", time.Minute, []string{"north", "south"}},
		{"north", 20 * time.Minute, []string{"north", "south"}},
		{"west", 31*time.Minute + time.Second, []string{"north", "west"}}, // south's last exam: 30 min 1 s ago
		{"west", 50*time.Minute + time.Second, []string{"west"}},          // north's: 30 min 1 s ago
		{"south", 50*time.Minute + 2*time.Second, []string{"south", "west"}},
	} {
		if got := a.sharing(step.campus, t0.Add(step.at)); !slices.Equal(got, step.want) {
			t.Errorf("%s sends at +%s: sharing %v, want %v", step.campus, step.at, got, step.want)
		}
	}
	// An exam's part follows: alone, the whole bucket; with one more
	// campus of weight 3, a quarter.
	s := &Server{cfg: Config{Policy: exam.DefaultPolicy()}, sharing: newCampusActivity()}
	s.cfg.Policy.CampusWeights = map[string]float32{"south": 3}
	if p := s.policyFor("north"); p.CampusShare != 1 || p.CampusWeights != nil {
		t.Errorf("north alone: part %v, weights %v; want 1, none", p.CampusShare, p.CampusWeights)
	}
	s.policyFor("south")
	if p := s.policyFor("north"); p.CampusShare != 0.25 {
		t.Errorf("north beside south (weight 3): part %v, want 0.25", p.CampusShare)
	}
}

// A campus weight must name a campus that uploads: a misspelt one would
// otherwise weigh nothing, silently.
func TestACampusWeightForNoUploadingCampusIsRefused(t *testing.T) {
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("dev-a"), Principal: auth.Principal{Name: "a", Role: auth.RoleDevice, DeviceID: "oct-a", Campus: "north"}},
		{SHA256: auth.HashToken("clin"), Principal: auth.Principal{Name: "c", Role: auth.RoleClinician, Campus: "east"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		weights map[string]float32
		refused string
	}{
		{map[string]float32{"north": 2}, ""},
		{map[string]float32{"north": 2, "nrth": 2}, "nrth"},
		{map[string]float32{"east": 2}, "east"}, // a clinician's campus sends nothing
	} {
		pol := exam.DefaultPolicy()
		pol.CampusWeights = tc.weights
		_, err := New(Config{Policy: pol, Tokens: tokens, Pseudonymizer: intake.NewPseudonymizer([]byte("0123456789abcdef"))})
		switch {
		case tc.refused == "" && err != nil && strings.Contains(err.Error(), "campus weights"):
			t.Errorf("weights %v refused: %v", tc.weights, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("weights %v: %v, want a refusal naming %s", tc.weights, err, tc.refused)
		}
	}
}
