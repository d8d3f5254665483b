package activities

import (
	"errors"
	"testing"
)

func TestCallbackGuardRefusesInternalTargetsUnlessAllowListed(t *testing.T) {
	g, err := NewCallbackGuard("ws.lab.example, 10.20.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://ws.radiology.example/hook", true},
		{"http://ws.radiology.example/hook", false}, // plain http to a stranger
		{"http://ws.lab.example/hook", true},        // allow-listed host
		{"https://10.20.3.4/hook", true},            // allow-listed range
		{"http://10.20.3.4/hook", true},
		{"https://10.0.0.5/hook", false},
		{"https://192.168.1.10/hook", false},
		{"https://172.16.0.1/hook", false},
		{"https://127.0.0.1:8080/hook", false},
		{"https://[::1]/hook", false},
		{"http://169.254.169.254/latest/meta-data", false},
		{"https://[fe80::1]/hook", false},
		{"https://100.64.0.1/hook", false},
		{"https://0.0.0.0/hook", false},
		{"https://localhost/hook", false},
		{"https://[::ffff:127.0.0.1]/hook", false},
		{"ftp://ws.radiology.example/hook", false},
		{"/relative", false},
	}
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
