package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"octflow/contract"
	"octflow/exam"
	"octflow/lifecycle"
)

func TestParseMixWantsThreePercentagesOf100(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]int
	}{
		{"10/60/30", map[string]int{"urgent": 10, "normal": 60, "low": 30}},
		{"0/100/0", map[string]int{"urgent": 0, "normal": 100, "low": 0}},
		{"10/60/20", nil},
		{"50/60/-10", nil},
		{"urgent", nil},
	}
	for _, c := range cases {
		got, err := ParseMix(c.in)
		if (err != nil) != (c.want == nil) {
			t.Errorf("ParseMix(%q) error %v", c.in, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("ParseMix(%q)[%s] = %d, want %d", c.in, k, got[k], v)
			}
		}
	}
}

func TestACampusMixIsOnePercentagePerCampusAndDrawnAsSaid(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want []int
	}{
		{"80/15/5", 3, []int{80, 15, 5}},
		{"", 3, nil},
		{"50/50", 3, nil},    // a campus without its share
		{"80/15/15", 3, nil}, // over 100
		{"80/x/20", 3, nil},
		{"110/-10", 2, nil},
	} {
		got, err := ParseCampusMix(c.in, c.n)
		if ok := err == nil; ok != (c.want != nil || c.in == "") || !slices.Equal(got, c.want) {
			t.Errorf("ParseCampusMix(%q, %d) = %v, %v; want %v", c.in, c.n, got, err, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	count := make([]int, 3)
	for range 10000 {
		count[drawCampus(rng, []int{80, 15, 5}, 3)]++
	}
	for i, want := range []float64{8000, 1500, 500} {
		if math.Abs(float64(count[i])-want) > 4*math.Sqrt(want) {
			t.Errorf("campus %d drew %d of 10,000, want about %.0f", i, count[i], want)
		}
	}
	for range 100 {
		if i := drawCampus(rng, nil, 3); i < 0 || i > 2 {
			t.Fatalf("drew campus %d of 3", i)
		}
	}
}

func TestGPULoadSplitsHeldAndWaitingTimeOverTheWindows(t *testing.T) {
	start := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	tl := []lifecycle.Entry{
		{At: at(1), To: lifecycle.Created},
		{At: at(2), To: lifecycle.Queued, Stage: exam.Denoise},    // waits 2 → 6
		{At: at(6), To: lifecycle.Executing, Stage: exam.Denoise}, // not a wait
		{At: at(16), To: lifecycle.Queued, Stage: exam.Layers},    // waits 16 → 17
		{At: at(17), To: lifecycle.Claimed, Stage: exam.Layers},   // on its node 17 → 19
		{At: at(19), To: lifecycle.Executing, Stage: exam.Layers},
		{At: at(21), To: lifecycle.RetryWait, Stage: exam.Layers}, // not a wait for a GPU
		{At: at(25), To: lifecycle.Queued, Stage: exam.Render},    // a CPU stage
		{At: at(29), To: lifecycle.Completed},
	}
	held := []contract.Span{{From: at(6), To: at(15)}, {From: at(25), To: at(25.5)}}
	got := gpuLoad(nil, start, held, tl)
	want := []StageLoad{{GPUsBusy: 0.4, Waiting: 0.4}, {GPUsBusy: 0.5, Waiting: 0.3}, {GPUsBusy: 0.05}}
	if len(got) != len(want) {
		t.Fatalf("load %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i].GPUsBusy-want[i].GPUsBusy) > 1e-9 || math.Abs(got[i].Waiting-want[i].Waiting) > 1e-9 {
			t.Errorf("window %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := heldGPUSeconds(got); math.Abs(s-9.5) > 1e-9 {
		t.Errorf("held %v GPU-s, want 9.5", s)
	}
	// A second exam adds to the same windows.
	if got = gpuLoad(got, start, held, tl); math.Abs(got[1].GPUsBusy-1.0) > 1e-9 {
		t.Errorf("two exams: window 1 held %v GPUs, want 1", got[1].GPUsBusy)
	}
}
