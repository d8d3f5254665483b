package devstack

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePorts(t *testing.T) {
	t.Run("distinct, in band, bindable", func(t *testing.T) {
		ports, err := freePorts("127.0.0.1", 8, internalPortsFrom, internalPortsTo)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < internalPortsFrom || p >= internalPortsTo {
				t.Errorf("port %d outside [%d, %d)", p, internalPortsFrom, internalPortsTo)
			}
			if seen[p] {
				t.Errorf("port %d drawn twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Errorf("port %d not released: %v", p, err)
				continue
			}
			l.Close()
		}
	})
	t.Run("band too small", func(t *testing.T) {
		// Hold one port of a two-port band: only one can be found.
		held, err := freePorts("127.0.0.1", 1, callerPortsFrom, callerPortsTo)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held[0])))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := freePorts("127.0.0.1", 2, held[0], held[0]+2); err == nil {
			t.Fatal("want an error when the band has fewer free ports than asked")
		}
	})
}

func TestFreeAddrsUseCallerBand(t *testing.T) {
	addrs, err := FreeAddrs("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		_, portText, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(portText)
		if p < callerPortsFrom || p >= callerPortsTo {
			t.Errorf("%s outside the caller band", a)
		}
	}
}
