package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A leaf verifies against its CA's pool for the names it holds and the
// uses it names, not for another name, use or CA; a self-signed one
// against its own pool; the files load as a key pair, readable by their
// owner alone; every key is EC P-256.
func TestCertificatesVerifyAsTheyAreMade(t *testing.T) {
	ca, other := NewCA(t, "test CA"), NewCA(t, "other CA")
	notAfter := time.Now().Add(40 * 24 * time.Hour).Truncate(time.Second)
	server := ca.Leaf(t, LeafOptions{CommonName: "octflow-metrics", DNSNames: []string{"worker"}, IPs: []string{"127.0.0.1"},
		ServerAuth: true, NotAfter: notAfter})
	client := ca.Leaf(t, LeafOptions{CommonName: "client", ClientAuth: true})
	self := SelfSigned(t, LeafOptions{CommonName: "temporal", DNSNames: []string{"temporal"}, ServerAuth: true})
	server2 := ca.Leaf(t, LeafOptions{CommonName: "octflow-metrics"})
	if !server.Cert.NotAfter.Equal(notAfter) || server.Cert.Subject.CommonName != "octflow-metrics" {
		t.Errorf("the server certificate: %s until %v, want octflow-metrics until %v", server.Cert.Subject, server.Cert.NotAfter, notAfter)
	}
	if server.Cert.SerialNumber.Cmp(server2.Cert.SerialNumber) == 0 {
		t.Error("two certificates of one CA share a serial number")
	}
	for _, c := range []struct {
		name  string
		leaf  *Leaf
		pool  *x509.CertPool
		host  string
		usage x509.ExtKeyUsage
		ok    bool
	}{
		{"the server by its name", server, ca.Pool(), "worker", x509.ExtKeyUsageServerAuth, true},
		{"the server by its address", server, ca.Pool(), "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"the server by a name it lacks", server, ca.Pool(), "api", x509.ExtKeyUsageServerAuth, false},
		{"the server as a client", server, ca.Pool(), "", x509.ExtKeyUsageClientAuth, false},
		{"the server trusting another CA", server, other.Pool(), "worker", x509.ExtKeyUsageServerAuth, false},
		{"the client", client, ca.Pool(), "", x509.ExtKeyUsageClientAuth, true},
		{"the client as a server", client, ca.Pool(), "", x509.ExtKeyUsageServerAuth, false},
		{"self-signed by its own pool", self, self.Pool(), "temporal", x509.ExtKeyUsageServerAuth, true},
		{"self-signed by a CA's pool", self, ca.Pool(), "temporal", x509.ExtKeyUsageServerAuth, false},
	} {
		_, err := c.leaf.Cert.Verify(x509.VerifyOptions{Roots: c.pool, DNSName: c.host, KeyUsages: []x509.ExtKeyUsage{c.usage}})
		if (err == nil) != c.ok {
			t.Errorf("%s: verified %v (%v), want %v", c.name, err == nil, err, c.ok)
		}
	}
	if !ca.Cert.IsCA || !self.Cert.IsCA || server.Cert.IsCA {
		t.Errorf("CA: the CA %v, the self-signed %v, the server %v", ca.Cert.IsCA, self.Cert.IsCA, server.Cert.IsCA)
	}
	if len(server.Cert.IPAddresses) != 1 || !server.Cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !slices.Equal(server.Cert.DNSNames, []string{"worker"}) {
		t.Errorf("the server's names %v %v", server.Cert.DNSNames, server.Cert.IPAddresses)
	}

	dir := t.TempDir()
	certFile, keyFile := server.WriteFiles(t, dir, "metrics")
	if certFile != filepath.Join(dir, "metrics.pem") || keyFile != filepath.Join(dir, "metrics-key.pem") {
		t.Errorf("files %s %s", certFile, keyFile)
	}
	for _, f := range []string{certFile, keyFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []any{pair.PrivateKey, server.TLS.PrivateKey, ca.key} {
		if ec, ok := k.(*ecdsa.PrivateKey); !ok || ec.Curve != elliptic.P256() {
			t.Errorf("a key %T, want EC P-256", k)
		}
	}
	if server.TLS.Leaf != server.Cert || string(pair.Certificate[0]) != string(server.Cert.Raw) {
		t.Error("the TLS certificate is not the one made")
	}
}

// Only tests and test helper packages link testpki: no package of
// octflow but audittest depends on it.
func TestOnlyTestHelpersImportTestpki(t *testing.T) {
	allowed := []string{"octflow/audit/audittest"}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "octflow/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && !slices.Contains(allowed, fields[0]) && slices.Contains(fields[1:], "octflow/internal/testpki") {
			t.Errorf("%s depends on octflow/internal/testpki: only %v and tests may", fields[0], allowed)
		}
	}
}
