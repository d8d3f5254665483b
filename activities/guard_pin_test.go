package activities

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/net/dns/dnsmessage"

	"octflow/callback"
	"octflow/contract"
	"octflow/exam"
)

// These tests pin the callback guard's safety properties: what it refuses
// over https (where the scheme is no reason to refuse), and its second
// look at the address a name resolves to when the connection is made.

// The guarded client refuses, at the moment it connects, any address the
// guard refuses, whatever the URL said: literal addresses reach the
// dialer only this way when a caller skips Check, names always do.
func TestTheGuardedDialerRefusesInternalAddressesBeforeConnecting(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	g, err := callback.New("")
	if err != nil {
		t.Fatal(err)
	}
	w := &Webhooks{Guard: g}
	dial := w.client(false).Transport.(*http.Transport).DialContext
	for _, addr := range []string{
		netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String(),
		netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), uint16(port)).String(),
		"169.254.169.254:443",
		"10.0.0.1:443",
		"192.168.1.1:443",
		"100.64.0.1:443",
	} {
		t.Run(addr, func(t *testing.T) {
			// The deadline only bounds a dialer that does not refuse.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := dial(ctx, "tcp", addr)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, callback.ErrRefused) {
				t.Errorf("dial %s: %v, want it refused by the guard", addr, err)
			}
		})
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the local server saw %d connections", n)
	}
}

// A callback URL whose name passes Check (nothing is resolved then) but
// resolves, when the event is delivered, to the loopback address: DNS
// rebinding. The delivery must be refused for good at the dial, and the
// local server never reached. The same name on the allow-list is
// delivered, so the refusal is the guard's.
func TestADeliveryToANameThatResolvesToLoopbackIsRefusedAtTheDial(t *testing.T) {
	const name = "example.com" // the name in httptest's certificate
	useResolver(t, map[string]netip.Addr{name + ".": netip.MustParseAddr("127.0.0.1")})

	var mu sync.Mutex
	var conns, requests int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requests++
		mu.Unlock()
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	hook := (&url.URL{Scheme: "https", Host: net.JoinHostPort(name, strconv.Itoa(port)), Path: "/hook"}).String()

	for _, c := range []struct {
		name      string
		allow     string
		delivered bool
	}{
		{"guarded", ":" + strconv.Itoa(port), false},
		{"allow-listed host", name, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			conns, requests = 0, 0
			mu.Unlock()
			g, err := callback.New(c.allow)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Check(hook); err != nil {
				t.Fatalf("Check refused %s before any resolution: %v", hook, err)
			}
			w := &Webhooks{Guard: g, Secrets: map[string]string{"*": "site-secret"}, PublicURL: "https://octflow.example"}
			// Trust the test server's certificate on both clients: only
			// the guard can stop the guarded delivery.
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			for _, allow := range []bool{false, true} {
				w.client(allow).Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
			}
			a := &Activities{Workstations: &Workstations{Webhooks: w}, Node: "cpu-1"}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a.NotifyWorkstation)
			in := contract.NotifyInput{Exam: exam.Submission{ExamID: "E1", Campus: "north", CallbackURL: hook}}
			v, err := env.ExecuteActivity(a.NotifyWorkstation, in)
			mu.Lock()
			gotConns, gotRequests := conns, requests
			mu.Unlock()
			if c.delivered {
				var out contract.StageOutput
				if err != nil || v.Get(&out) != nil || !out.Delivered || gotRequests != 1 {
					t.Fatalf("allow-listed delivery: err %v, %d requests", err, gotRequests)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != "CallbackRejected" || !app.NonRetryable() {
				t.Errorf("delivery to a name resolving to loopback: %v, want a final CallbackRejected", err)
			}
			if err != nil && !strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("the refusal does not name the address: %v", err)
			}
			if gotConns != 0 || gotRequests != 0 {
				t.Errorf("the loopback server saw %d connections, %d requests", gotConns, gotRequests)
			}
		})
	}
}

// useResolver points the process's resolver, for the test, at an
// in-memory DNS server that answers A queries for names and nothing else
// (hosts files are still read first, so names must not be in them).
func useResolver(t *testing.T, names map[string]netip.Addr) {
	t.Helper()
	prev := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, names)
		return client, nil
	}}
	t.Cleanup(func() { net.DefaultResolver = prev })
}

// serveDNS answers DNS over a stream (two-byte length prefixes).
func serveDNS(c net.Conn, names map[string]netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(msg)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if ip, ok := names[strings.ToLower(q.Name.String())]; ok && q.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
				dnsmessage.AResource{A: ip.As4()})
		}
		out, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(out)))
		if _, err := c.Write(append(n[:], out...)); err != nil {
			return
		}
	}
}
