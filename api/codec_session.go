package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// codecSessions are the browsers signed in to the codec. A session ID
// is 256 random bits, handed to the browser in an HttpOnly cookie; the
// gateway keeps only its SHA-256, with the principal and the session's
// end. Sessions live in this api process: a restart signs every browser
// out, and with several api replicas a browser must reach the one it
// signed in to.
type codecSessions struct {
	ttl time.Duration
	max int
	// perPrincipal bounds one principal's sessions: past it their own
	// session ending first goes, so that nobody can sign others out by
	// signing in many times.
	perPrincipal int

	mu     sync.Mutex
	byHash map[[32]byte]codecSession
}

type codecSession struct {
	who     Principal
	expires time.Time
}

func newCodecSessions(ttl time.Duration, max, perPrincipal int) *codecSessions {
	return &codecSessions{ttl: ttl, max: max, perPrincipal: perPrincipal, byHash: map[[32]byte]codecSession{}}
}

// sessionOwner names a principal among sessions.
func sessionOwner(p Principal) string { return string(p.Role) + "/" + p.Campus + "/" + p.Name }

// start begins a session for who and returns its ID. With perPrincipal
// sessions of who held, who's own session expiring first is dropped;
// with max sessions held, expired ones are dropped, then the one
// expiring first.
func (s *codecSessions) start(who Principal, now time.Time) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("codec session: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, mine := sessionOwner(who), 0
	var first [32]byte
	var firstEnd time.Time
	for h, sess := range s.byHash {
		if sessionOwner(sess.who) != owner {
			continue
		}
		if mine++; firstEnd.IsZero() || sess.expires.Before(firstEnd) {
			first, firstEnd = h, sess.expires
		}
	}
	if mine >= s.perPrincipal {
		delete(s.byHash, first)
	}
	if len(s.byHash) >= s.max {
		var first [32]byte
		var firstEnd time.Time
		for h, sess := range s.byHash {
			if !now.Before(sess.expires) {
				delete(s.byHash, h)
			} else if firstEnd.IsZero() || sess.expires.Before(firstEnd) {
				first, firstEnd = h, sess.expires
			}
		}
		if len(s.byHash) >= s.max {
			delete(s.byHash, first)
		}
	}
	s.byHash[sha256.Sum256([]byte(id))] = codecSession{who: who, expires: now.Add(s.ttl)}
	return id, nil
}

// lookup is the principal of a session that has not ended.
func (s *codecSessions) lookup(id string, now time.Time) (Principal, bool) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byHash[h]
	if !ok {
		return Principal{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.byHash, h)
		return Principal{}, false
	}
	return sess.who, true
}

// end ends a session.
func (s *codecSessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byHash, sha256.Sum256([]byte(id)))
}

// loginFailures limits failed sign-ins per client: burst at once, then
// one every every. A client is the connection's address (never a header
// a client can set): an IPv4 address, or an IPv6 /64. Behind a reverse
// proxy every client is the proxy, and shares one allowance. At most
// max clients are tracked; past that, clients with a full allowance are
// forgotten, and if that is not enough the client closest to a full
// allowance is: a new client always gets an allowance of its own, never
// one shared with the clients that filled the table.
type loginFailures struct {
	burst int
	every time.Duration
	max   int

	mu      sync.Mutex
	clients map[netip.Prefix]*rate.Limiter
}

func newLoginFailures(burst int, every time.Duration, max int) *loginFailures {
	return &loginFailures{burst: burst, every: every, max: max, clients: map[netip.Prefix]*rate.Limiter{}}
}

// clientOf is the client a request comes from, for loginFailures (the
// zero prefix when the address does not parse).
func clientOf(r *http.Request) netip.Prefix {
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
func (f *loginFailures) limiter(client netip.Prefix, now time.Time) *rate.Limiter {
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

// wait is how long client must wait before it may try again (0: now).
func (f *loginFailures) wait(client netip.Prefix, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens := f.limiter(client, now).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(f.every))
}

// attempt takes one failure's worth of client's allowance before a
// sign-in is tried, so sign-ins sent in parallel cannot overdraw it:
// wait > 0 refuses this one. Otherwise settle gives the allowance back
// when the sign-in succeeded, and keeps it spent when it failed.
func (f *loginFailures) attempt(client netip.Prefix, now time.Time) (wait time.Duration, settle func(succeeded bool, at time.Time)) {
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

// fail spends one of client's failures.
func (f *loginFailures) fail(client netip.Prefix, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limiter(client, now).AllowN(now, 1)
}
