package intake

import (
	"context"
	"sync"
)

// byteBudget is a budget of bytes that callers hold while they work and
// wait for, first come first served: one that needs much is not passed
// over for ever by ones that need little.
type byteBudget struct {
	size int64
	// lone lets a holder that finds the budget empty take more than its
	// size: a campus's share of the gateway's budget (campusBudgets) may
	// be smaller than one large scan, which it may then validate alone.
	lone bool

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter // in order of arrival
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once n is charged to it
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size} }

// fits says whether n more bytes may be charged now.
func (b *byteBudget) fits(n int64) bool {
	return n <= b.size-b.used || (b.lone && b.used == 0)
}

// take waits until n bytes are free and no earlier caller waits, charges
// them and returns the function that gives them back; or returns ctx's
// error, charging nothing. n must be at most the budget's size, unless
// the budget is lone.
func (b *byteBudget) take(ctx context.Context, n int64) (func(), error) {
	release := func() { b.give(n) }
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return release, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // charged meanwhile: give it back
		b.used -= n
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
	}
	b.admit() // the first waiter may fit now that this one is gone
	b.mu.Unlock()
	return nil, ctx.Err()
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.admit()
}

// admit charges the waiters at the head of the queue that now fit.
func (b *byteBudget) admit() {
	for len(b.waiters) > 0 && b.fits(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// inUse is what the budget's holders are charged.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// campusBudgets gives each campus that uploads its share of the
// validation memory budget of size bytes, a campus holding nothing may
// take one scan over it; with one campus, none: the gateway's budget is
// its own. So one campus's large scans wait behind its own, and another
// campus's scans find room.
func campusBudgets(size int64, campuses []string) map[string]*byteBudget {
	if len(campuses) < 2 {
		return nil
	}
	out := map[string]*byteBudget{}
	for _, c := range campuses {
		out[c] = &byteBudget{size: size / int64(len(campuses)), lone: true}
	}
	return out
}

// DefaultValidationBytes is Limits.ValidationBytes's default: room
// to read and de-identify the largest clinical cube (128 × 1024 × 512
// samples, whose octdicom.Declared.Peak is about 2.5 GiB) while smaller
// scans wait, or several scans of ordinary size at once (a 49 × 496 ×
// 512 volume is charged about 0.6 GiB).
const DefaultValidationBytes = 4 << 30
