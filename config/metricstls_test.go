package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"octflow/internal/testpki"
)

// testPairFiles writes a self-signed certificate and its key as PEM
// files, and a file that is no certificate.
func testPairFiles(t *testing.T) (cert, key, junk string) {
	t.Helper()
	dir := t.TempDir()
	cert, key = testpki.SelfSigned(t, testpki.LeafOptions{CommonName: "octflow-metrics"}).WriteFiles(t, dir, "metrics")
	junk = filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, junk
}

// The metrics listener's certificate (OCTFLOW_METRICS_CERT_FILE,
// OCTFLOW_METRICS_KEY_FILE) for every process that serves /metrics: the
// api, the worker and GPU node, the stack's Temporal server. Both files
// or neither; a pair that does not load, or a certificate with no
// listener to serve it, stops the process naming the variables.
func TestTheMetricsListenersCertificate(t *testing.T) {
	cert, key, junk := testPairFiles(t)
	// binders bind one command's settings and give what it read: the
	// listener's address and its TLS.
	binders := map[string]func(*Set) func() (string, *tls.Config){
		"api": func(s *Set) func() (string, *tls.Config) {
			v := BindServing(s, serving())
			return func() (string, *tls.Config) { return v.MetricsAddr, v.MetricsTLS }
		},
		"worker": func(s *Set) func() (string, *tls.Config) {
			p := BindProcess(s)
			return func() (string, *tls.Config) { return p.MetricsAddr, p.MetricsTLS }
		},
		"octflow-temporal": func(s *Set) func() (string, *tls.Config) {
			ts := BindTemporalServer(s)
			return func() (string, *tls.Config) { return "(PROMETHEUS_ENDPOINT)", ts.MetricsTLS }
		},
	}
	cases := []struct {
		command string
		vars    map[string]string
		tls     bool   // a TLS configuration with the certificate
		err     string // what the error must name; "": accepted
	}{
		{"api", nil, false, ""},
		{"api", map[string]string{"OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": key}, true, ""},
		{"api", map[string]string{"OCTFLOW_METRICS_CERT_FILE": cert}, false, "OCTFLOW_METRICS_KEY_FILE"},
		{"api", map[string]string{"OCTFLOW_METRICS_KEY_FILE": key}, false, "OCTFLOW_METRICS_CERT_FILE"},
		{"api", map[string]string{"OCTFLOW_METRICS_CERT_FILE": junk, "OCTFLOW_METRICS_KEY_FILE": key}, false, "OCTFLOW_METRICS_CERT_FILE"},
		{"api", map[string]string{"OCTFLOW_METRICS_ADDR": "off", "OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": key}, false, "OCTFLOW_METRICS_ADDR is off"},
		{"worker", nil, false, ""},
		{"worker", map[string]string{"OCTFLOW_METRICS_ADDR": ":9464", "OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": key}, true, ""},
		{"worker", map[string]string{"OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": key}, false, "OCTFLOW_METRICS_ADDR is off"},
		{"worker", map[string]string{"OCTFLOW_METRICS_ADDR": ":9464", "OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": junk}, false, "OCTFLOW_METRICS_KEY_FILE"},
		{"octflow-temporal", nil, false, ""},
		{"octflow-temporal", map[string]string{"OCTFLOW_METRICS_CERT_FILE": cert, "OCTFLOW_METRICS_KEY_FILE": key}, true, ""},
		{"octflow-temporal", map[string]string{"OCTFLOW_METRICS_CERT_FILE": cert}, false, "OCTFLOW_METRICS_KEY_FILE"},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(keys(c.vars), ","), func(t *testing.T) {
			s := New(c.command, env(c.vars))
			read := binders[c.command](s)
			err := s.Parse(nil)
			addr, cfg := read()
			switch {
			case c.err == "" && err != nil:
				t.Fatal(err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one naming %s", err, c.err)
			case c.err == "" && (cfg != nil) != c.tls:
				t.Errorf("metrics on %q, TLS %v, want TLS %v", addr, cfg != nil, c.tls)
			case cfg != nil && (len(cfg.Certificates) != 1 || cfg.MinVersion < tls.VersionTLS12):
				t.Errorf("metrics TLS %+v, want the one certificate, TLS 1.2 or later", cfg)
			}
		})
	}
}
