// Package callback guards the callback URLs that devices hand octflow:
// which ones the gateway accepts at submission, and which addresses a
// delivery may dial (activities.Webhooks). It exists so that the gateway
// and the workers share one rule without the gateway importing the
// workers' code.
package callback

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Guard decides which callback URLs octflow may call. A callback
// must be https, and must not reach loopback, private, link-local or
// other internal addresses, unless its host is on the allow-list: a
// callback URL comes from a device, and without this it could make
// octflow probe the hospital's internal network (SSRF).
type Guard struct {
	hosts    map[string]bool
	prefixes []netip.Prefix
	ports    map[string]bool // ports besides 443 that any callback may use
}

// New parses an allow-list of host names, CIDR prefixes and
// ports, e.g. "ws.radiology.example, 10.20.0.0/16, 127.0.0.0/8, :8443".
// An allow-listed host or range may be reached on any port and over
// plain http; any other host only over https, on 443 or an allow-listed
// port.
func New(allow string) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}, ports: map[string]bool{}}
	for _, item := range strings.Split(allow, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.HasPrefix(item, ":") && !strings.HasPrefix(item, "::"):
			if n, err := strconv.Atoi(item[1:]); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("callback allow-list entry %q: want :<port>", item)
			}
			g.ports[item[1:]] = true
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("callback allow-list entry %q: %w", item, err)
			}
			g.prefixes = append(g.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(item); err == nil {
				g.prefixes = append(g.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			} else {
				g.hosts[hostKey(item)] = true
			}
		}
	}
	return g, nil
}

// hostKey is a host name as the guard compares it: lower case, without
// the root's trailing dot (localhost. is localhost). The allow-list, the
// check and the delivery all read names this one way.
func hostKey(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// ErrRefused is wrapped by every refusal.
var ErrRefused = errors.New("callback URL refused")

// Check validates a callback URL without resolving it: the scheme, and
// the host if it is a literal address or a local name. Names are checked
// again, after resolution, when the event is delivered.
func (g *Guard) Check(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%w: want an absolute https URL", ErrRefused)
	}
	host := hostKey(u.Hostname())
	if g.hosts[host] {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := g.CheckIP(ip); err != nil {
			return err
		}
	} else if host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".internal") {
		return fmt.Errorf("%w: %s is a local name", ErrRefused, host)
	}
	if g.allowedIP(host) {
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%w: plain http only to allow-listed hosts", ErrRefused)
	}
	if port := u.Port(); port != "" && port != "443" && !g.ports[port] {
		return fmt.Errorf("%w: port %s is not allowed (443, or one on the allow-list)", ErrRefused, port)
	}
	return nil
}

func (g *Guard) allowedIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && g.allowed(ip)
}

func (g *Guard) allowed(ip netip.Addr) bool {
	for _, p := range g.prefixes {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// notPublic are ranges no callback may reach unless allow-listed, on top
// of what netip classifies: ranges that are not public, and IPv6 ranges
// that embed an IPv4 address (which may be an internal one) and would
// reach it through a translator or a tunnel.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible IPv6
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001::/32"),       // Teredo
	netip.MustParsePrefix("2001:2::/48"),     // benchmarking
	netip.MustParsePrefix("2001:10::/28"),    // deprecated ORCHID
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4
	netip.MustParsePrefix("3fff::/20"),       // documentation (RFC 9637)
	netip.MustParsePrefix("5f00::/16"),       // SRv6 segment identifiers
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("100:0:0:1::/64"),  // dummy prefix (RFC 9780)
}

// CheckIP refuses internal addresses that are not allow-listed: what a
// guarded dialer asks of each address a name resolves to.
func (g *Guard) CheckIP(ip netip.Addr) error {
	ip = ip.Unmap()
	internal := ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
	for _, p := range notPublic {
		internal = internal || p.Contains(ip)
	}
	if internal && !g.allowed(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrRefused, ip)
	}
	return nil
}

// AllowsHost reports whether host (a URL's host name) is on the
// allow-list by name: its deliveries skip the guarded dialer.
func (g *Guard) AllowsHost(host string) bool { return g.hosts[hostKey(host)] }
