package app

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"octflow/internal/testpki"
)

// TestCertificateExpiryIsExported: the certificates a process holds are
// exported with their NotAfter as soon as it starts, and a server's once
// a handshake has checked it, each by use and common name; nothing
// without a certificate.
func TestCertificateExpiryIsExported(t *testing.T) {
	mine, myLeaf := testPair(t, "octflow-api", time.Now().Add(40*24*time.Hour))
	theirs, theirLeaf := testPair(t, "temporal", time.Now().Add(400*24*time.Hour))
	c := newCertificateExpiry(zap.NewNop())
	if err := c.hold("temporal-client", &tls.Config{Certificates: []tls.Certificate{mine}}); err != nil {
		t.Fatal(err)
	}
	if err := c.hold("api-server", nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := c.register(reg); err != nil {
		t.Fatal(err)
	}
	if err := c.register(reg); err != nil {
		t.Errorf("a second App of the process: %v", err)
	}
	// exported is what the registry gives: "use subject" → NotAfter.
	exported := func() map[string]int64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, mf := range mfs {
			if mf.GetName() != "octflow_certificate_expiry_timestamp_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				out[labels["use"]+" "+labels["subject"]] = int64(m.GetGauge().GetValue())
			}
		}
		return out
	}
	check := func(want map[string]*x509.Certificate) {
		t.Helper()
		got := exported()
		if len(got) != len(want) {
			t.Errorf("exported %v, want %d certificates", got, len(want))
		}
		for use, leaf := range want {
			if v, ok := got[use+" "+leaf.Subject.CommonName]; !ok || v != leaf.NotAfter.Unix() {
				t.Errorf("%s %s: %d (exported %v), want %d", use, leaf.Subject.CommonName, v, ok, leaf.NotAfter.Unix())
			}
		}
	}
	check(map[string]*x509.Certificate{"temporal-client": myLeaf})

	// A handshake with the server records its certificate.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{theirs}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(theirLeaf)
	base := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	conn, err := tls.Dial("tcp", ln.Addr().String(), c.checking("temporal-server", base))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if base.VerifyConnection != nil {
		t.Error("checking changed the caller's configuration")
	}
	check(map[string]*x509.Certificate{"temporal-client": myLeaf, "temporal-server": theirLeaf})

	// The caller's own check still runs, and refuses; so does the
	// chain's against a server no CA of the pool signed.
	refusing := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1",
		VerifyConnection: func(tls.ConnectionState) error { return errors.New("refused by the caller's check") }}
	if conn, err := tls.Dial("tcp", ln.Addr().String(), c.checking("temporal-server", refusing)); err == nil || !strings.Contains(err.Error(), "refused by the caller's check") {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("a handshake the caller's check refuses: %v", err)
	}
	if conn, err := tls.Dial("tcp", ln.Addr().String(), c.checking("temporal-server", &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"})); err == nil {
		conn.Close()
		t.Error("a handshake with a server no trusted CA signed succeeded")
	}
}

// testPair is a self-signed certificate for 127.0.0.1 named cn, valid
// until notAfter, and its parsed leaf.
func testPair(t *testing.T, cn string, notAfter time.Time) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	l := testpki.SelfSigned(t, testpki.LeafOptions{CommonName: cn, IPs: []string{"127.0.0.1"}, ServerAuth: true, ClientAuth: true, NotAfter: notAfter})
	return l.TLS, l.Cert
}

// certPEM is leaf as a PEM block.
func certPEM(leaf *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
}

// expiries is what reg exports of the certificates: "use subject" →
// NotAfter.
func expiries(t *testing.T, reg *prometheus.Registry) map[string]int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, mf := range mfs {
		if mf.GetName() != "octflow_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["use"]+" "+labels["subject"]] = int64(m.GetGauge().GetValue())
		}
	}
	return out
}

// Certificate files a process watches (the services' that export no
// metrics, OCTFLOW_CERTIFICATE_FILES) are exported under the file's name
// beside the ones it holds: each file's first certificate (a chain's
// leaf, past a key before it), read again at each scrape, so one
// renewed in place is seen; one unreadable then keeps its last reading
// and is logged. What could not be watched at all stops the start.
func TestWatchedCertificateFilesAreExported(t *testing.T) {
	dir := t.TempDir()
	_, s3 := testPair(t, "s3", time.Now().Add(40*24*time.Hour))
	_, renewed := testPair(t, "s3", time.Now().Add(800*24*time.Hour))
	_, proxy := testPair(t, "s3-proxy", time.Now().Add(5*24*time.Hour))
	_, ca := testPair(t, "octflow stack CA", time.Now().Add(1600*24*time.Hour))
	_, mine := testPair(t, "octflow-api", time.Now().Add(90*24*time.Hour))
	write := func(name string, parts ...[]byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, bytes.Join(parts, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("not a key")})
	s3File := write("s3.pem", certPEM(s3))
	proxyFile := write("s3-proxy.pem", key, certPEM(proxy), certPEM(ca)) // a key, then a chain
	caFile := write("ca.pem", certPEM(ca))
	other := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(other, certPEM(ca), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		paths   []string
		wantErr string
	}{
		{"a missing file", []string{filepath.Join(dir, "audit.pem")}, "no such file"},
		{"a file of no certificate", []string{write("empty.pem", key)}, "no PEM certificate"},
		{"two files of one name", []string{caFile, other}, "two files of one name"},
		{"a file named as a certificate held", []string{write("temporal-client", certPEM(ca))}, "a certificate this process holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCertificateExpiry(zap.NewNop())
			if err := c.hold("temporal-client", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{mine.Raw}}}}); err != nil {
				t.Fatal(err)
			}
			if err := c.watch(tc.paths); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("watch(%v) = %v, want an error saying %q", tc.paths, err, tc.wantErr)
			}
		})
	}

	core, logs := observer.New(zap.WarnLevel)
	c := newCertificateExpiry(zap.New(core))
	if err := c.hold("temporal-client", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{mine.Raw}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.watch([]string{s3File, proxyFile, caFile}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := c.register(reg); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		change  func()
		want    map[string]int64
		warning bool
	}{
		{"as read at the start", func() {}, map[string]int64{"temporal-client octflow-api": mine.NotAfter.Unix(),
			"s3.pem s3": s3.NotAfter.Unix(), "s3-proxy.pem s3-proxy": proxy.NotAfter.Unix(), "ca.pem octflow stack CA": ca.NotAfter.Unix()}, false},
		{"s3.pem renewed in place", func() { write("s3.pem", certPEM(renewed)) }, map[string]int64{"temporal-client octflow-api": mine.NotAfter.Unix(),
			"s3.pem s3": renewed.NotAfter.Unix(), "s3-proxy.pem s3-proxy": proxy.NotAfter.Unix(), "ca.pem octflow stack CA": ca.NotAfter.Unix()}, false},
		{"s3-proxy.pem gone", func() { os.Remove(proxyFile) }, map[string]int64{"temporal-client octflow-api": mine.NotAfter.Unix(),
			"s3.pem s3": renewed.NotAfter.Unix(), "s3-proxy.pem s3-proxy": proxy.NotAfter.Unix(), "ca.pem octflow stack CA": ca.NotAfter.Unix()}, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			before := logs.Len()
			step.change()
			if got := expiries(t, reg); !maps.Equal(got, step.want) {
				t.Errorf("exported %v, want %v", got, step.want)
			}
			if warned := logs.Len() > before; warned != step.warning {
				t.Errorf("logged a warning: %v, want %v (%v)", warned, step.warning, logs.All())
			}
		})
	}
}
