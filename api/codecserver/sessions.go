package codecserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"octflow/api/auth"
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
	who     auth.Principal
	expires time.Time
}

func newCodecSessions(ttl time.Duration, max, perPrincipal int) *codecSessions {
	return &codecSessions{ttl: ttl, max: max, perPrincipal: perPrincipal, byHash: map[[32]byte]codecSession{}}
}

// sessionOwner names a principal among sessions.
func sessionOwner(p auth.Principal) string { return string(p.Role) + "/" + p.Campus + "/" + p.Name }

// start begins a session for who and returns its ID. With perPrincipal
// sessions of who held, who's own session expiring first is dropped;
// with max sessions held, expired ones are dropped, then the one
// expiring first.
func (s *codecSessions) start(who auth.Principal, now time.Time) (string, error) {
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
func (s *codecSessions) lookup(id string, now time.Time) (auth.Principal, bool) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byHash[h]
	if !ok {
		return auth.Principal{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.byHash, h)
		return auth.Principal{}, false
	}
	return sess.who, true
}

// end ends a session.
func (s *codecSessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byHash, sha256.Sum256([]byte(id)))
}
