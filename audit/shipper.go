package audit

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"go.uber.org/zap"
)

// shipper copies the journal to the collector, in order. TLS syslog has
// no acknowledgements, so a record counts as taken only once the
// collector's TCP has acknowledged every byte sent (nothing left in the
// socket's send queue) and the connection has then stayed open for the
// settle time: a collector stopping closes its connections, which the
// shipper sees at once. Everything not yet taken is sent again on the
// next connection.
type shipper struct {
	j          *journal
	addr       string
	tls        *tls.Config
	log        *zap.Logger
	settle     time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	// dialer makes the TCP connection (tests may replace it).
	dialer net.Dialer
}

// run ships until ctx ends.
func (s *shipper) run(ctx context.Context) {
	backoff := s.minBackoff
	failures := 0
	for ctx.Err() == nil {
		took, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if took {
			backoff, failures = s.minBackoff, 0
		}
		failures++
		// The first failure of a run is a warning, then every tenth, so
		// a long outage does not flood the log.
		if failures == 1 || failures%10 == 0 {
			s.log.Warn("audit collector unreachable; messages stay in the spool", zap.String("collector", s.addr),
				zap.Int("failures", failures), zap.Error(err))
		}
		// Full jitter: many api processes do not reconnect in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, s.maxBackoff)
	}
}

// session connects once and ships until the connection fails. took says
// whether the collector took anything.
func (s *shipper) session(ctx context.Context) (took bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	raw, err := s.dialer.DialContext(dctx, "tcp", s.addr)
	if err != nil {
		cancel()
		return false, fmt.Errorf("dial: %w", err)
	}
	conn := tls.Client(raw, s.tls)
	err = conn.HandshakeContext(dctx)
	cancel()
	if err != nil {
		raw.Close()
		return false, fmt.Errorf("tls: %w", err)
	}
	defer conn.Close()

	// The collector never sends: a read ends only when it goes away (or
	// refuses our certificate after the handshake, as TLS 1.3 allows).
	gone := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		gone <- cmpErr(err, errors.New("collector sent data"))
	}()

	_, from := s.j.durable()
	r := s.j.reader(from)
	defer r.close()
	w := bufio.NewWriterSize(conn, 64<<10)
	type sent struct {
		after Position
		at    time.Time
	}
	var inflight []sent
	taken := from
	tick := time.NewTicker(max(s.settle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		// Send what is durable.
		for {
			fr, after, ok, err := r.next()
			if err != nil {
				return took, err
			}
			if !ok {
				break
			}
			if _, err := w.Write(fr); err != nil {
				return took, fmt.Errorf("send: %w", err)
			}
			inflight = append(inflight, sent{after: after, at: time.Now()})
		}
		if w.Buffered() > 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := w.Flush(); err != nil {
				return took, fmt.Errorf("send: %w", err)
			}
		}
		// Count as taken what settled on a connection still open.
		if len(inflight) > 0 {
			select {
			case err := <-gone:
				return took, fmt.Errorf("collector closed the connection: %w", err)
			default:
			}
			if unsent, err := unacked(raw); err == nil && unsent == 0 {
				cut, i := time.Now().Add(-s.settle), 0
				for i < len(inflight) && !inflight[i].at.After(cut) {
					taken = inflight[i].after
					i++
				}
				if i > 0 {
					inflight = inflight[i:]
					if err := s.j.commit(taken); err != nil {
						return took, err
					}
					took = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return took, ctx.Err()
		case err := <-gone:
			return took, fmt.Errorf("collector closed the connection: %w", err)
		case <-s.j.notify:
		case <-tick.C:
		}
	}
}

func cmpErr(err, or error) error {
	if err == nil {
		return or
	}
	return err
}
