package audit

import (
	"fmt"
	"strconv"
	"sync"
)

// ErrPrincipalShare is returned by Record and Admit when the caller's
// entries alone hold their share of the spool undelivered (see
// principalShares). It is an ErrSpoolFull for that caller only.
var ErrPrincipalShare = fmt.Errorf("%w for this caller: its entries hold a quarter of the spool undelivered", ErrSpoolFull)

// principalShares bounds what one authenticated caller's entries may
// hold of the spool while the collector does not take them: a quarter,
// so that one token's flood of requests while the collector is away
// cannot turn every other caller's requests into 503s. Entries leave a
// caller's share as the collector takes them.
type principalShares struct {
	mu sync.Mutex
	// of each caller, its entries the collector has not taken, in order.
	pending map[string]*ledger
	// refused counts each caller's entries refused since it passed its
	// share; refusedAt is the next record to ship then: the caller is
	// told as served again only once the collector has taken more.
	refused   map[string]int
	refusedAt map[string]uint64
	// total counts every entry refused for its caller's share.
	total uint64
}

type ledger struct {
	seqs  []uint64
	sizes []int64
	bytes int64
	// reserved is what entries admitted and not yet written may take.
	reserved int64
}

func newPrincipalShares() *principalShares {
	return &principalShares{pending: map[string]*ledger{}, refused: map[string]int{}, refusedAt: map[string]uint64{}}
}

// principalOf is the caller an event is charged to ("": none, the
// trail's own or an unauthenticated caller's).
func principalOf(ev Event) string {
	if ev.anonymous() {
		return ""
	}
	return callerOf(ev.User)
}

// callerOf names an authenticated user's share ("": none).
func callerOf(u User) string {
	if u.ID == "" {
		return ""
	}
	return u.Role + "/" + u.ID
}

// held is what who's entries hold undelivered, after forgetting those
// before shipped (the sequence number of the next record to ship).
func (p *principalShares) held(who string, shipped uint64) int64 {
	l := p.pending[who]
	if l == nil {
		return 0
	}
	n := 0
	for n < len(l.seqs) && l.seqs[n] < shipped {
		l.bytes -= l.sizes[n]
		n++
	}
	l.seqs, l.sizes = l.seqs[n:], l.sizes[n:]
	if len(l.seqs) == 0 && l.reserved == 0 {
		delete(p.pending, who)
		return 0
	}
	return l.bytes + l.reserved
}

// admits says whether who may add need bytes under a share of share
// bytes; shipped as for held.
func (p *principalShares) admits(who string, need, share int64, shipped uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held(who, shipped)+need <= share
}

// reserve admits an entry of need bytes of who's as admits does, and
// holds them for it until charge or release: entries recorded at the
// same time are each counted against the share. Refused, it says how
// many of who's entries were refused in this run of refusals (1: the
// first, to be told on the trail). Admitted after the collector took
// more, it says how many were refused (and forgets them): they are to be
// told on the trail before this one. One run of refusals is told once
// each way, however its caller's entries alternate.
func (p *principalShares) reserve(who string, need, share int64, shipped uint64) (ok bool, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held(who, shipped)+need > share {
		if p.refused[who] == 0 {
			p.refusedAt[who] = shipped
		}
		p.refused[who]++
		p.total++
		return false, p.refused[who]
	}
	if p.refused[who] > 0 && shipped > p.refusedAt[who] {
		refused = p.refused[who]
		delete(p.refused, who)
		delete(p.refusedAt, who)
	}
	l := p.pending[who]
	if l == nil {
		l = &ledger{}
		p.pending[who] = l
	}
	l.reserved += need
	return true, refused
}

// charge turns who's reservation of need bytes into its entry written
// at seq, of size bytes.
func (p *principalShares) charge(who string, need int64, seq uint64, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.pending[who]
	l.reserved -= need
	l.seqs, l.sizes, l.bytes = append(l.seqs, seq), append(l.sizes, size), l.bytes+size
}

// refusedTotal counts every entry refused for its caller's share.
func (p *principalShares) refusedTotal() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// release gives back who's reservation of need bytes (its entry was not
// written), and the count of refusals reserve handed it, untold.
func (p *principalShares) release(who string, need int64, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if refused > 0 {
		if p.refused[who] == 0 {
			p.refusedAt[who] = 0
		}
		p.refused[who] += refused
	}
	if l := p.pending[who]; l != nil {
		l.reserved -= need
		if len(l.seqs) == 0 && l.reserved == 0 {
			delete(p.pending, who)
		}
	}
}

// shareAlert is the Security Alert that says a caller passed its share
// of the spool (refused 0), or how many of its entries were refused
// before it was taken again.
func (t *Trail) shareAlert(who string, refused int) []byte {
	detail := "one caller's audit entries hold a quarter of the spool undelivered (the collector is not taking them): its requests are refused until the collector takes them"
	outcome := SeriousFailure
	if refused > 0 {
		detail = strconv.Itoa(refused) + " requests of one caller were refused while its audit entries held a quarter of the spool undelivered"
		outcome = MinorFailure
	}
	ev := Event{ID: SecurityAlert, Types: []Code{AuditRecordingStopped}, Action: Execute, Outcome: outcome, Description: detail,
		User: User{ID: t.src.ID}, Objects: []Object{
			{ID: who, IDType: Code{Code: "principal", System: "octflow", Meaning: "Caller"}, Type: 1, Role: 6},
			{ID: "audit-spool", IDType: Code{Code: "audit-spool", System: "octflow", Meaning: "Audit spool"},
				Type: 2, Role: 13, Details: []Detail{{Type: "refused", Value: strconv.Itoa(refused)}}}}}
	xml, err := Marshal(t.src, ev)
	if err != nil { // cannot happen: the event is well-formed
		panic(err)
	}
	return xml
}
