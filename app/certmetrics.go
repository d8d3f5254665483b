package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// certificateExpiry exports when the certificates a process holds, and
// those of the servers it checks, expire:
// octflow_certificate_expiry_timestamp_seconds{use, subject}, the
// certificate's NotAfter in Unix seconds. use says which: api-server
// (the gateway's HTTPS certificate), temporal-client (its certificate
// for Temporal), temporal-server (the Temporal frontend's, as last seen
// in a handshake). subject is the certificate's common name: a service
// or node name, never a patient's. The alerts
// OctflowCertificateExpiring and OctflowCertificateExpiresSoon read it.
type certificateExpiry struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	seen map[string]*x509.Certificate // by use
}

func newCertificateExpiry() *certificateExpiry {
	return &certificateExpiry{
		desc: prometheus.NewDesc("octflow_certificate_expiry_timestamp_seconds",
			"When a certificate this process holds (api-server, temporal-client) or checks (temporal-server, the peer of its last handshake) expires, in Unix seconds.",
			[]string{"use", "subject"}, nil),
		seen: map[string]*x509.Certificate{},
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
