package app

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// certificateExpiry exports when the certificates a process holds, and
// those of the servers it checks, expire:
// octflow_certificate_expiry_timestamp_seconds{use, subject}, the
// certificate's NotAfter in Unix seconds. use says which: api-server
// (the gateway's HTTPS certificate), temporal-client (its certificate
// for Temporal), temporal-server (the Temporal frontend's, as last seen
// in a handshake), or the name of a certificate file it watches for
// the services that export no metrics of their own (Options.CertificateFiles:
// s3.pem, audit.pem, …). subject is the certificate's common name: a
// service or node name, never a patient's. The alerts
// OctflowCertificateExpiring and OctflowCertificateExpiresSoon read it.
type certificateExpiry struct {
	desc *prometheus.Desc
	log  *zap.Logger
	mu   sync.Mutex
	seen map[string]*x509.Certificate // by use
	// files are the watched files, by use (the file's name), read again
	// at each collection.
	files map[string]string
}

func newCertificateExpiry(log *zap.Logger) *certificateExpiry {
	return &certificateExpiry{
		desc: prometheus.NewDesc("octflow_certificate_expiry_timestamp_seconds",
			"When a certificate this process holds (api-server, temporal-client), checks (temporal-server, the peer of its last handshake) or watches (the file it is in, e.g. s3.pem) expires, in Unix seconds.",
			[]string{"use", "subject"}, nil),
		log:   log,
		seen:  map[string]*x509.Certificate{},
		files: map[string]string{},
	}
}

// watch exports the first certificate (a chain's leaf) of each of paths
// under the file's name, read now, which must succeed, and again at
// each collection, so that a certificate replaced in place is seen; one
// that cannot be read then keeps its last reading, and is logged. Two
// files of one name are refused: their series would be one.
func (c *certificateExpiry) watch(paths []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, path := range paths {
		use := filepath.Base(path)
		if other, ok := c.files[use]; ok {
			return fmt.Errorf("certificate files %s and %s: two files of one name", other, path)
		}
		if _, ok := c.seen[use]; ok {
			return fmt.Errorf("certificate file %s: %s names a certificate this process holds", path, use)
		}
		cert, err := readCertificate(path)
		if err != nil {
			return err
		}
		c.files[use], c.seen[use] = path, cert
	}
	return nil
}

// readCertificate is the first certificate in the PEM file at path.
func readCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certificate file: %w", err)
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, fmt.Errorf("certificate file %s: no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certificate file %s: %w", path, err)
			}
			return cert, nil
		}
	}
}

// hold records the leaf of each of cfg's certificates under use (nil
// cfg, or none: nothing).
func (c *certificateExpiry) hold(use string, cfg *tls.Config) error {
	if cfg == nil || len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return nil
	}
	leaf := cfg.Certificates[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cfg.Certificates[0].Certificate[0]); err != nil {
			return fmt.Errorf("%s certificate: %w", use, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[use] = leaf
	return nil
}

// checking is cfg (nil: nil) with each handshake's peer certificate
// recorded under use, after whatever cfg itself checks; cfg is not
// changed.
func (c *certificateExpiry) checking(use string, cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	out := cfg.Clone()
	verify := cfg.VerifyConnection
	out.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) > 0 {
			c.mu.Lock()
			c.seen[use] = cs.PeerCertificates[0]
			c.mu.Unlock()
		}
		return nil
	}
	return out
}

// Describe implements prometheus.Collector.
func (c *certificateExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *certificateExpiry) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for use, path := range c.files {
		cert, err := readCertificate(path)
		if err != nil {
			c.log.Warn("a watched certificate file cannot be read: its last reading stands", zap.String("file", path), zap.Error(err))
			continue
		}
		c.seen[use] = cert
	}
	for use, cert := range c.seen {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), use, cert.Subject.CommonName)
	}
}

// register registers c, or does nothing where another App of this
// process registered its own (octflow dev: one registry).
func (c *certificateExpiry) register(reg prometheus.Registerer) error {
	if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return fmt.Errorf("certificate metrics: %w", err)
	}
	return nil
}
