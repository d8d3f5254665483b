package main

import (
	"crypto/tls"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"

	"octflow/internal/testpki"
)

// TestTheServersMetricsAreServedOverTLSOnly: with a certificate, the
// server's Prometheus metrics (Temporal's own reporter, as its
// configuration template sets it up from PROMETHEUS_ENDPOINT) are served
// on the configured address over HTTPS only, to a client that trusts the
// certificate's CA; Temporal's own plain listener is on loopback; the
// front passes on the metrics path and nothing else.
func TestTheServersMetricsAreServedOverTLSOnly(t *testing.T) {
	if _, _, err := metricsOverTLS(&metrics.Config{}, &tls.Config{}, nil); err == nil || !strings.Contains(err.Error(), "PROMETHEUS_ENDPOINT") {
		t.Errorf("a certificate and no Prometheus listener: %v, want a refusal naming PROMETHEUS_ENDPOINT", err)
	}

	cert := testpki.SelfSigned(t, testpki.LeafOptions{CommonName: "temporal", DNSNames: []string{"temporal"}, IPs: []string{"127.0.0.1"}, ServerAuth: true})
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert.TLS}}

	m := &metrics.Config{Prometheus: &metrics.PrometheusConfig{ListenAddress: "127.0.0.1:0", TimerType: "histogram"}}
	front, addr, err := metricsOverTLS(m, cfg, stdlog.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	if host, _, _ := net.SplitHostPort(m.Prometheus.ListenAddress); host != "127.0.0.1" || m.Prometheus.ListenAddress == "127.0.0.1:0" {
		t.Fatalf("Temporal's own listener on %q, want a port of the loopback", m.Prometheus.ListenAddress)
	}
	// As the server does at its start (temporal.NewServer).
	h, err := metrics.MetricsHandlerFromConfig(log.NewNoopLogger(), m)
	if err != nil {
		t.Fatal(err)
	}
	h.Counter("octflow_front_test").Record(1)

	trusting := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cert.Pool(), ServerName: "temporal", MinVersion: tls.VersionTLS12}}}
	get := func(c *http.Client, url string) (int, string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	// Temporal's reporter shows a counter within a second or so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := get(trusting, "https://"+addr+"/metrics")
		if err == nil && code == http.StatusOK && strings.Contains(body, "octflow_front_test") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("https /metrics: %d %v, no octflow_front_test in %.300s", code, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cases := []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"plain http", &http.Client{Timeout: 5 * time.Second}, "http://" + addr + "/metrics"},
		{"https, trusting the system's CAs", &http.Client{Timeout: 5 * time.Second}, "https://" + addr + "/metrics"},
		{"https, another path", trusting, "https://" + addr + "/debug/pprof/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, body, err := get(c.client, c.url); err == nil && (code == http.StatusOK || strings.Contains(body, "octflow_front_test")) {
				t.Errorf("GET %s: %d, want no answer", c.url, code)
			}
		})
	}
}
