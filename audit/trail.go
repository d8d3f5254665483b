package audit

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Config is the audit trail's settings. The gateway's configuration names
// them (environment in brackets):
//
//   - Collector (OCTFLOW_AUDIT_COLLECTOR): host:port of the syslog
//     collector (the IHE ATNA audit record repository), over TLS. Empty:
//     no trail is shipped; dev runs write JSON lines instead (see
//     NewLogSink).
//   - Protocol (OCTFLOW_AUDIT_PROTOCOL): "relp" (default), RELP over
//     TLS, where the collector answers for each message it took (rsyslog's
//     imrelp); or "syslog-tls", RFC 5425, for a collector without RELP,
//     where delivery is judged from TCP (see shipper).
//   - CAFile (OCTFLOW_AUDIT_CA): PEM CA certificates the collector's
//     certificate must chain to (default: the system's roots).
//   - CertFile, KeyFile (OCTFLOW_AUDIT_CERT, OCTFLOW_AUDIT_KEY): this
//     node's client certificate, for collectors that ask for one (ATNA's
//     mutual node authentication).
//   - ServerName (OCTFLOW_AUDIT_SERVER_NAME): the name the collector's
//     certificate must carry (default: Collector's host).
//   - SpoolDir (OCTFLOW_AUDIT_SPOOL): the local journal; it must survive
//     restarts (a volume, not a temp dir).
//   - SpoolBytes (OCTFLOW_AUDIT_SPOOL_BYTES): the journal's cap (default
//     256 MiB); see Trail.Record for what happens past it.
//   - AppName (OCTFLOW_AUDIT_APP_NAME): the syslog APP-NAME (default
//     "octflow").
//   - Site (OCTFLOW_AUDIT_SITE): the AuditEnterpriseSiteID, e.g. the
//     hospital's name (optional).
type Config struct {
	Collector         string
	Protocol          string
	CAFile            string
	CertFile, KeyFile string
	ServerName        string
	SpoolDir          string
	SpoolBytes        int64
	AppName           string
	Site              string
	// Settle is how long a sent message's connection must stay open
	// before the message counts as taken (default 2 s).
	Settle time.Duration
	// MinBackoff and MaxBackoff bound reconnection waits (default 200 ms
	// and 30 s).
	MinBackoff, MaxBackoff time.Duration
	// SegmentBytes is the size of a journal segment (default 8 MiB).
	SegmentBytes int64
}

// The protocols a trail ships by (Config.Protocol).
const (
	ProtocolRELP      = "relp"
	ProtocolSyslogTLS = "syslog-tls"
)

// alertReserve is room past the cap kept for the trail's own alerts.
const alertReserve = 64 << 10

// Trail is the Sink that ships to a syslog collector over TLS, through
// the local journal.
type Trail struct {
	src    Source
	header header
	j      *journal
	ship   *shipper
	log    *zap.Logger

	mu   sync.Mutex
	lost int // events refused while the spool was full
	// refusedTotal counts every event refused since the trail opened:
	// the spool full, or a caller over its share.
	refusedTotal uint64
	// failedAuths counts events without an authenticated caller kept
	// off the journal while it was three quarters full.
	failedAuths int
	fullAt      time.Time // when it filled (zero: not full)
	// shares bounds each authenticated caller's part of the spool.
	shares  *principalShares
	cancel  context.CancelFunc
	stopped chan struct{}
}

// Open opens the journal in cfg.SpoolDir (replaying what an earlier
// process left there) and starts shipping it to cfg.Collector.
func Open(cfg Config, src Source, log *zap.Logger) (*Trail, error) {
	if cfg.Collector == "" || cfg.SpoolDir == "" {
		return nil, errors.New("audit: a collector and a spool dir are needed")
	}
	var relp bool
	switch cfg.Protocol {
	case "", ProtocolRELP:
		relp = true
	case ProtocolSyslogTLS:
	default:
		return nil, fmt.Errorf("audit: protocol %q: want %s or %s", cfg.Protocol, ProtocolRELP, ProtocolSyslogTLS)
	}
	host, _, err := net.SplitHostPort(cfg.Collector)
	if err != nil {
		return nil, fmt.Errorf("audit: collector %q: %w", cfg.Collector, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cmp.Or(cfg.ServerName, host)}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("audit: CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("audit: CA %s: no PEM certificate", cfg.CAFile)
		}
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("audit: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if src.PID == 0 {
		src.PID = os.Getpid()
	}
	if src.Host == "" {
		src.Host, _ = os.Hostname()
	}
	j, err := openJournal(cfg.SpoolDir, cmp.Or(cfg.SpoolBytes, 256<<20), alertReserve, cmp.Or(cfg.SegmentBytes, 8<<20))
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Trail{src: src, header: newHeader(src, cmp.Or(cfg.AppName, "octflow")), j: j, log: log,
		cancel: cancel, stopped: make(chan struct{}), shares: newPrincipalShares(),
		ship: &shipper{j: j, relp: relp, addr: cfg.Collector, tls: tc, log: log, settle: cmp.Or(cfg.Settle, 2*time.Second),
			minBackoff: cmp.Or(cfg.MinBackoff, 200*time.Millisecond), maxBackoff: cmp.Or(cfg.MaxBackoff, 30*time.Second)}}
	// What could not be shipped is kept aside, and the trail says so.
	j.onSetAside = t.setAsideAlert
	for _, a := range j.opened {
		t.setAsideAlert(a)
	}
	go func() {
		defer close(t.stopped)
		t.ship.run(ctx)
	}()
	return t, nil
}

// setAsideAlert puts on the trail that journal bytes were moved to the
// set-aside folder instead of being shipped: which, how many, and why.
func (t *Trail) setAsideAlert(a setAside) {
	t.log.Error("audit: journal bytes that cannot be shipped were set aside", zap.String("file", a.file),
		zap.Int64("bytes", a.bytes), zap.Uint64("sequence", a.seq), zap.String("reason", a.reason))
	ev := Event{ID: SecurityAlert, Action: Execute, Outcome: SeriousFailure,
		Description: "audit journal bytes that cannot be shipped were set aside in the spool: " + a.reason,
		User:        User{ID: t.src.ID},
		Objects: []Object{{ID: "audit-spool", IDType: Code{Code: "audit-spool", System: "octflow", Meaning: "Audit spool"},
			Type: 2, Role: 13, Details: []Detail{{Type: "file", Value: filepath.Base(a.file)},
				{Type: "bytes", Value: strconv.FormatInt(a.bytes, 10)}, {Type: "sequence", Value: strconv.FormatUint(a.seq, 10)}}}}}
	xml, err := Marshal(t.src, ev)
	if err == nil {
		err = t.append(xml, SeriousFailure, true)
	}
	if err != nil {
		t.log.Error("audit: cannot record that journal bytes were set aside", zap.Error(err))
	}
}

// Record appends ev to the journal and returns once it is fsync'd; the
// shipper sends it on.
//
// Past the spool's cap (the collector has been away long enough to fill
// it) Record refuses: it returns ErrSpoolFull and writes nothing, and the
// caller must refuse whatever it was about to allow (the api answers 503)
// — octflow would rather stop serving than serve without a trail. The
// first refusal writes an "Audit Recording Stopped" Security Alert into a
// reserve kept past the cap; the first record accepted again is preceded
// by an "Audit Recording Started" alert that says how many events were
// refused meanwhile, so the gap is itself on the trail.
//
// Events without an authenticated caller (Event.Unauthenticated: a
// missing or unknown token, a failed sign-in, a route or method refused
// before authentication) are the kind a caller with no credentials can
// make at will: together they may fill at most three quarters of the
// spool, so that a flood of them while the collector is away cannot
// turn every allowed request into a 503. Past that they are counted,
// and the next record written is preceded by a Security Alert that says
// how many were not recorded one by one.
//
// One authenticated caller's entries (Event.User) may hold at most a
// quarter of the spool undelivered: past that Record refuses that
// caller's entries with ErrPrincipalShare, and the trail says so in a
// Security Alert naming the caller, then how many were refused once it
// is taken again; other callers go on.
func (t *Trail) Record(ev Event) error {
	xml, err := Marshal(t.src, ev)
	if err != nil {
		return err
	}
	who, need := principalOf(ev), int64(len(xml)+maxHeader)
	refused := 0
	if who != "" {
		if refused, err = t.admitCaller(who, need); err != nil {
			return err
		}
	}
	if ev.anonymous() {
		if size, capacity := t.j.undelivered(); size+int64(len(xml)+maxHeader) > capacity/4*3 {
			t.mu.Lock()
			t.failedAuths++
			t.mu.Unlock()
			return nil
		}
	}
	t.mu.Lock()
	if t.failedAuths > 0 {
		counted := t.alert(Login, MinorFailure, fmt.Sprintf("%d requests without an authenticated caller (failed authentications, refused routes or methods) were counted, not recorded one by one: the audit spool was three quarters full",
			t.failedAuths), t.failedAuths)
		if err := t.append(counted, MinorFailure, false); err == nil {
			t.failedAuths = 0
		}
	}
	if !t.fullAt.IsZero() {
		started := t.alert(AuditRecordingStarted, MinorFailure, fmt.Sprintf("the audit spool has room again; %d events were refused since %s",
			t.lost, t.fullAt.UTC().Format(time.RFC3339)), t.lost)
		if err := t.append(started, MinorFailure, false); err != nil {
			err = t.refusedLocked(err)
			t.mu.Unlock()
			if who != "" {
				t.shares.release(who, need, refused)
			}
			return err
		}
		t.fullAt, t.lost = time.Time{}, 0
	}
	t.mu.Unlock()
	if refused > 0 {
		if err := t.append(t.shareAlert(who, refused), MinorFailure, false); err == nil {
			refused = 0
		}
	}
	// Not under mu: concurrent records share one fsync (group commit).
	seq, size, err := t.appendSeq(xml, ev.Outcome, false)
	if who != "" {
		if err != nil {
			t.shares.release(who, need, refused)
		} else {
			t.shares.charge(who, need, seq, size)
		}
	}
	if err != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.refusedLocked(err)
	}
	return nil
}

// callerShare is what one caller's entries may hold of the spool (a
// quarter), and the sequence number of the next record to ship.
func (t *Trail) callerShare() (share int64, shipped uint64) {
	_, capacity := t.j.undelivered()
	_, next := t.j.durable()
	return capacity / 4, next.Seq
}

// admitCaller reserves need bytes of caller who's share for an entry,
// and says how many of its entries were refused before it; or refuses
// it when its entries hold their share of the spool undelivered, the
// first refusal putting a Security Alert on the trail.
func (t *Trail) admitCaller(who string, need int64) (refused int, err error) {
	share, shipped := t.callerShare()
	ok, refused := t.shares.reserve(who, need, share, shipped)
	if ok {
		return refused, nil
	}
	if refused == 1 {
		t.log.Error("audit: one caller's entries hold a quarter of the spool undelivered; refusing its requests", zap.String("caller", who))
		if err := t.append(t.shareAlert(who, 0), SeriousFailure, true); err != nil {
			t.log.Error("audit: cannot record that a caller's entries were refused", zap.Error(err))
		}
	}
	return 0, ErrPrincipalShare
}

// Admit says whether Record would take entries of need bytes now: nil,
// or ErrSpoolFull when the spool is within need of its cap (or the
// journal has failed). It reserves nothing: a caller asks for room for
// its own entry and those of others acting at the same time. See
// Admitter.
func (t *Trail) Admit(who User, need int64) error {
	need = max(need, 0)
	err := t.j.admit(need)
	if caller := callerOf(who); caller != "" && err == nil {
		share, shipped := t.callerShare()
		if !t.shares.admits(caller, need, share, shipped) {
			err = ErrPrincipalShare
		}
	}
	if err != nil {
		t.mu.Lock()
		t.refusedTotal++
		t.mu.Unlock()
	}
	return err
}

// refusedLocked counts an event the journal did not take, and on the
// first one after a good run writes the "stopped" alert.
func (t *Trail) refusedLocked(err error) error {
	if errors.Is(err, ErrSpoolFull) {
		if t.fullAt.IsZero() {
			t.fullAt = time.Now()
			stopped := t.alert(AuditRecordingStopped, SeriousFailure, "the audit spool is full: the collector has not taken its messages; requests are refused", 0)
			if aerr := t.append(stopped, SeriousFailure, true); aerr != nil {
				t.log.Error("audit: cannot record that recording stopped", zap.Error(aerr))
			}
			t.log.Error("audit spool full: refusing requests until the collector takes the spool")
		}
		t.lost++
		t.refusedTotal++
	}
	return err
}

func (t *Trail) append(xml []byte, outcome Outcome, alert bool) error {
	_, _, err := t.appendSeq(xml, outcome, alert)
	return err
}

// appendSeq appends a message and says its sequence number and size.
func (t *Trail) appendSeq(xml []byte, outcome Outcome, alert bool) (seq uint64, size int64, err error) {
	at := time.Now()
	err = t.j.append(func(n uint64) []byte {
		msg := t.header.message(n, at, outcome != Success, xml)
		seq, size = n, int64(len(msg))
		return msg
	}, alert)
	return seq, size, err
}

// alert is a Security Alert about the trail itself.
func (t *Trail) alert(kind Code, outcome Outcome, detail string, lost int) []byte {
	ev := Event{ID: SecurityAlert, Types: []Code{kind}, Action: Execute, Outcome: outcome, Description: detail,
		User: User{ID: t.src.ID}, Objects: []Object{{ID: "audit-spool", IDType: Code{Code: "audit-spool", System: "octflow", Meaning: "Audit spool"},
			Type: 2, Role: 13, Details: []Detail{{Type: "refused", Value: strconv.Itoa(lost)}}}}}
	xml, err := Marshal(t.src, ev)
	if err != nil { // cannot happen: the event is well-formed
		panic(err)
	}
	return xml
}

// Stats are a trail's figures, for its metrics.
type Stats struct {
	// PendingRecords and PendingBytes are what the collector has not
	// taken; SpoolBytes is the spool's cap.
	PendingRecords           uint64
	PendingBytes, SpoolBytes int64
	// LastTaken is when the collector last took messages (zero: not
	// since the trail opened).
	LastTaken time.Time
	// Refused counts the events refused since the trail opened (the
	// spool full, or a caller over its share): each a request answered
	// 503.
	Refused uint64
}

// Stats are the trail's figures now.
func (t *Trail) Stats() Stats {
	size, capacity := t.j.undelivered()
	t.j.mu.Lock()
	taken := t.j.takenAt
	t.j.mu.Unlock()
	t.mu.Lock()
	refused := t.refusedTotal
	t.mu.Unlock()
	return Stats{PendingRecords: t.Pending(), PendingBytes: size, SpoolBytes: capacity, LastTaken: taken,
		Refused: refused + t.shares.refusedTotal()}
}

// Pending is how many records the collector has not taken yet.
func (t *Trail) Pending() uint64 {
	end, shipped := t.j.durable()
	return end.Seq - shipped.Seq
}

// Close stops shipping (what is not shipped stays in the spool for the
// next process) and closes the journal.
func (t *Trail) Close() error {
	t.cancel()
	<-t.stopped
	return t.j.close()
}
