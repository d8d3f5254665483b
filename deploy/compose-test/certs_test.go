package composetest

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A certificate is renewed by deleting it and its key and running
// deploy/make-certs.sh again, with the CA's key back for the run: it
// makes that one certificate, under the same CA. With the key kept
// offline it refuses and makes nothing (never a new CA, which would leave
// every other certificate untrusted), and with nothing to make it does
// nothing.
func TestARenewalNeedsTheCAKeyAndKeepsTheCA(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	script := filepath.Join(repoRoot, "deploy/make-certs.sh")
	dir, offline := t.TempDir(), t.TempDir()
	run := func() (string, error) {
		cmd := exec.Command(script, dir)
		cmd.Env = append(os.Environ(), "OCTFLOW_API_HOSTS=octflow.hospital.test")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil {
		t.Fatalf("make-certs.sh: %v: %s", err, out)
	}
	ca := readFile(t, filepath.Join(dir, "ca.pem"))
	worker := readFile(t, filepath.Join(dir, "temporal-worker.pem"))
	if err := os.Rename(filepath.Join(dir, "ca-key.pem"), filepath.Join(offline, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(); err != nil || readFile(t, filepath.Join(dir, "ca.pem")) != ca {
		t.Errorf("make-certs.sh with every certificate there and the CA key offline: %v %s; the CA changed: %v", err, out, readFile(t, filepath.Join(dir, "ca.pem")) != ca)
	}
	for _, f := range []string{"temporal-worker.pem", "temporal-worker-key.pem"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(); err == nil || !strings.Contains(out, "ca-key.pem is not in") {
		t.Errorf("make-certs.sh renewing with the CA key offline: %v %s, want a refusal", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "temporal-worker.pem")); err == nil || readFile(t, filepath.Join(dir, "ca.pem")) != ca {
		t.Error("make-certs.sh made a certificate, or a new CA, without the CA key")
	}
	if err := os.Rename(filepath.Join(offline, "ca-key.pem"), filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	out, err := run()
	if err != nil || strings.TrimSpace(out) != "made temporal-worker.pem (octflow-worker; 825 days)" {
		t.Fatalf("make-certs.sh renewing the worker's certificate: %v %q", err, out)
	}
	renewed := readFile(t, filepath.Join(dir, "temporal-worker.pem"))
	if renewed == worker || readFile(t, filepath.Join(dir, "ca.pem")) != ca {
		t.Fatal("the worker's certificate was not renewed under the same CA")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca))
	block, _ := pem.Decode([]byte(renewed))
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the renewed certificate does not verify under the stack's CA for client use: %v", err)
	}
	if len(c.Subject.OrganizationalUnit) != 1 || c.Subject.OrganizationalUnit[0] != "octflow-worker" {
		t.Errorf("the renewed certificate's role (OU) is %v, want octflow-worker", c.Subject.OrganizationalUnit)
	}
}
