package contract

import (
	"strings"
	"testing"

	"octflow/exam"
)

func TestAFairnessKeyNamesBucketAndCampusWithinTemporalsBound(t *testing.T) {
	long := strings.Repeat("a", 62) // the longest campus names allowed
	for _, tc := range []struct {
		bucket exam.Priority
		campus string
	}{
		{exam.Urgent, "north"},
		{exam.Normal, "x"},
		{exam.Low, long + "b"},
		{exam.Urgent, long + "b"},
		{exam.Urgent, long + "c"},
		{exam.Normal, strings.Repeat("z", 57)},
		{exam.Urgent, strings.Repeat("z", 58)},
	} {
		key := FairnessKey(tc.bucket, tc.campus)
		if len(key) > maxFairnessKey {
			t.Errorf("%s/%d-byte campus: key %q is %d bytes, over Temporal's %d", tc.bucket, len(tc.campus), key, len(key), maxFairnessKey)
		}
		if got := BucketOfKey(key); got != tc.bucket {
			t.Errorf("key %q reads as bucket %q, want %q", key, got, tc.bucket)
		}
	}
	// Two long campus names that share their first bytes keep keys of
	// their own, or one would take the other's turns.
	if a, b := FairnessKey(exam.Urgent, long+"b"), FairnessKey(exam.Urgent, long+"c"); a == b {
		t.Errorf("two campuses share the key %q", a)
	}
	for _, tc := range []struct {
		key  string
		want exam.Priority
	}{
		{"normal", exam.Normal}, // the first form: the bucket alone
		{"low/south", exam.Low},
		{SystemFairnessKey, ""},
		{"", ""},
		{"urgentish/north", ""},
	} {
		if got := BucketOfKey(tc.key); got != tc.want {
			t.Errorf("BucketOfKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// The weights keep the buckets' ratio for every campus, a campus's weight
// scales all three of its keys alike, and every weight stays where
// Temporal's stride (1000/weight, whole numbers) tells them apart to
// within a percent and above its floor of 0.001.
func TestTaskWeightsKeepTheBucketsRatioForEveryCampusWeight(t *testing.T) {
	pol := exam.DefaultPolicy()
	pol.CampusWeights = map[string]float32{"heavy": exam.MaxCampusWeight, "light": exam.MinCampusWeight}
	for _, campus := range []string{"heavy", "light", "unlisted"} {
		u := TaskPriority(pol, exam.Urgent, campus).FairnessWeight
		n := TaskPriority(pol, exam.Normal, campus).FairnessWeight
		l := TaskPriority(pol, exam.Low, campus).FairnessWeight
		if r := u / l; r < 11.9 || r > 12.1 {
			t.Errorf("%s: urgent/low weight ratio %.2f, want 12 (60/5)", campus, r)
		}
		if r := n / l; r < 6.9 || r > 7.1 {
			t.Errorf("%s: normal/low weight ratio %.2f, want 7 (35/5)", campus, r)
		}
		for _, w := range []float32{u, n, l} {
			if w > 10 || w < 0.005 {
				t.Errorf("%s: weight %v outside [0.005, 10]", campus, w)
			}
		}
	}
	if h, u := TaskPriority(pol, exam.Normal, "heavy").FairnessWeight, TaskPriority(pol, exam.Normal, "unlisted").FairnessWeight; h != 10*u {
		t.Errorf("a campus of weight 10: %v, want ten times an unlisted campus's %v", h, u)
	}
	if s := SystemPriority().FairnessWeight; s < 100*TaskPriority(pol, exam.Urgent, "heavy").FairnessWeight {
		t.Errorf("octflow's own workflows weigh %v, want at least a hundred times any exam's", s)
	}
}
