package auth

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failures limits what each client may fail (failed sign-ins, requests
// without credentials): burst at once, then one every every. A client is
// the connection's address (never a header a client can set): an IPv4
// address, or an IPv6 /64 (ClientOf). Behind a reverse
// proxy every client is the proxy, and shares one allowance. At most
// max clients are tracked; past that, clients with a full allowance are
// forgotten, and if that is not enough the client closest to a full
// allowance is: a new client always gets an allowance of its own, never
// one shared with the clients that filled the table.
type Failures struct {
	burst int
	every time.Duration
	max   int

	mu      sync.Mutex
	clients map[netip.Prefix]*rate.Limiter
}

// NewFailures allows each client burst failures at once, then one every
// every, and tracks at most max clients.
func NewFailures(burst int, every time.Duration, max int) *Failures {
	return &Failures{burst: burst, every: every, max: max, clients: map[netip.Prefix]*rate.Limiter{}}
}

// ClientOf is the client a request comes from, for Failures (the
// zero prefix when the address does not parse).
func ClientOf(r *http.Request) netip.Prefix {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// limiter is client's allowance; the caller holds mu.
func (f *Failures) limiter(client netip.Prefix, now time.Time) *rate.Limiter {
	if l, ok := f.clients[client]; ok {
		return l
	}
	if len(f.clients) >= f.max {
		for c, l := range f.clients {
			if l.TokensAt(now) >= float64(f.burst) {
				delete(f.clients, c)
			}
		}
		if len(f.clients) >= f.max {
			var fullest netip.Prefix
			most := -1.0
			for c, l := range f.clients {
				if t := l.TokensAt(now); t > most {
					fullest, most = c, t
				}
			}
			delete(f.clients, fullest)
		}
	}
	l := rate.NewLimiter(rate.Every(f.every), f.burst)
	f.clients[client] = l
	return l
}

// Wait is how long client must wait before it may try again (0: now).
func (f *Failures) Wait(client netip.Prefix, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens := f.limiter(client, now).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(f.every))
}

// Attempt takes one failure's worth of client's allowance before a
// sign-in is tried, so sign-ins sent in parallel cannot overdraw it:
// wait > 0 refuses this one. Otherwise settle gives the allowance back
// when the sign-in succeeded, and keeps it spent when it failed.
func (f *Failures) Attempt(client netip.Prefix, now time.Time) (wait time.Duration, settle func(succeeded bool, at time.Time)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.limiter(client, now)
	if tokens := l.TokensAt(now); tokens < 1 {
		return time.Duration((1 - tokens) * float64(f.every)), nil
	}
	r := l.ReserveN(now, 1)
	return 0, func(succeeded bool, at time.Time) {
		if succeeded {
			f.mu.Lock()
			defer f.mu.Unlock()
			r.CancelAt(at)
		}
	}
}

// Fail spends one of client's failures.
func (f *Failures) Fail(client netip.Prefix, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limiter(client, now).AllowN(now, 1)
}
