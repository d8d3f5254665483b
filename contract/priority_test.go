package contract

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"octflow/exam"
)

func TestAFairnessKeyNamesBucketAndCampusWithinTemporalsBound(t *testing.T) {
	long := strings.Repeat("a", 62) // the longest campus names allowed
	for _, tc := range []struct {
		bucket exam.Priority
		campus string
		want   string // "": a key of its own, checked below
	}{
		{exam.Urgent, "north", "urgent"},
		{exam.Urgent, long + "b", "urgent"},
		{exam.Normal, "x", "normal/x"},
		{exam.Low, "south", "low/south"},
		{exam.Low, long + "b", ""},
		{exam.Normal, long + "b", ""},
		{exam.Normal, strings.Repeat("z", 57), "normal/" + strings.Repeat("z", 57)},
		{exam.Normal, strings.Repeat("z", 58), ""},
	} {
		key := FairnessKey(tc.bucket, tc.campus)
		if tc.want != "" && key != tc.want {
			t.Errorf("%s, campus of %d bytes: key %q, want %q", tc.bucket, len(tc.campus), key, tc.want)
		}
		if len(key) > maxFairnessKey {
			t.Errorf("%s, campus of %d bytes: key %q is %d bytes, over Temporal's %d", tc.bucket, len(tc.campus), key, len(key), maxFairnessKey)
		}
		if got := BucketOfKey(key); got != tc.bucket {
			t.Errorf("key %q reads as bucket %q, want %q", key, got, tc.bucket)
		}
	}
	// Two long campus names that share their first bytes keep keys of
	// their own, or one would take the other's turns.
	if a, b := FairnessKey(exam.Normal, long+"b"), FairnessKey(exam.Normal, long+"c"); a == b {
		t.Errorf("two campuses share the key %q", a)
	}
	for _, tc := range []struct {
		key  string
		want exam.Priority
	}{
		{"normal", exam.Normal}, // the bucket alone
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

// The weights keep the buckets' shares while every campus waits in every
// bucket, never let the urgent bucket's share shrink below the policy's
// when more campuses wait in the others, and stay where Temporal's stride
// (1000 ÷ weight, whole numbers, weights below 0.001 counted as 0.001)
// tells them apart.
func TestTaskWeightsKeepTheBucketsSharesAndUrgentsWhateverTheCampuses(t *testing.T) {
	pol := exam.DefaultPolicy()
	for _, n := range []int{1, 3, 10, 100} {
		campuses := make([]string, n)
		for i := range campuses {
			campuses[i] = fmt.Sprintf("c%d", i)
		}
		// Every campus waiting in every bucket: the keys of a bucket add
		// up to its share.
		total := map[exam.Priority]float64{}
		for _, c := range campuses {
			exams := pol.ForCampus(c, campuses)
			for _, b := range []exam.Priority{exam.Normal, exam.Low} {
				total[b] += float64(TaskPriority(exams, b, c).FairnessWeight)
			}
		}
		total[exam.Urgent] = float64(TaskPriority(pol.ForCampus("c0", campuses), exam.Urgent, "c0").FairnessWeight)
		sum := total[exam.Urgent] + total[exam.Normal] + total[exam.Low]
		for b, want := range map[exam.Priority]float64{exam.Urgent: 0.60, exam.Normal: 0.35, exam.Low: 0.05} {
			if got := total[b] / sum; math.Abs(got-want) > 0.001 {
				t.Errorf("%d campuses all waiting: %s gets %.3f of the weight, want %.2f", n, b, got, want)
			}
		}
		// One campus waiting in normal and low: urgent gets at least
		// its share.
		one := pol.ForCampus("c0", campuses)
		u, nw, l := TaskPriority(one, exam.Urgent, "c0").FairnessWeight, TaskPriority(one, exam.Normal, "c0").FairnessWeight, TaskPriority(one, exam.Low, "c0").FairnessWeight
		if got := u / (u + nw + l); got < 0.6-1e-6 {
			t.Errorf("%d campuses, one waiting: urgent gets %.3f of the weight, want at least 0.60", n, got)
		}
		if r := nw / l; math.Abs(float64(r)-7) > 0.01 {
			t.Errorf("%d campuses: normal/low weight ratio %.3f, want 7 (35/5)", n, r)
		}
		for _, w := range []float32{u, nw, l} {
			if w > weightScale || (n <= 100 && w < 0.005) {
				t.Errorf("%d campuses: weight %v outside [0.005, %d]", n, w, weightScale)
			}
		}
	}
	if s := SystemPriority().FairnessWeight; s <= weightScale {
		t.Errorf("octflow's own workflows weigh %v, want more than any exam can (%d)", s, weightScale)
	}
	// A campus alone in its buckets (the default policy's share) gets
	// each bucket's whole weight.
	for b, want := range map[exam.Priority]float32{exam.Urgent: 60, exam.Normal: 35, exam.Low: 5} {
		if got := TaskPriority(exam.DefaultPolicy(), b, "north").FairnessWeight; math.Abs(float64(got-want)) > 1e-4 {
			t.Errorf("a campus alone in %s weighs %v, want %v", b, got, want)
		}
	}
}
