package composetest

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// deploy/make-certs.sh makes each certificate live a week less than the
// one made before it, so that they never all come up for renewal on one
// day; a lifetime the stagger would take below four weeks is refused,
// with nothing made.
func TestTheStacksCertificatesExpireAWeekApart(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	script := filepath.Join(repoRoot, "deploy/make-certs.sh")
	short := t.TempDir()
	cmd := exec.Command(script, short)
	cmd.Env = append(os.Environ(), "OCTFLOW_CERT_DAYS=100")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("make-certs.sh with 100 days: %s, want a refusal", out)
	}
	if made, _ := filepath.Glob(filepath.Join(short, "*.pem")); len(made) > 0 {
		t.Errorf("make-certs.sh with 100 days made %v", made)
	}

	dir := t.TempDir()
	cmd = exec.Command(script, dir)
	cmd.Env = append(os.Environ(), "OCTFLOW_API_HOSTS=octflow.hospital.test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-certs.sh: %v: %s", err, out)
	}
	notAfter := func(name string) time.Time {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("%s holds no PEM block", name)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c.NotAfter
	}
	// The first three leaves, in the order the script makes them.
	api, temporal, temporalAPI := notAfter("api.pem"), notAfter("temporal.pem"), notAfter("temporal-api.pem")
	for _, gap := range []time.Duration{api.Sub(temporal), temporal.Sub(temporalAPI)} {
		if d := gap.Round(time.Hour); d != 7*24*time.Hour {
			t.Errorf("certificates made one after the other expire %s apart, want a week", d)
		}
	}
	if days := time.Until(api).Hours() / 24; days < 820 || days > 826 {
		t.Errorf("the first certificate lives %.0f days, want OCTFLOW_CERT_DAYS (825)", days)
	}
}
