package callback

import (
	"errors"
	"testing"
)

func TestCallbackGuardRefusesInternalTargetsUnlessAllowListed(t *testing.T) {
	g, err := New("ws.lab.example, 10.20.0.0/16, :8443, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	cases := []guardCase{
		{"https://ws.radiology.example/hook", true},
		{"http://ws.radiology.example/hook", false}, // plain http to a stranger
		{"http://ws.lab.example/hook", true},        // allow-listed host
		{"https://10.20.3.4/hook", true},            // allow-listed range
		{"http://10.20.3.4/hook", true},
		{"https://10.0.0.5/hook", false},
		{"https://192.168.1.10/hook", false},
		{"https://172.16.0.1/hook", false},
		{"https://127.0.0.1:8080/hook", false},
		{"https://[::2]/hook", false},
		{"https://[::1]:9000/hook", true}, // allow-listed as a range, not a port
		{"http://169.254.169.254/latest/meta-data", false},
		{"https://[fe80::1]/hook", false},
		{"https://100.64.0.1/hook", false},
		{"https://0.0.0.0/hook", false},
		{"https://localhost/hook", false},
		{"https://localhost./hook", false},
		{"https://LOCALHOST./hook", false},
		{"https://db.localhost./hook", false},
		{"https://metadata.internal./hook", false},
		{"https://ws.radiology.example./hook", true},
		{"https://[::ffff:127.0.0.1]/hook", false},
		{"ftp://ws.radiology.example/hook", false},
		{"/relative", false},
		// Ranges that are not public, and IPv6 that embeds IPv4.
		{"https://[64:ff9b::a00:5]/hook", false},      // NAT64 of 10.0.0.5
		{"https://[64:ff9b:1::a00:5]/hook", false},    // local-use NAT64
		{"https://[2002:a00:5::1]/hook", false},       // 6to4 of 10.0.0.5
		{"https://[::a00:5]/hook", false},             // IPv4-compatible
		{"https://[2001:0:4136:e378::1]/hook", false}, // Teredo
		{"https://0.1.2.3/hook", false},
		{"https://198.18.0.7/hook", false},
		{"https://198.19.255.1/hook", false},
		{"https://240.0.0.1/hook", false},
		{"https://255.255.255.255/hook", false},
		{"https://192.0.2.10/hook", false},
		// Ports: 443, allow-listed ones, anything to an allow-listed host.
		{"https://ws.radiology.example:443/hook", true},
		{"https://ws.radiology.example:8443/hook", true},
		{"https://ws.radiology.example:22/hook", false},
		{"https://ws.radiology.example:6379/hook", false},
		{"http://ws.lab.example:8080/hook", true},
		{"http://WS.LAB.EXAMPLE.:8080/hook", true}, // the same allow-listed host
		{"https://10.20.3.4:9000/hook", true},
		{"https://93.184.215.14:8080/hook", false},
	}
	checkGuard(t, g, cases)
}

func TestTheGuardRefusesInternalAddressesOverHTTPS(t *testing.T) {
	// Port 8443 is allow-listed, so the port is no reason to refuse
	// either: only the address is.
	g, err := New(":8443")
	if err != nil {
		t.Fatal(err)
	}
	refused := []string{
		// IPv4 link-local, the cloud metadata address first.
		"https://169.254.169.254/latest/meta-data",
		"https://169.254.169.254:8443/latest/meta-data",
		"https://169.254.0.1/hook",
		"https://169.254.255.255/hook",
		// IPv6 link-local, with and without a zone.
		"https://[fe80::1]/hook",
		"https://[fe80::a9fe:a9fe]:8443/hook",
		"https://[fe80::1%25eth0]/hook",
		"https://[febf:ffff::1]/hook",
		"https://[ff02::1]/hook", // link-local multicast
		// IPv4-mapped IPv6 forms of forbidden addresses.
		"https://[::ffff:169.254.169.254]/hook",
		"https://[::ffff:a9fe:a9fe]/hook", // the same, in hex
		"https://[::ffff:127.0.0.1]:8443/hook",
		"https://[::ffff:7f00:1]/hook",
		"https://[::ffff:10.0.0.5]/hook",
		"https://[::ffff:172.16.0.1]/hook",
		"https://[::ffff:192.168.1.10]/hook",
		"https://[::ffff:100.64.0.1]/hook",
		"https://[::ffff:0.0.0.0]/hook",
		// Loopback.
		"https://127.0.0.1/hook",
		"https://127.0.0.1:8443/hook",
		"https://127.255.255.254/hook",
		"https://[::1]/hook",
		"https://[::1]:8443/hook",
		// Private ranges, at their edges.
		"https://10.0.0.0/hook",
		"https://10.255.255.255:8443/hook",
		"https://172.16.0.0/hook",
		"https://172.31.255.255/hook",
		"https://192.168.0.0/hook",
		"https://192.168.255.255/hook",
		"https://[fc00::1]/hook", // unique local
		"https://[fdff:ffff::1]/hook",
		// Unspecified and multicast.
		"https://0.0.0.0/hook",
		"https://[::]/hook",
		"https://224.0.0.1/hook",
		"https://239.255.255.250/hook",
		"https://[ff05::2]/hook",
		// Carrier-grade NAT.
		"https://100.64.0.0/hook",
		"https://100.127.255.255/hook",
	}
	for _, u := range refused {
		t.Run(u, func(t *testing.T) {
			if err := g.Check(u); !errors.Is(err, ErrRefused) {
				t.Errorf("accepted over https: %v", err)
			}
		})
	}
	// Public neighbours of those ranges pass, so the guard is not just
	// refusing everything.
	accepted := []string{
		"https://169.253.255.255/hook",
		"https://169.255.0.0/hook",
		"https://[fec0::1]/hook",
		"https://[::ffff:93.184.215.14]/hook",
		"https://126.255.255.255/hook",
		"https://128.0.0.0:8443/hook",
		"https://11.0.0.0/hook",
		"https://172.15.255.255/hook",
		"https://172.32.0.0/hook",
		"https://192.167.255.255/hook",
		"https://192.169.0.0/hook",
		"https://[fbff:ffff::1]/hook",
		"https://[fe00::1]/hook",
		"https://100.63.255.255/hook",
		"https://100.128.0.0/hook",
		"https://[2606:2800:220:1::1]/hook",
	}
	for _, u := range accepted {
		t.Run(u, func(t *testing.T) {
			if err := g.Check(u); err != nil {
				t.Errorf("refused a public address: %v", err)
			}
		})
	}
}

func TestTheGuardRefusesMappedFormsOfAllowListedNeighbours(t *testing.T) {
	// An allow-listed range opens that range only: its IPv4-mapped form
	// is the same address and passes, the link-local metadata address
	// next to nothing on the list does not, mapped or not.
	g, err := New("10.20.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	cases := []guardCase{
		{"https://10.20.3.4/hook", true},
		{"https://[::ffff:10.20.3.4]/hook", true},
		{"https://10.21.0.1/hook", false},
		{"https://[::ffff:10.21.0.1]/hook", false},
		{"https://[::ffff:169.254.169.254]/hook", false},
		{"https://169.254.169.254/hook", false},
	}
	checkGuard(t, g, cases)
}

// guardCase is a callback URL and whether the guard lets it through.
type guardCase struct {
	url string
	ok  bool
}

// checkGuard checks the guard's answer to each case.
func checkGuard(t *testing.T, g *Guard, cases []guardCase) {
	t.Helper()
	for _, c := range cases {
		err := g.Check(c.url)
		if c.ok && err != nil {
			t.Errorf("%s refused: %v", c.url, err)
		}
		if !c.ok && !errors.Is(err, ErrRefused) {
			t.Errorf("%s accepted", c.url)
		}
	}
}
