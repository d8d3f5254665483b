package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"go.uber.org/zap"
)

// shipper copies the journal to the collector, in order, by RELP (the
// collector answers each message; see relpSession) or by plain syslog
// over TLS. TLS syslog has no acknowledgements, so there a record counts
// as taken only once the collector's TCP has acknowledged every byte
// sent (nothing left in the socket's send queue) and the connection has
// then stayed open for the settle time: a collector stopping closes its
// connections, which the shipper sees at once, but one that dies after
// TCP took the bytes loses them. Everything not yet taken is sent again
// on the next connection.
type shipper struct {
	j          *journal
	relp       bool
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

// connect dials the collector and completes the TLS handshake.
func (s *shipper) connect(ctx context.Context) (*tls.Conn, net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := s.dialer.DialContext(dctx, "tcp", s.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	conn := tls.Client(raw, s.tls)
	if err := conn.HandshakeContext(dctx); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	return conn, raw, nil
}

// session connects once and ships until the connection fails. took says
// whether the collector took anything.
func (s *shipper) session(ctx context.Context) (took bool, err error) {
	if s.relp {
		return s.relpSession(ctx)
	}
	conn, raw, err := s.connect(ctx)
	if err != nil {
		return false, err
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

// relpWindow bounds the messages sent and not yet answered.
const relpWindow = 128

// relpAnswerTimeout is how long the collector may leave a message
// unanswered before the session is given up and its messages sent again.
const relpAnswerTimeout = 60 * time.Second

// relpSession connects once, opens a RELP session and ships until it
// fails. A message counts as taken when the collector answers "200" to
// its transaction: the cursor moves past it then, and only then.
func (s *shipper) relpSession(ctx context.Context) (took bool, err error) {
	conn, _, err := s.connect(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	w := bufio.NewWriterSize(conn, 64<<10)

	txnr := 1
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.Write(appendRELP(nil, txnr, "open", []byte(relpOffers))); err == nil {
		err = w.Flush()
	}
	if err != nil {
		return false, fmt.Errorf("relp open: %w", err)
	}
	f, err := readRELP(br)
	if err != nil {
		return false, fmt.Errorf("relp open: %w", err)
	}
	if code, text := relpStatus(f.data); f.command != "rsp" || f.txnr != txnr || code != 200 {
		return false, fmt.Errorf("relp open: the collector answered %s %d %q", f.command, code, text)
	}
	if !relpOffersSyslog(f.data) {
		return false, errors.New("relp open: the collector offers no syslog command")
	}
	_ = conn.SetDeadline(time.Time{})

	type answer struct {
		f   relpFrame
		err error
	}
	answers := make(chan answer, relpWindow)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			f, err := readRELP(br)
			select {
			case answers <- answer{f, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	_, from := s.j.durable()
	r := s.j.reader(from)
	defer r.close()
	type sent struct {
		txnr  int
		after Position
	}
	var inflight []sent
	answerBy := time.NewTimer(relpAnswerTimeout)
	defer answerBy.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var buf []byte
	for {
		for len(inflight) < relpWindow {
			fr, after, ok, err := r.next()
			if err != nil {
				return took, err
			}
			if !ok {
				break
			}
			_, msg, _ := bytes.Cut(fr, []byte(" ")) // the journal's frame: LEN SP MSG
			txnr = nextTxnr(txnr)
			buf = appendRELP(buf[:0], txnr, "syslog", msg)
			if _, err := w.Write(buf); err != nil {
				return took, fmt.Errorf("send: %w", err)
			}
			if len(inflight) == 0 {
				answerBy.Reset(relpAnswerTimeout)
			}
			inflight = append(inflight, sent{txnr: txnr, after: after})
		}
		if w.Buffered() > 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := w.Flush(); err != nil {
				return took, fmt.Errorf("send: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			// A clean end: what was not answered is sent again next time.
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write(appendRELP(nil, nextTxnr(txnr), "close", nil))
			return took, ctx.Err()
		case a := <-answers:
			// Take every answer there is, then move the cursor once.
			var taken Position
			for more := true; more; {
				if a.err != nil {
					return took, fmt.Errorf("collector: %w", a.err)
				}
				switch {
				case a.f.command == "serverclose":
					return took, errors.New("the collector closed the session")
				case a.f.command != "rsp" || len(inflight) == 0 || a.f.txnr != inflight[0].txnr:
					return took, fmt.Errorf("%w: unexpected %s %d", errRELP, a.f.command, a.f.txnr)
				}
				if code, text := relpStatus(a.f.data); code != 200 {
					return took, fmt.Errorf("the collector refused a message: %d %s", code, text)
				}
				taken, inflight = inflight[0].after, inflight[1:]
				answerBy.Reset(relpAnswerTimeout)
				select {
				case a = <-answers:
				default:
					more = false
				}
			}
			if err := s.j.commit(taken); err != nil {
				return took, err
			}
			took = true
		case <-answerBy.C:
			if len(inflight) > 0 {
				return took, fmt.Errorf("the collector left %d messages unanswered for %s", len(inflight), relpAnswerTimeout)
			}
		case <-s.j.notify:
		case <-tick.C:
		}
	}
}
