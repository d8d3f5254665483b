package gpuworker

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestBreaker() (*Breaker, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	return NewBreaker(BreakerConfig{Window: 10, MinSamples: 4, FailureRate: 0.5, Cooldown: time.Minute, Now: clock.now}), clock
}

func TestBreakerOpensAtTheFailureRateOnlyWithEnoughSamples(t *testing.T) {
	b, _ := newTestBreaker()
	for range 3 {
		b.Record(true)
	}
	if !b.Allow() {
		t.Fatal("opened on 3 samples, below the minimum of 4")
	}
	b.Record(false) // 3 of 4 failed
	if b.Allow() || b.Status().State != BreakerOpen {
		t.Fatalf("still taking work at 75%% failures: %+v", b.Status())
	}
}

func TestBreakerStaysClosedBelowTheRate(t *testing.T) {
	b, _ := newTestBreaker()
	for i := range 10 {
		b.Record(i%3 == 2) // 3 of 10, never half of those seen so far
	}
	if !b.Allow() {
		t.Fatalf("opened at 30%%: %+v", b.Status())
	}
}

func TestBreakerProbesOnceAfterCooldownThenCloses(t *testing.T) {
	b, clock := newTestBreaker()
	for range 4 {
		b.Record(true)
	}
	clock.advance(59 * time.Second)
	if b.Allow() {
		t.Fatal("took work during the cooldown")
	}
	clock.advance(time.Second)
	if !b.Allow() {
		t.Fatal("no probe after the cooldown")
	}
	if b.Allow() {
		t.Fatal("a second stage got through while the probe runs")
	}
	b.Record(false)
	if st := b.Status(); st.State != BreakerClosed || st.Samples != 0 || !b.Allow() {
		t.Fatalf("after a good probe: %+v", st)
	}
}

func TestFailedProbeReopensTheBreaker(t *testing.T) {
	b, clock := newTestBreaker()
	for range 4 {
		b.Record(true)
	}
	clock.advance(time.Minute)
	if !b.Allow() {
		t.Fatal("no probe")
	}
	b.Record(true)
	if st := b.Status(); st.State != BreakerOpen || st.Trips != 2 {
		t.Fatalf("after a failed probe: %+v", st)
	}
}

func TestOperatorResetClosesAnOpenBreaker(t *testing.T) {
	b, _ := newTestBreaker()
	for range 4 {
		b.Record(true)
	}
	b.Reset()
	if !b.Allow() || b.Status().State != BreakerClosed {
		t.Fatalf("after reset: %+v", b.Status())
	}
}
