package app

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"octflow/activities"
	"octflow/config"
	"octflow/internal/testpki"
)

// TestTheMetricsListenerServesTLSOnlyWithItsCertificate: a worker given
// OCTFLOW_METRICS_CERT_FILE and _KEY_FILE serves /metrics over HTTPS
// only, to a client that trusts the stack's CA and checks the name it
// asks for; a plain-HTTP request, a client that trusts another CA and
// one that asks for a name the certificate does not hold get no
// metrics. Without the files the listener is plain HTTP, as before. The
// certificate's expiry is exported (use metrics-server).
func TestTheMetricsListenerServesTLSOnlyWithItsCertificate(t *testing.T) {
	// A CA and a metrics server certificate it signed, for 127.0.0.1 and
	// the name "worker" (as deploy/make-certs.sh makes metrics.pem), in
	// files as a deployment has them.
	ca := testpki.NewCA(t, "test stack CA")
	leaf := ca.Leaf(t, testpki.LeafOptions{CommonName: "octflow-metrics", DNSNames: []string{"worker"}, IPs: []string{"127.0.0.1"}, ServerAuth: true})
	certFile, keyFile := leaf.WriteFiles(t, t.TempDir(), "metrics")
	trusting := func(serverName string) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	type request struct {
		name   string
		scheme string
		client *http.Client
		want   bool // /metrics answered 200 with the registry
	}
	listeners := []struct {
		name     string
		vars     map[string]string
		scheme   string // MetricsURL's
		requests []request
	}{
		{"with the certificate", map[string]string{"OCTFLOW_METRICS_CERT_FILE": certFile, "OCTFLOW_METRICS_KEY_FILE": keyFile}, "https",
			[]request{
				{"https, trusting the CA", "https", trusting(""), true},
				{"https, trusting the CA, asking for worker", "https", trusting("worker"), true},
				{"https, asking for a name the certificate lacks", "https", trusting("api"), false},
				{"https, trusting the system's CAs", "https", &http.Client{Timeout: 5 * time.Second}, false},
				{"plain http", "http", plain, false},
			}},
		{"without", nil, "http",
			[]request{
				{"plain http", "http", plain, true},
				{"https", "https", trusting(""), false},
			}},
	}
	for _, l := range listeners {
		t.Run(l.name, func(t *testing.T) {
			vars := map[string]string{"OCTFLOW_METRICS_ADDR": "127.0.0.1:0"}
			for k, v := range l.vars {
				vars[k] = v
			}
			s := config.New("worker", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
			proc := config.BindProcess(s)
			if err := s.Parse(nil); err != nil {
				t.Fatal(err)
			}
			opts := Options{Logger: zap.NewNop(), MetricsAddr: proc.MetricsAddr, MetricsTLS: proc.MetricsTLS}
			a := &App{metrics: NewMetrics(activities.Pipeline().Specs())}
			if _, err := a.watchCertificates(opts); err != nil {
				t.Fatal(err)
			}
			if err := a.serveMetrics(opts); err != nil {
				t.Fatal(err)
			}
			defer a.mhttp.Close()
			if !strings.HasPrefix(a.MetricsURL(), l.scheme+"://127.0.0.1:") {
				t.Errorf("MetricsURL %s, want %s", a.MetricsURL(), l.scheme)
			}
			exp := expiries(t, a.metrics.Registry)
			if got, ok := exp["metrics-server octflow-metrics"]; (l.vars != nil) != ok || ok && got != leaf.Cert.NotAfter.Unix() {
				t.Errorf("certificate expiries %v: the metrics listener's (%v) wrong", exp, l.vars != nil)
			}
			for _, r := range l.requests {
				t.Run(r.name, func(t *testing.T) {
					resp, err := r.client.Get(r.scheme + "://" + a.maddr + "/metrics")
					ok := false
					if err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						ok = resp.StatusCode == http.StatusOK && strings.Contains(string(body), "go_goroutines")
					}
					if ok != r.want {
						t.Errorf("GET %s /metrics answered %v (%v), want %v", r.scheme, ok, err, r.want)
					}
				})
			}
		})
	}
}
