package auth

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestFailuresRefillAndAreBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	f := NewFailures(2, 10*time.Second, 3)
	a := netip.MustParsePrefix("192.0.2.1/32")
	f.Fail(a, t0)
	f.Fail(a, t0)
	if w := f.Wait(a, t0); w != 10*time.Second {
		t.Errorf("wait after the burst: %v, want 10s", w)
	}
	if w := f.Wait(a, t0.Add(4*time.Second)); w != 6*time.Second {
		t.Errorf("wait 4 s later: %v, want 6s", w)
	}
	if w := f.Wait(a, t0.Add(10*time.Second)); w != 0 {
		t.Errorf("wait after one period: %v", w)
	}
	// Addresses of one IPv6 /64 are one client; the address is the
	// connection's, not a header's.
	r1 := httptest.NewRequest(http.MethodPost, "/", nil)
	r1.RemoteAddr = "[2001:db8:1:2::1]:443"
	r2 := httptest.NewRequest(http.MethodPost, "/", nil)
	r2.RemoteAddr = "[2001:db8:1:2:ffff::9]:443"
	r2.Header.Set("X-Forwarded-For", "203.0.113.9")
	if ClientOf(r1) != ClientOf(r2) {
		t.Errorf("one /64, two clients: %v %v", ClientOf(r1), ClientOf(r2))
	}
	r3 := httptest.NewRequest(http.MethodPost, "/", nil)
	r3.RemoteAddr = "[::ffff:192.0.2.1]:443"
	if ClientOf(r3) != a {
		t.Errorf("a mapped IPv4 address: %v", ClientOf(r3))
	}
	// Bounded: past max clients the one closest to a full allowance is
	// forgotten; a new client never shares another's allowance.
	// Client i spends its allowance at second i.
	for i := range 100 {
		c := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32)
		at := t0.Add(time.Duration(i) * time.Second)
		f.Fail(c, at)
		f.Fail(c, at)
	}
	if len(f.clients) > 3 {
		t.Errorf("%d clients tracked, want at most max", len(f.clients))
	}
	end := t0.Add(100 * time.Second)
	newcomer := netip.MustParsePrefix("192.0.2.77/32")
	if w := f.Wait(newcomer, end); w != 0 {
		t.Errorf("past the bound, a client that never failed must wait %v: it shares an allowance spent by others", w)
	}
	if w := f.Wait(netip.MustParsePrefix("10.0.0.99/32"), end); w == 0 {
		t.Error("the client that failed last was forgotten before one with a fuller allowance")
	}
}

func TestSignInsInParallelCannotOverdrawTheAllowance(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	f := NewFailures(2, 10*time.Second, 10)
	a := netip.MustParsePrefix("192.0.2.1/32")
	// Two sign-ins under way at once take the whole burst: a third,
	// before either has failed, is refused.
	_, first := f.Attempt(a, t0)
	_, second := f.Attempt(a, t0)
	if w, _ := f.Attempt(a, t0); w == 0 {
		t.Fatal("a third parallel sign-in was let through a burst of 2")
	}
	// A sign-in that succeeds gives its share back; one that fails keeps
	// it spent.
	first(true, t0)
	second(false, t0)
	w, third := f.Attempt(a, t0)
	if w != 0 {
		t.Fatalf("after a success the allowance was not given back: wait %v", w)
	}
	third(false, t0)
	if w, _ := f.Attempt(a, t0); w != 10*time.Second {
		t.Errorf("after two failures: wait %v, want 10s", w)
	}
}
