package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"octflow/api"
	"octflow/internal/devsystem"
	"octflow/internal/testpki"
)

// TestTheGatewayServesHTTPSWithItsCertificate gives the gateway a
// certificate: `octflow submit` trusting its CA sends an exam to
// COMPLETED over HTTPS, a client that does not trust it is refused, and
// nothing is served in clear.
func TestTheGatewayServesHTTPSWithItsCertificate(t *testing.T) {
	dir := t.TempDir()
	// A certificate for 127.0.0.1 that is its own CA, as a site's test
	// setup would make.
	cert := testpki.SelfSigned(t, testpki.LeafOptions{CommonName: "octflow test", IPs: []string{"127.0.0.1"}, ServerAuth: true})
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.APITLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert.TLS}}
	})
	base := h.sys.App.APIURL()
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("the gateway's URL is %s, want https", base)
	}

	caFile, scanFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "exam.dcm")
	_, scan := phantomDICOM(t, tiny(301))
	if err := os.WriteFile(caFile, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scanFile, scan, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), "OCTFLOW_TOKEN="+h.sys.Secrets.Device,
		"OCTFLOW_TEST_AS_MAIN=submit --api "+base+" --api-ca-file "+caFile+" --file "+scanFile+" --exam-id tls-1 --wait")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"state": "COMPLETED"`) {
		t.Fatalf("octflow submit over HTTPS: %v\n%s", err, out)
	}

	// The gateway's certificate is watched: its expiry on /metrics.
	resp, err := http.Get(h.sys.App.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	expiry := metricSamples(metrics, "octflow_certificate_expiry_timestamp_seconds", `use="api-server"`, `subject="octflow test"`)
	if len(expiry) != 1 {
		t.Errorf("/metrics: the api-server certificate's expiry %v, want one sample", expiry)
	}
	for _, v := range expiry {
		if int64(v) != cert.Cert.NotAfter.Unix() {
			t.Errorf("/metrics: the api-server certificate expires at %v, want %d", v, cert.Cert.NotAfter.Unix())
		}
	}

	// A client without the CA does not get through.
	untrusting := &api.Client{Base: base, Token: h.sys.Secrets.Clinician, HTTP: &http.Client{Timeout: 10 * time.Second}}
	if _, err := untrusting.Status(context.Background(), "tls-1"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the certificate: %v, want a certificate error", err)
	}
	// Plain HTTP to the same port is not answered with the API.
	plain := &api.Client{Base: "http://" + strings.TrimPrefix(base, "https://"), Token: h.sys.Secrets.Clinician,
		HTTP: &http.Client{Timeout: 10 * time.Second}}
	if code, err := plain.Do(mustRequest(t, plain.Base+"/v1/exams/tls-1"), nil); err == nil || code == http.StatusOK {
		t.Errorf("plain HTTP to the HTTPS port answered %d %v", code, err)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
