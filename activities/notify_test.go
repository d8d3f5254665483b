package activities

import (
	"net/http"
	"testing"

	"octflow/callback"
)

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
	g, _ := callback.New("")
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
