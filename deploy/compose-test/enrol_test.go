package composetest

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sh runs a deploy script with env added, in dir.
func sh(t *testing.T, dir string, env []string, script string, args ...string) (string, error) {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(repoRoot, "deploy", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(abs, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func certificate(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A node is enrolled without the CA's key on the stack's host: the
// node's key is made on its host and never travels, the stack's host
// makes the bundle without a certificate, and the CA's keeper signs the
// request, setting the role and the campus whatever the request asks.
func TestANodeIsEnrolledByRequestWithoutTheCAKeyOnTheStacksHost(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	root := t.TempDir()
	ca, stack, nodeHost := filepath.Join(root, "ca"), filepath.Join(root, "stack"), filepath.Join(root, "node")
	for _, d := range []string{ca, stack, nodeHost} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-subj", "/CN=octflow test CA", "-days", "2", "-keyout", filepath.Join(ca, "ca-key.pem"), "-out", filepath.Join(ca, "ca.pem")).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v %s", err, out)
	}
	caPEM, _ := os.ReadFile(filepath.Join(ca, "ca.pem"))
	for name, body := range map[string]string{"ca.pem": string(caPEM), "s3-node-accounts": "",
		"codec-keys.json": `{"active": "k1", "keys": {"k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}}`} {
		if err := os.WriteFile(filepath.Join(stack, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The stack's host: the bundle, with no certificate and no key.
	if out, err := sh(t, root, nil, "make-node.sh", "gpu-remote-7", stack); err != nil {
		t.Fatalf("make-node.sh: %v\n%s", err, out)
	}
	bundle := filepath.Join(stack, "nodes", "gpu-remote-7")
	entries, _ := os.ReadDir(bundle)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if want := []string{"ca.pem", "codec-keys.json", "s3-access-key", "s3-secret-key"}; !slices.Equal(files, want) {
		t.Errorf("the bundle made without the CA key holds %v, want %v", files, want)
	}

	// The node's host: its key and request. The request asks to be an
	// operator; the signer decides.
	if out, err := sh(t, root, nil, "node-request.sh", "gpu-remote-7", nodeHost); err != nil {
		t.Fatalf("node-request.sh: %v\n%s", err, out)
	}
	csr := filepath.Join(nodeHost, "node.csr")
	forged := filepath.Join(root, "forged")
	os.MkdirAll(forged, 0o700)
	if out, err := exec.Command("openssl", "req", "-new", "-key", filepath.Join(nodeHost, "node-key.pem"),
		"-subj", "/OU=octflow-operator/CN=gpu-remote-7", "-out", filepath.Join(forged, "node.csr")).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v %s", err, out)
	}

	// Requests the keeper must refuse whatever else they say: a weak key,
	// a name of the stack's own services.
	request := func(dir, subject string, keyArgs ...string) string {
		t.Helper()
		os.MkdirAll(dir, 0o700)
		args := append([]string{"req", "-new", "-nodes", "-subj", subject, "-keyout", filepath.Join(dir, "key.pem"),
			"-out", filepath.Join(dir, "node.csr")}, keyArgs...)
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl: %v %s", err, out)
		}
		return filepath.Join(dir, "node.csr")
	}
	weak := request(filepath.Join(root, "weak"), "/CN=gpu-remote-9", "-newkey", "rsa:2048")
	k1 := request(filepath.Join(root, "k1"), "/CN=gpu-remote-9", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp256k1")
	numbered := request(filepath.Join(root, "numbered"), "/CN=gpu-n-1", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384")
	reserved := request(filepath.Join(root, "reserved"), "/CN=octflow-api-audit", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256")
	northCSR := request(filepath.Join(root, "north"), "/CN=gpu-north-7", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256")

	// The CA's keeper: the role and campus it sets, whatever the request
	// asked; one node ID is never signed for two campuses.
	for _, tc := range []struct {
		name, node, csr, campus string
		ou                      []string // "": refused
	}{
		{"another node's name", "gpu-remote-8", csr, "", nil},
		{"a name of the stack's own", "octflow-api-audit", reserved, "", nil},
		{"a campus that is no name", "gpu-remote-7", csr, "North Wing", nil},
		{"an RSA key of 2048 bits", "gpu-remote-9", weak, "", nil},
		{"a curve Go's TLS does not take", "gpu-remote-9", k1, "", nil},
		{"a campus named by a number", "gpu-n-1", numbered, "1", []string{"octflow-gpu-node", "campus:1"}},
		{"the same node, for a campus whose number reads alike", "gpu-n-1", numbered, "01", nil},
		{"a node of every campus", "gpu-remote-7", csr, "", []string{"octflow-gpu-node"}},
		{"a request that asks to be an operator", "gpu-remote-7", filepath.Join(forged, "node.csr"), "", []string{"octflow-gpu-node"}},
		{"the same node, for north", "gpu-remote-7", csr, "north", nil},
		{"a node bound to north", "gpu-north-7", northCSR, "north", []string{"octflow-gpu-node", "campus:north"}},
		{"the north node, renewed", "gpu-north-7", northCSR, "north", []string{"octflow-gpu-node", "campus:north"}},
		{"the north node, for south", "gpu-north-7", northCSR, "south", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(filepath.Dir(tc.csr), "node.pem")
			if tc.ou != nil {
				os.Remove(out)
			}
			msg, err := sh(t, root, []string{"OCTFLOW_NODE_CAMPUS=" + tc.campus}, "sign-node.sh", tc.node, tc.csr, ca)
			if tc.ou == nil {
				if err == nil {
					t.Errorf("signed: %s", msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("sign-node.sh: %v\n%s", err, msg)
			}
			c := certificate(t, out)
			if c.Subject.CommonName != tc.node || !slices.Equal(c.Subject.OrganizationalUnit, tc.ou) {
				t.Errorf("signed %s, want CN=%s OU=%v", c.Subject, tc.node, tc.ou)
			}
			if days := c.NotAfter.Sub(c.NotBefore).Hours() / 24; days > 91 {
				t.Errorf("the certificate lasts %.0f days, want at most 90", days)
			}
			if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || c.IsCA {
				t.Errorf("usage %v, CA %v: want a client certificate only", c.ExtKeyUsage, c.IsCA)
			}
		})
	}
	issued, _ := os.ReadFile(filepath.Join(ca, "issued-node-certificates"))
	if n, m := strings.Count(string(issued), " gpu-remote-7 - "), strings.Count(string(issued), " gpu-north-7 north "); n != 2 || m != 2 {
		t.Errorf("issued-node-certificates notes %d and %d of the 2 and 2 signed:\n%s", n, m, issued)
	}
	if fi, err := os.Stat(nodeHost); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the node's directory, which holds its key: %v %v, want 0700", fi.Mode(), err)
	}

	// Revoked by its certificate, from the stack's host; not by another
	// node's certificate, nor by a serial that names none.
	revoked := filepath.Join(stack, "revoked-certificates")
	os.WriteFile(revoked, nil, 0o600)
	for _, wrong := range []string{filepath.Join(root, "north", "node.pem"), "00", "serial"} {
		if out, err := sh(t, root, nil, "revoke-node.sh", "gpu-remote-7", stack, wrong); err == nil {
			t.Errorf("revoke-node.sh gpu-remote-7 with %s: %s", filepath.Base(wrong), out)
		}
	}
	if out, err := sh(t, root, nil, "revoke-node.sh", "gpu-remote-7", stack, filepath.Join(nodeHost, "node.pem")); err != nil {
		t.Fatalf("revoke-node.sh: %v\n%s", err, out)
	}
	serial := strings.ToUpper(certificate(t, filepath.Join(nodeHost, "node.pem")).SerialNumber.Text(16))
	if b, _ := os.ReadFile(revoked); !strings.Contains(strings.ToUpper(string(b)), serial) {
		t.Errorf("revoked-certificates %q does not list serial %s", b, serial)
	}
	if b, _ := os.ReadFile(filepath.Join(stack, "s3-node-accounts")); strings.Contains(string(b), "gpu-remote-7") {
		t.Errorf("the revoked node's S3 account is still listed: %q", b)
	}
}
