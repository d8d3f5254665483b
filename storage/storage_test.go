package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"

	"octflow/audit/audittest"
)

// TestAStoreKeepsItsConnectionsToATLSEndpoint sends three rounds of
// concurrent requests to a real S3 endpoint (versitygw) over TLS with a
// CA of the test's own, as a hospital's in-house endpoint is reached,
// through a proxy that counts connections. The store keeps every
// connection it opened for the next request. With Go's default pool (two idle
// connections per host, what a store with a CA file had) or minio-go's
// (16), the connections past the pool's size were closed after each
// request. A store given another CA cannot open.
func TestAStoreKeepsItsConnectionsToATLSEndpoint(t *testing.T) {
	pki := audittest.NewPKI(t)
	endpoint := startTLSEndpoint(t, pki)
	proxy := countingProxy(t, endpoint)
	store, err := Open(t.Context(), Config{Endpoint: proxy.addr, UseTLS: true, CAFile: pki.Path("ca.pem"),
		AccessKey: "octflow-test", SecretKey: "octflow-test-secret", Bucket: "keepalive"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := Open(t.Context(), Config{Endpoint: endpoint, UseTLS: true, CAFile: pki.Path("wrong-ca.pem"),
		AccessKey: "octflow-test", SecretKey: "octflow-test-secret", Bucket: "keepalive"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a store trusting another CA: %v, want a certificate error", err)
	}

	// Each round writes 32 objects side by side, then reads them back
	// side by side: at most 32 requests at once.
	const rounds, concurrent = 3, 32
	for round := range rounds {
		key := func(i int) string { return fmt.Sprintf("r%d/o%d", round, i) }
		body := func(i int) []byte { return fmt.Appendf(nil, "round %d object %d", round, i) }
		sideBySide(t, concurrent, func(i int) error {
			return store.Put(t.Context(), key(i), bytes.NewReader(body(i)), int64(len(body(i))), "text/plain")
		})
		// A connection goes back to the pool just after its response is
		// read: a pause lets them all be there for the next requests.
		time.Sleep(50 * time.Millisecond)
		sideBySide(t, concurrent, func(i int) error {
			got, err := store.ReadAll(t.Context(), key(i))
			if err == nil && !bytes.Equal(got, body(i)) {
				err = fmt.Errorf("%s: read %q, wrote %q", key(i), got, body(i))
			}
			return err
		})
		time.Sleep(50 * time.Millisecond)
	}
	// Every connection the store opened is still open, kept for the next
	// request.
	accepted, closed := proxy.accepted.Load(), proxy.closed.Load()
	t.Logf("%d connections for %d requests, %d closed", accepted, 2*rounds*concurrent, closed)
	if closed > 0 {
		t.Errorf("%d of %d connections were closed between requests", closed, accepted)
	}

	// A read is one GET, with no HEAD before it; a missing object is
	// ErrNotFound from the GET alone.
	var trace bytes.Buffer
	store.client.TraceOn(&trace)
	if _, err := store.ReadAll(t.Context(), "r0/o0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Get(t.Context(), "r0/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing object: %v, want ErrNotFound", err)
	}
	store.client.TraceOff()
	requests := map[string]int{}
	for line := range strings.Lines(trace.String()) {
		if method, _, ok := strings.Cut(line, " /keepalive/"); ok && (method == "GET" || method == "HEAD") {
			requests[method]++
		}
	}
	if requests["GET"] != 2 || requests["HEAD"] != 0 {
		t.Errorf("two reads made %v, want 2 GET and no HEAD", requests)
	}
}

// sideBySide runs do(0) … do(n-1) at once and fails the test on an error.
func sideBySide(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs <- do(i) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// startTLSEndpoint runs versitygw with keep-alive over TLS, serving the
// PKI's 127.0.0.1 certificate, until the test ends; it returns its
// address.
func startTLSEndpoint(t *testing.T, pki audittest.PKI) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	be, err := posix.New(t.TempDir(), meta.XattrMeta{}, posix.PosixOpts{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var runErr error
	go func() {
		defer close(stopped)
		runErr = embedgw.RunVersityGW(ctx, be, &embedgw.Config{RootUserAccess: "octflow-test", RootUserSecret: "octflow-test-secret",
			Ports: []string{addr}, CertFile: pki.Path("server.pem"), KeyFile: pki.Path("server.key"), KeepAlive: true, Quiet: true,
			MaxConnections: 250, MaxRequests: 250, MultipartMaxParts: 10000})
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case <-stopped:
			t.Fatalf("s3 endpoint stopped before it listened: %v", runErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("s3 endpoint not listening on %s", addr)
		}
	}
}

// tcpProxy forwards connections to one address and counts them.
type tcpProxy struct {
	addr             string
	accepted, closed atomic.Int64
}

// countingProxy forwards every connection made to its address to target
// until the test ends.
func countingProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &tcpProxy{addr: ln.Addr().String()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			// Either side closing closes both.
			var once sync.Once
			end := func() {
				out.Close()
				in.Close()
				once.Do(func() { p.closed.Add(1) })
			}
			go func() { io.Copy(out, in); end() }()
			go func() { io.Copy(in, out); end() }()
		}
	}()
	return p
}
