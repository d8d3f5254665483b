package devstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// Ports are drawn below Linux's default ephemeral range (32768-60999), so a
// listener another process opens on port 0, or an outgoing connection, cannot
// take one between the draw and the server's bind. Asking the kernel for port
// 0 and closing it again races with exactly those. The embedded Temporal
// server's internal ports and the addresses handed to callers come from two
// separate bands, so neither can draw a port the other has chosen but not yet
// bound.
const (
	internalPortsFrom, internalPortsTo = 20000, 26000
	callerPortsFrom, callerPortsTo     = 26000, 32000
)

// FreeAddrs returns n distinct host:port addresses that were free a moment
// ago, for a caller that starts servers on them (tests, several dev stacks).
func FreeAddrs(host string, n int) ([]string, error) {
	ports, err := freePorts(host, n, callerPortsFrom, callerPortsTo)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return addrs, nil
}

// freePorts returns n distinct TCP ports in [from, to) on host that were free a
// moment ago. Each is proven by binding it; all are held until every one is
// found.
func freePorts(host string, n, from, to int) ([]int, error) {
	held := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts == 100*n {
			return nil, fmt.Errorf("find %d free ports on %s: gave up after %d tries", n, host, attempts)
		}
		port := from + rand.IntN(to-from)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // in use, or held by this call already
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}
