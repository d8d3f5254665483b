package gpuworker

import (
	"sync"
	"time"

	"octflow/exam"
)

// Breaker states, named in exam for the fleet view.
const (
	BreakerClosed   = exam.BreakerClosed
	BreakerOpen     = exam.BreakerOpen
	BreakerHalfOpen = exam.BreakerHalfOpen
)

// BreakerConfig tunes a Breaker. Zero values take the defaults.
type BreakerConfig struct {
	// Window is how many recent stage outcomes are judged (default 20).
	Window int
	// MinSamples is how many outcomes the window needs before it can
	// open (default 5), so one early failure does not take a node out.
	MinSamples int
	// FailureRate at or above which the breaker opens (default 0.5).
	FailureRate float64
	// Cooldown is how long it stays open before a probe (default 30 s).
	Cooldown time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Window == 0 {
		c.Window = 20
	}
	if c.MinSamples == 0 {
		c.MinSamples = 5
	}
	if c.FailureRate == 0 {
		c.FailureRate = 0.5
	}
	if c.Cooldown == 0 {
		c.Cooldown = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Breaker is a node's circuit breaker over its recent stage outcomes.
// While it is open the node's slot supplier grants nothing, so the node
// stops polling and the shared GPU queue flows to healthy nodes.
type Breaker struct {
	cfg      BreakerConfig
	mu       sync.Mutex
	outcomes []bool // ring of recent outcomes, true = failure
	next     int
	state    exam.BreakerState
	openedAt time.Time
	probing  bool
	trips    int
}

// NewBreaker returns a closed breaker.
func NewBreaker(cfg BreakerConfig) *Breaker {
	cfg = cfg.withDefaults()
	return &Breaker{cfg: cfg, state: BreakerClosed}
}

// Allow reports whether the node may take a stage now. In the half-open
// state it admits exactly one probe until that probe's outcome is recorded.
func (b *Breaker) Allow() bool {
	ok, _ := b.admit()
	return ok
}

// admit is Allow that also says whether the admitted stage is the probe.
func (b *Breaker) admit() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerHalfOpen:
		if !b.probing {
			b.probing = true
			return true, true
		}
	}
	return false, false
}

// Record adds a stage outcome. A failed probe reopens the breaker; a
// successful one closes it with a clean window.
func (b *Breaker) Record(failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	if b.state == BreakerHalfOpen {
		if failed {
			b.open()
		} else {
			b.reset()
		}
		return
	}
	if b.state == BreakerOpen {
		return // a straggler that started before the breaker opened
	}
	if len(b.outcomes) < b.cfg.Window {
		b.outcomes = append(b.outcomes, failed)
	} else {
		b.outcomes[b.next] = failed
		b.next = (b.next + 1) % b.cfg.Window
	}
	if len(b.outcomes) >= b.cfg.MinSamples && b.failureRate() >= b.cfg.FailureRate {
		b.open()
	}
}

// CancelProbe gives back a probe admitted by Allow that never ran (its
// slot was released without a stage), so another can be admitted.
func (b *Breaker) CancelProbe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerHalfOpen {
		b.probing = false
	}
}

// Reset closes the breaker at once (an operator's decision).
func (b *Breaker) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reset()
}

// Status reports the breaker's state.
func (b *Breaker) Status() exam.BreakerStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	s := exam.BreakerStatus{State: b.state, FailureRate: b.failureRate(), Samples: len(b.outcomes), Trips: b.trips}
	if b.state != BreakerClosed {
		t := b.openedAt
		s.OpenedAt = &t
	}
	return s
}

// advance moves open → half-open once the cooldown has passed.
func (b *Breaker) advance() {
	if b.state == BreakerOpen && b.cfg.Now().Sub(b.openedAt) >= b.cfg.Cooldown {
		b.state, b.probing = BreakerHalfOpen, false
	}
}

func (b *Breaker) open() {
	b.state, b.openedAt, b.probing = BreakerOpen, b.cfg.Now(), false
	b.trips++
}

func (b *Breaker) reset() {
	b.state, b.probing, b.outcomes, b.next = BreakerClosed, false, b.outcomes[:0], 0
}

func (b *Breaker) failureRate() float64 {
	if len(b.outcomes) == 0 {
		return 0
	}
	n := 0
	for _, f := range b.outcomes {
		if f {
			n++
		}
	}
	return float64(n) / float64(len(b.outcomes))
}
