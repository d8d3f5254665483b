package callback

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// specialRange is an address block that a device's callback may not
// reach unless allow-listed. The list below is the test's own, written
// from the IANA IPv4 and IPv6 Special-Purpose Address Registries (the
// blocks that are not globally reachable), multicast, and the IPv6 blocks
// that embed an IPv4 address: it does not read the guard's list, so a
// block dropped from the guard fails here.
type specialRange struct {
	prefix string
	name   string
}

var specialRanges = []specialRange{
	// IPv4 (RFC 6890 and the IANA registry).
	{"0.0.0.0/8", `"this network" (RFC 791)`},
	{"10.0.0.0/8", "private use (RFC 1918)"},
	{"100.64.0.0/10", "shared address space, carrier-grade NAT (RFC 6598)"},
	{"127.0.0.0/8", "loopback (RFC 1122)"},
	{"169.254.0.0/16", "link-local, cloud metadata (RFC 3927)"},
	{"172.16.0.0/12", "private use (RFC 1918)"},
	{"192.0.0.0/24", "IETF protocol assignments (RFC 6890)"},
	{"192.0.2.0/24", "documentation TEST-NET-1 (RFC 5737)"},
	{"192.168.0.0/16", "private use (RFC 1918)"},
	{"198.18.0.0/15", "benchmarking (RFC 2544)"},
	{"198.51.100.0/24", "documentation TEST-NET-2 (RFC 5737)"},
	{"203.0.113.0/24", "documentation TEST-NET-3 (RFC 5737)"},
	{"224.0.0.0/4", "multicast (RFC 5771)"},
	{"240.0.0.0/4", "reserved (RFC 1112)"},
	{"255.255.255.255/32", "limited broadcast (RFC 919)"},
	// IPv6 (the IANA registry, and the forms that tunnel to IPv4).
	{"::/128", "unspecified (RFC 4291)"},
	{"::1/128", "loopback (RFC 4291)"},
	{"::/96", "IPv4-compatible, deprecated (RFC 4291)"},
	{"64:ff9b::/96", "NAT64 well-known prefix, embeds IPv4 (RFC 6052)"},
	{"64:ff9b:1::/48", "local-use NAT64 (RFC 8215)"},
	{"100::/64", "discard-only (RFC 6666)"},
	{"100:0:0:1::/64", "dummy prefix (RFC 9780)"},
	{"2001::/32", "Teredo, embeds IPv4 (RFC 4380)"},
	{"2001:2::/48", "benchmarking (RFC 5180)"},
	{"2001:10::/28", "deprecated ORCHID (RFC 4843)"},
	{"2001:db8::/32", "documentation (RFC 3849)"},
	{"2002::/16", "6to4, embeds IPv4 (RFC 3056)"},
	{"3fff::/20", "documentation (RFC 9637)"},
	{"5f00::/16", "SRv6 segment identifiers (RFC 9602)"},
	{"fc00::/7", "unique local (RFC 4193)"},
	{"fe80::/10", "link-local (RFC 4291)"},
	{"ff00::/8", "multicast (RFC 4291)"},
}

// special names the block of the test's list that holds ip, or "".
func special(ip netip.Addr) string {
	for _, r := range specialRanges {
		if netip.MustParsePrefix(r.prefix).Contains(ip) {
			return r.prefix + " " + r.name
		}
	}
	return ""
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// hostURL is a callback URL to ip on the default port.
func hostURL(ip netip.Addr) string {
	if ip.Is4() {
		return "https://" + ip.String() + "/hook"
	}
	return "https://[" + ip.String() + "]/hook"
}

// TestTheGuardRefusesEveryNonPublicRange walks every special-purpose
// block: its first and last address, and its IPv4-mapped form, must be
// refused both at submission (Check) and at delivery (CheckIP); the
// addresses just outside it pass unless they fall in another block of the
// list; and allow-listing the block opens it.
func TestTheGuardRefusesEveryNonPublicRange(t *testing.T) {
	g, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range specialRanges {
		p := netip.MustParsePrefix(r.prefix)
		t.Run(r.prefix, func(t *testing.T) {
			inside := []netip.Addr{p.Addr(), lastAddr(p)}
			if p.Addr().Is4() {
				inside = append(inside, netip.AddrFrom16(p.Addr().As16()), netip.AddrFrom16(lastAddr(p).As16()))
			}
			for _, ip := range inside {
				if err := g.CheckIP(ip); !errors.Is(err, ErrRefused) {
					t.Errorf("SSRF guard: a delivery may dial %s, inside %s %s, a range that is not public (CheckIP: %v)", ip, r.prefix, r.name, err)
				}
				if err := g.Check(hostURL(ip)); !errors.Is(err, ErrRefused) {
					t.Errorf("SSRF guard: a device may submit the callback %s, inside %s %s, a range that is not public (Check: %v)", hostURL(ip), r.prefix, r.name, err)
				}
			}
			for _, ip := range []netip.Addr{p.Addr().Prev(), lastAddr(p).Next()} {
				if !ip.IsValid() {
					continue
				}
				in := special(ip)
				err := g.CheckIP(ip)
				switch {
				case in == "" && err != nil:
					t.Errorf("SSRF guard over-reaches: %s, just outside %s %s and public, is refused: %v", ip, r.prefix, r.name, err)
				case in != "" && !errors.Is(err, ErrRefused):
					t.Errorf("SSRF guard: a delivery may dial %s, inside %s, a range that is not public", ip, in)
				}
			}
			open, err := New(r.prefix)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range inside {
				if err := open.CheckIP(ip); err != nil {
					t.Errorf("allow-listing %s (%s) does not open %s: %v", r.prefix, r.name, ip, err)
				}
			}
		})
	}
}

// TestTheGuardAcceptsPublicAddressesBetweenTheRanges guards the table
// above against a guard that refuses everything: public addresses of
// both families, next to the blocks, pass.
func TestTheGuardAcceptsPublicAddressesBetweenTheRanges(t *testing.T) {
	g, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"1.1.1.1", "8.8.8.8", "93.184.215.14", "191.255.255.255", "192.0.1.0",
		"192.0.3.0", "198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0",
		"203.0.112.255", "203.0.114.0", "223.255.255.255",
		"2606:2800:220:1::1", "2a00:1450:4001:82b::200e", "3ffe:ffff::1", "3fff:1000::1",
		"5eff:ffff::1", "5f01::1", "2001:db7:ffff::1", "2001:db9::1", "2003::1",
	} {
		ip := netip.MustParseAddr(s)
		if in := special(ip); in != "" {
			t.Fatalf("test table: %s is inside %s, not public", ip, in)
		}
		if err := g.Check(hostURL(ip)); err != nil {
			t.Errorf("SSRF guard over-reaches: the public address %s is refused: %v", ip, err)
		}
	}
}

func ExampleGuard_CheckIP() {
	g, _ := New("")
	fmt.Println(g.CheckIP(netip.MustParseAddr("192.0.0.9")) != nil)
	fmt.Println(g.CheckIP(netip.MustParseAddr("93.184.215.14")) != nil)
	// Output:
	// true
	// false
}
