// Package testpki makes throwaway certificates for tests: a certificate
// authority, the certificates it signs, and certificates that are their
// own CA. Every key is ECDSA P-256, its PEM PKCS #8 ("PRIVATE KEY"), as
// deploy/make-certs.sh's openssl makes them. Only tests and test helper
// packages import it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of one test: a self-signed certificate
// that may sign others, and its key.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // Cert as a PEM block
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA with the common name name, valid from an hour ago
// until a day from now.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	c, err := LeafOptions{CommonName: name}.issue(true, nil, nil)
	if err != nil {
		t.Fatalf("testpki: CA %q: %v", name, err)
	}
	return &CA{Cert: c.Cert, PEM: c.CertPEM, key: c.TLS.PrivateKey.(*ecdsa.PrivateKey)}
}

// Pool is a certificate pool that trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// LeafOptions are what a certificate names besides its key; it is valid
// from an hour ago until NotAfter.
type LeafOptions struct {
	CommonName string
	DNSNames   []string
	IPs        []string // IP addresses, as "127.0.0.1"
	// ServerAuth and ClientAuth are its extended key usages; with
	// neither it names none (and serves for any).
	ServerAuth, ClientAuth bool
	NotAfter               time.Time // zero: a day from now
}

// Leaf is a certificate and its key, in the forms tests use.
type Leaf struct {
	Cert    *x509.Certificate
	TLS     tls.Certificate // Cert and its key, Leaf set
	CertPEM []byte
	KeyPEM  []byte // PKCS #8
}

// Leaf makes a certificate the CA signs.
func (ca *CA) Leaf(t testing.TB, o LeafOptions) *Leaf {
	t.Helper()
	l, err := o.issue(false, ca.Cert, ca.key)
	if err != nil {
		t.Fatalf("testpki: certificate %q: %v", o.CommonName, err)
	}
	return l
}

// SelfSigned makes a certificate that is its own CA, as a site's test
// setup makes one for a server: a client trusts it by its Pool.
func SelfSigned(t testing.TB, o LeafOptions) *Leaf {
	t.Helper()
	l, err := o.issue(true, nil, nil)
	if err != nil {
		t.Fatalf("testpki: self-signed certificate %q: %v", o.CommonName, err)
	}
	return l
}

// Pool is a certificate pool that trusts l alone, as a root.
func (l *Leaf) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(l.Cert)
	return p
}

// WriteFiles writes the certificate to dir/name.pem and its key to
// dir/name-key.pem, both mode 0600, as deploy/make-certs.sh names them.
func (l *Leaf) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, l.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// issue makes a key and the certificate o describes for it, with a
// random serial number, valid from an hour ago: a CA's (it may sign
// certificates) or a leaf's, signed by parentKey, or self-signed when
// parent is nil.
func (o LeafOptions) issue(isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*Leaf, error) {
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: o.CommonName}, DNSNames: o.DNSNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: o.NotAfter, KeyUsage: x509.KeyUsageDigitalSignature}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	for _, s := range o.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("%q is no IP address", s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	if o.ServerAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.ClientAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	var err error
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	return &Leaf{Cert: cert, TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}
