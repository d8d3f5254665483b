package gpuworker

import (
	"testing"
	"time"
)

// The breaker opens exactly when the failure rate of its window reaches
// the threshold with enough samples, and not one failure before.
func TestTheBreakerOpensExactlyAtTheThresholdAndNotOneFailureBefore(t *testing.T) {
	cases := []struct {
		name   string
		cfg    BreakerConfig
		before []bool // outcomes that must leave it closed (true = failed)
		last   bool   // the outcome that opens it
	}{
		{
			// 4 of 9 failed is under 0.5; the 10th outcome, a failure,
			// makes it 5 of 10.
			name:   "rate reached by the last failure",
			cfg:    BreakerConfig{Window: 10, MinSamples: 4, FailureRate: 0.5},
			before: []bool{false, false, false, false, false, true, true, true, true},
			last:   true,
		},
		{
			// 3 of 4 at 0.75: opens on the failure that reaches 0.75
			// exactly, not the one before (2 of 3, 0.67).
			name:   "a higher threshold",
			cfg:    BreakerConfig{Window: 4, MinSamples: 4, FailureRate: 0.75},
			before: []bool{true, false, true},
			last:   true,
		},
		{
			// Every outcome failed but there are too few of them until
			// the minimum is reached.
			name:   "the minimum number of samples",
			cfg:    BreakerConfig{Window: 10, MinSamples: 4, FailureRate: 0.5},
			before: []bool{true, true, true},
			last:   true,
		},
		{
			// A full window of 10 in which 4 failed slides on: a success
			// drops off the front as a failure joins, 5 of 10.
			name:   "a sliding window",
			cfg:    BreakerConfig{Window: 10, MinSamples: 4, FailureRate: 0.5},
			before: []bool{false, false, false, false, false, false, true, true, true, true},
			last:   true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
			cfg := c.cfg
			cfg.Now = clock.now
			b := NewBreaker(cfg)
			for i, failed := range c.before {
				b.Record(failed)
				if !b.Allow() || b.Status().State != BreakerClosed {
					t.Fatalf("opened after outcome %d of %v: %+v", i+1, c.before, b.Status())
				}
			}
			b.Record(c.last)
			if b.Allow() || b.Status().State != BreakerOpen {
				t.Fatalf("still closed at the threshold: %+v", b.Status())
			}
		})
	}
}

// The production nodes take the zero BreakerConfig
// (cmd/octflow/internal/cli/serve.go sets none), so its defaults are the
// production breaker, as the README documents them: the last 20
// outcomes, at least 5 of them, a 50 % failure rate, and 30 s before a
// probe.
func TestTheProductionBreakerDefaultsArePinned(t *testing.T) {
	got := NewBreaker(BreakerConfig{}).cfg
	if got.Window != 20 || got.MinSamples != 5 || got.FailureRate != 0.5 || got.Cooldown != 30*time.Second || got.Now == nil {
		t.Fatalf("production breaker = window %d, min samples %d, rate %v, cooldown %s; want 20, 5, 0.5, 30s",
			got.Window, got.MinSamples, got.FailureRate, got.Cooldown)
	}
}

// The same defaults, by behaviour: a breaker built as production builds
// it stays closed at 4 failures, and at 9 of 20, then opens at 10 of 20,
// and waits exactly 30 s before its probe.
func TestTheProductionBreakerOpensAtHalfOfTwentyAndProbesAfterThirtySeconds(t *testing.T) {
	t.Run("minimum of five samples", func(t *testing.T) {
		clock := &fakeClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
		b := NewBreaker(BreakerConfig{Now: clock.now})
		for i := range 4 {
			b.Record(true)
			if !b.Allow() {
				t.Fatalf("opened at %d failures, under the 5 samples it needs", i+1)
			}
		}
		b.Record(true)
		if b.Allow() {
			t.Fatal("closed at 5 failures of 5")
		}
	})
	t.Run("half of a window of twenty", func(t *testing.T) {
		clock := &fakeClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
		b := NewBreaker(BreakerConfig{Now: clock.now})
		// A full window of successes first, then failures: each failure
		// pushes a success out of a window of 20, so it holds k of 20
		// after k of them (a window of 21 would still hold 10 of 21 at
		// the 10th, under half).
		outcomes := []bool{}
		for range 20 {
			outcomes = append(outcomes, false)
		}
		for range 9 {
			outcomes = append(outcomes, true)
		}
		for i, failed := range outcomes {
			b.Record(failed)
			if !b.Allow() {
				t.Fatalf("opened after %d outcomes, 9 failures of 20 at most: %+v", i+1, b.Status())
			}
		}
		b.Record(true) // 10 of 20
		if b.Allow() {
			t.Fatalf("closed at 10 failures of 20: %+v", b.Status())
		}
		if st := b.Status(); st.Samples != 20 {
			t.Errorf("window holds %d outcomes, want 20", st.Samples)
		}
		clock.advance(30*time.Second - time.Nanosecond)
		if b.Allow() {
			t.Fatal("probe admitted before 30 s")
		}
		clock.advance(time.Nanosecond)
		if !b.Allow() || b.Status().State != BreakerHalfOpen {
			t.Fatalf("no probe after 30 s: %+v", b.Status())
		}
	})
}
