package composetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"

	"octflow/api/auth"
)

// Without its settings the shipped file does not load, so `docker
// compose up` stops and names each one and how to set it, instead of
// falling back to a placeholder URL or loopback binds.
func TestTheStackDoesNotStartWithoutItsSettings(t *testing.T) {
	_, err := loadStack(repoRoot, types.Mapping{}, "docker-compose.yml")
	if err == nil {
		t.Fatal("docker-compose.yml loads without OCTFLOW_PUBLIC_URL and the binds")
	}
	for _, v := range []string{"OCTFLOW_PUBLIC_URL", "OCTFLOW_TEMPORAL_BIND", "OCTFLOW_S3_BIND"} {
		if !strings.Contains(err.Error(), v) || !strings.Contains(err.Error(), "deploy/init.sh") {
			t.Errorf("the refusal does not name %s and deploy/init.sh: %v", v, err)
		}
	}
}

// deploy/init.sh, on a clean copy of the repository's deploy files:
// refuses placeholders (an example.org URL, a public URL that is not
// https) and writes nothing then; given real answers it writes .env
// (which the shipped file then loads from, with no variable set in the
// shell), the secrets and certificates, an Alertmanager configuration
// naming the receivers given and no example.org, and one admin token
// whose hash only is kept; run again it refuses to overwrite .env.
func TestInitSetsTheStackUpFromTheOperatorsAnswers(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	root := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot, "deploy"), filepath.Join(repoRoot, "docker-compose.yml"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v: %s", err, out)
	}
	os.RemoveAll(filepath.Join(root, "deploy", "secrets"))
	init := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "deploy", "init.sh"), args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	receivers := []string{"--oncall-url", "https://pager.hospital.test/hook?team=eye&route=1", "--ticket-url", "https://queue.hospital.test/hook",
		"--heartbeat-url", "https://beat.hospital.test/ping"}
	for _, bad := range [][]string{
		append([]string{"--public-url", "https://octflow.example.org"}, receivers...),
		append([]string{"--public-url", "http://octflow.hospital.test"}, receivers...),
		{"--public-url", "https://octflow.hospital.test", "--oncall-url", "https://oncall.EXAMPLE.org/hooks/octflow",
			"--ticket-url", "https://queue.hospital.test/hook", "--heartbeat-url", "https://beat.hospital.test/ping"},
		{"--public-url", "https://octflow.hospital.test", "--oncall-url", "https://x|w /tmp/f",
			"--ticket-url", "https://queue.hospital.test/hook", "--heartbeat-url", "https://beat.hospital.test/ping"},
		// A character .env or a shell would read as its own.
		append([]string{"--public-url", "https://octflow.hospital.test/$HOME"}, receivers...),
		{"--public-url", "https://octflow.hospital.test", "--oncall-url", "https://pager.hospital.test/hook?k=$HOME",
			"--ticket-url", "https://queue.hospital.test/hook", "--heartbeat-url", "https://beat.hospital.test/ping"},
	} {
		if out, err := init(bad...); err == nil || !strings.Contains(out, "init: ") {
			t.Errorf("init.sh %v: %v %s, want a refusal", bad, err, out)
		}
		for _, f := range []string{".env", "deploy/secrets/alertmanager.yml", "deploy/secrets/tokens.json"} {
			if _, err := os.Stat(filepath.Join(root, f)); err == nil {
				t.Fatalf("init.sh %v wrote %s", bad, f)
			}
		}
	}
	out, err := init(append([]string{"--public-url", "https://octflow.hospital.test", "--remote-nodes"}, receivers...)...)
	if err != nil {
		t.Fatalf("init.sh: %v: %s", err, out)
	}
	env := readFile(t, filepath.Join(root, ".env"))
	for _, want := range []string{"OCTFLOW_PUBLIC_URL='https://octflow.hospital.test'", "OCTFLOW_TEMPORAL_BIND='0.0.0.0'", "OCTFLOW_S3_BIND='0.0.0.0'",
		"OCTFLOW_API_HOSTS='octflow.hospital.test'"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf(".env lacks %s:\n%s", want, env)
		}
	}
	// A later `docker compose` in that directory, from a clean shell,
	// reads the settings from .env.
	envFile, err := dotenv.GetEnvFromFile(map[string]string{}, []string{filepath.Join(root, ".env")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadStack(root, envFile, "docker-compose.yml")
	if err != nil {
		t.Fatalf("the shipped file with init.sh's .env: %v", err)
	}
	if v := p.Services["api"].Environment["OCTFLOW_PUBLIC_URL"]; v == nil || *v != "https://octflow.hospital.test" {
		t.Errorf("the api's OCTFLOW_PUBLIC_URL from .env: %v", v)
	}
	secrets := filepath.Join(root, "deploy", "secrets")
	am := readFile(t, filepath.Join(secrets, "alertmanager.yml"))
	for _, want := range []string{"url: 'https://pager.hospital.test/hook?team=eye&route=1'", "url: 'https://queue.hospital.test/hook'",
		"url: 'https://beat.hospital.test/ping'"} {
		if !strings.Contains(am, want) {
			t.Errorf("alertmanager.yml lacks the receiver %s", want)
		}
	}
	for _, line := range strings.Split(am, "\n") {
		if strings.Contains(line, "url:") && strings.Contains(line, "example.org") {
			t.Errorf("alertmanager.yml still sends to example.org: %s", line)
		}
	}
	tokens := readFile(t, filepath.Join(secrets, "tokens.json"))
	var token string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "octflow-admin-") {
			token = line
		}
	}
	if token == "" || strings.Contains(tokens, token) || !strings.Contains(tokens, `"role": "admin"`) {
		t.Errorf("admin token %q printed, tokens.json %s: want it printed and only its hash kept", token, tokens)
	}
	// The gateway's own loader takes the file, and the token printed as
	// an admin's (octflow admin token mint, list and revoke edit the same
	// file, cmd/octflow/internal/cli).
	if loaded, err := auth.LoadTokens(filepath.Join(secrets, "tokens.json")); err != nil {
		t.Errorf("api/auth refuses init.sh's tokens.json: %v", err)
	} else if p, ok := loaded.Lookup(token); !ok || p.Role != auth.RoleAdmin {
		t.Errorf("init.sh's token authenticates as %+v (%v), want an admin", p, ok)
	}
	for _, f := range []string{"api.pem", "ca.pem", "codec-keys.json", "identity-keys.json", "pseudonym.key"} {
		if _, err := os.Stat(filepath.Join(secrets, f)); err != nil {
			t.Errorf("init.sh did not make %s: %v", f, err)
		}
	}
	if out, err := init(append([]string{"--public-url", "https://octflow.hospital.test"}, receivers...)...); err == nil || !strings.Contains(out, ".env exists") {
		t.Errorf("init.sh again: %v %s, want a refusal to overwrite .env", err, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
