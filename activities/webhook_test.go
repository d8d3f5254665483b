package activities

import (
	"errors"
	"net/http"
	"testing"
)

func TestCallbackGuardRefusesInternalTargetsUnlessAllowListed(t *testing.T) {
	g, err := NewCallbackGuard("ws.lab.example, 10.20.0.0/16, :8443, ::1/128")
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

func TestSignatureCoversTimestampAndBody(t *testing.T) {
	secret, body := []byte("site-secret"), []byte(`{"examId":"E1"}`)
	s := Sign(secret, 1700000000, body)
	if s != Sign(secret, 1700000000, body) || len(s) != 3+64 {
		t.Fatalf("signature %q not stable or malformed", s)
	}
	for _, other := range []string{
		Sign(secret, 1700000001, body),
		Sign(secret, 1700000000, []byte(`{"examId":"E2"}`)),
		Sign([]byte("other"), 1700000000, body),
	} {
		if other == s {
			t.Error("signature does not depend on timestamp, body and secret")
		}
	}
}

func TestDeliveriesShareOneTransportPerGuard(t *testing.T) {
	g, _ := NewCallbackGuard("")
	w := &Webhooks{Guard: g}
	a, b := w.client(false), w.client(false)
	if a != b || a.Transport != b.Transport {
		t.Error("every delivery got its own client: connections are never reused")
	}
	if w.client(true) == a {
		t.Error("allow-listed hosts share the guarded client")
	}
	tr := a.Transport.(*http.Transport)
	if tr.MaxIdleConnsPerHost == 0 || tr.IdleConnTimeout == 0 || tr.MaxConnsPerHost == 0 {
		t.Errorf("the transport has no idle limits: %+v", tr)
	}
}

// guardCase is a callback URL and whether the guard lets it through.
type guardCase struct {
	url string
	ok  bool
}

// checkGuard checks the guard's answer to each case.
func checkGuard(t *testing.T, g *CallbackGuard, cases []guardCase) {
	t.Helper()
	for _, c := range cases {
		err := g.Check(c.url)
		if c.ok && err != nil {
			t.Errorf("%s refused: %v", c.url, err)
		}
		if !c.ok && !errors.Is(err, ErrCallbackRefused) {
			t.Errorf("%s accepted", c.url)
		}
	}
}
