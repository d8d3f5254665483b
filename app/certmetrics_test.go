package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCertificateExpiryIsExported: the certificates a process holds are
// exported with their NotAfter as soon as it starts, and a server's once
// a handshake has checked it, each by use and common name; nothing
// without a certificate.
func TestCertificateExpiryIsExported(t *testing.T) {
	mine, myLeaf := testPair(t, "octflow-api", time.Now().Add(40*24*time.Hour))
	theirs, theirLeaf := testPair(t, "temporal", time.Now().Add(400*24*time.Hour))
	c := newCertificateExpiry()
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}
