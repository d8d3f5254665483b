package composetest

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

const repoRoot = "../.."

// busybox is what Alpine's busybox gives every Alpine-based image (and the
// busybox image Prometheus is built on): the applets a healthcheck or
// entrypoint script may reasonably name.
var busybox = []string{"sh", "ash", "wget", "nc", "cat", "echo", "test", "[", "grep", "sed", "awk", "sleep",
	"trap", "exit", "export", "exec", "for", "do", "done", "if", "then", "fi", "true", "false", "ls", "env", "printf"}

// moduleDir is where the go command keeps module m (at the version go.mod pins).
func moduleDir(t *testing.T, m string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", m)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m %s: %v (run go mod download)", m, err)
	}
	return dir
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// copied is every file name a Dockerfile COPYs into the image, by its
// base name (the programs and scripts it adds).
func copied(dockerfile string) []string {
	var names []string
	joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(dockerfile, " ")
	for _, line := range strings.Split(joined, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "COPY" {
			continue
		}
		var args []string
		for _, a := range f[1:] {
			if !strings.HasPrefix(a, "--") {
				args = append(args, a)
			}
		}
		for _, src := range args[:len(args)-1] {
			names = append(names, filepath.Base(src))
		}
		if dst := args[len(args)-1]; !strings.HasSuffix(dst, "/") {
			names = append(names, filepath.Base(dst))
		}
	}
	return names
}

// apkOrApt is every package a Dockerfile installs with apk or apt-get.
func apkOrApt(dockerfile string) []string {
	var pkgs []string
	joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(dockerfile, " ")
	for _, m := range regexp.MustCompile(`(?:apk add|apt-get install)((?:\s+[-a-z0-9.]+)+)`).FindAllStringSubmatch(joined, -1) {
		for _, p := range strings.Fields(m[1]) {
			if !strings.HasPrefix(p, "-") {
				pkgs = append(pkgs, p)
			}
		}
	}
	return pkgs
}

// programs is what each image of the stack holds that a command may name,
// by the image's repository.
func programs(t *testing.T) map[string][]string {
	temporal := moduleDir(t, "go.temporal.io/server")
	ui := moduleDir(t, "github.com/temporalio/ui-server/v2")
	vgw := moduleDir(t, "github.com/versity/versitygw")
	ours := read(t, filepath.Join(repoRoot, "Dockerfile"))
	audit := read(t, filepath.Join(repoRoot, "deploy/audit/Dockerfile"))
	proxy := read(t, filepath.Join(repoRoot, "deploy/tls-proxy/Dockerfile"))
	server := read(t, filepath.Join(repoRoot, "deploy/temporal/Dockerfile"))
	// Debian slim's essentials (dash, bash, coreutils, mawk, grep) and
	// the shell's own builtins.
	slim := []string{"sh", "dash", "bash", "cat", "test", "awk", "grep", "export", "exec"}
	uiDockerfile := read(t, filepath.Join(ui, "Dockerfile"))
	p := map[string][]string{
		"temporalio/server":      append(slices.Clone(busybox), copied(read(t, filepath.Join(temporal, "docker/targets/server.Dockerfile")))...),
		"temporalio/admin-tools": append(slices.Clone(busybox), copied(read(t, filepath.Join(temporal, "docker/targets/admin-tools.Dockerfile")))...),
		"temporalio/ui":          append(append(slices.Clone(busybox), copied(uiDockerfile)...), apkOrApt(uiDockerfile)...),
		"versity/versitygw":      append(slices.Clone(busybox), copied(read(t, filepath.Join(vgw, "Dockerfile")))...),
		// Not readable here: the official images' documented contents.
		"prom/prometheus":   append(slices.Clone(busybox), "prometheus", "promtool"),
		"prom/alertmanager": append(slices.Clone(busybox), "alertmanager", "amtool"),
		// Their Dockerfiles (node_exporter v1.8.2, postgres_exporter
		// v0.16.0): the busybox image and the one binary.
		"prom/node-exporter":                    append(slices.Clone(busybox), "node_exporter"),
		"prometheuscommunity/postgres-exporter": append(slices.Clone(busybox), "postgres_exporter"),
		"grafana/grafana":                       append(slices.Clone(busybox), "grafana", "grafana-server", "grafana-cli"),
		"postgres":                              {"sh", "bash", "postgres", "pg_isready", "psql", "docker-entrypoint.sh", "gosu"},
		// Debian slim's dash and coreutils, and what the Dockerfile adds.
		"octflow": append(append(append(slices.Clone(slim), "octflow"), copied(ours)...), apkOrApt(ours)...),
		// The stack's own, from Debian slim: rsyslog, stunnel4.
		"octflow-audit":     append(append(append(slices.Clone(slim), "rsyslogd"), copied(audit)...), apkOrApt(audit)...),
		"octflow-tls-proxy": append(append(slices.Clone(slim), copied(proxy)...), apkOrApt(proxy)...),
		// The stack's own Temporal server (cmd/octflow-temporal), from Debian slim.
		"octflow-temporal": append(append(slices.Clone(slim), copied(server)...), apkOrApt(server)...),
	}
	return p
}

func repository(image string) string {
	repo, _, _ := strings.Cut(image, ":")
	return repo
}

// shipped loads docker-compose.yml as Compose would with no variable
// set in the shell (every ${VAR:-default} at its default).
// siteSettings are what deploy/init.sh writes to .env, for the tests
// that load the shipped file: without them it does not load.
func siteSettings() types.Mapping {
	return types.Mapping{"OCTFLOW_PUBLIC_URL": "https://octflow.hospital.test", "OCTFLOW_TEMPORAL_BIND": "127.0.0.1",
		"OCTFLOW_S3_BIND": "127.0.0.1"}
}

func shipped(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadStack(repoRoot, siteSettings(), "docker-compose.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

// loadStack loads the compose files of dir, in order, as `docker
// compose` there would with env for its variables.
func loadStack(dir string, env types.Mapping, files ...string) (*types.Project, error) {
	return loadProfiles(dir, env, nil, files...)
}

// loadAll loads them with every profile enabled.
func loadAll(dir string, env types.Mapping, files ...string) (*types.Project, error) {
	return loadProfiles(dir, env, []string{"*"}, files...)
}

func loadProfiles(dir string, env types.Mapping, profiles []string, files ...string) (*types.Project, error) {
	var configs []types.ConfigFile
	for _, f := range files {
		configs = append(configs, types.ConfigFile{Filename: filepath.Join(dir, f)})
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{WorkingDir: dir, ConfigFiles: configs, Environment: env},
		func(o *loader.Options) {
			o.SetProjectName("octflow", true)
			o.SkipResolveEnvironment = true
			o.Profiles = profiles
		})
}

func TestByDefaultOnlyTheApiIsPublishedBeyondLoopbackAndOverHTTPS(t *testing.T) {
	p := shipped(t)
	// Temporal's frontend (mTLS) and the S3 proxy (TLS, client
	// certificates) are for GPU nodes on other hosts, opened on purpose.
	loopback := map[string]bool{"temporal-ui": true, "prometheus": true, "alertmanager": true, "grafana": true,
		"temporal": true, "s3-proxy": true}
	for name, s := range p.Services {
		for _, port := range s.Ports {
			switch {
			case name == "api":
			case loopback[name]:
				if port.HostIP != "127.0.0.1" {
					t.Errorf("%s publishes %d on %q, want 127.0.0.1 unless opened on purpose", name, port.Target, port.HostIP)
				}
			default:
				t.Errorf("%s publishes port %d: only the api and the loopback-bound UI and monitoring may", name, port.Target)
			}
		}
	}
	api := p.Services["api"]
	for _, v := range []string{"OCTFLOW_TLS_CERT_FILE", "OCTFLOW_TLS_KEY_FILE"} {
		if val := api.Environment[v]; val == nil || !strings.HasPrefix(*val, "/run/secrets/") {
			t.Errorf("the api's %s is %v, want a secret's file: the api serves HTTPS only", v, val)
		}
	}
	if hc := strings.Join(api.HealthCheck.Test, " "); !strings.Contains(hc, "https://") {
		t.Errorf("the api's healthcheck %q does not use HTTPS", hc)
	}
	if ui := p.Services["temporal-ui"].Environment["TEMPORAL_DISABLE_WRITE_ACTIONS"]; ui == nil || *ui != "true" {
		t.Errorf("the Web UI's write actions are not off by default: %v", ui)
	}
	// Temporal: mTLS with client certificates required, and every client
	// of it holding one.
	env := func(service, name string) string {
		if v := p.Services[service].Environment[name]; v != nil {
			return *v
		}
		return ""
	}
	if env("temporal", "TEMPORAL_TLS_REQUIRE_CLIENT_AUTH") != "true" || env("temporal", "TEMPORAL_TLS_FRONTEND_CERT") == "" ||
		env("temporal", "TEMPORAL_TLS_CLIENT1_CA_CERT") == "" || env("temporal", "TEMPORAL_TLS_SERVER_CERT") == "" {
		t.Error("Temporal's frontend and internode traffic are not mTLS with client certificates required")
	}
	for name := range p.Services {
		if env(name, "OCTFLOW_TEMPORAL_ADDR") == "" {
			continue
		}
		if env(name, "OCTFLOW_TEMPORAL_TLS") != "true" || env(name, "OCTFLOW_TEMPORAL_CERT_FILE") == "" || env(name, "OCTFLOW_TEMPORAL_KEY_FILE") == "" {
			t.Errorf("%s reaches Temporal without a client certificate", name)
		}
	}
	if env("temporal-ui", "TEMPORAL_TLS_CERT") == "" || env("temporal-ui", "TEMPORAL_TLS_KEY") == "" {
		t.Error("the Web UI reaches Temporal without a client certificate")
	}
}

func TestNoServiceReadsAnEnvFileOrASecretFromItsEnvironment(t *testing.T) {
	// Every secret is a file of its own, mounted where it is used.
	secret := regexp.MustCompile(`^[A-Z0-9_]*(PASSWORD|PWD|SECRET|ACCESS_KEY)[A-Z0-9_]*$`)
	for name, s := range shipped(t).Services {
		if len(s.EnvFiles) > 0 {
			t.Errorf("%s reads an env file: %v", name, s.EnvFiles)
		}
		for k := range s.Environment {
			if secret.MatchString(k) && !strings.HasSuffix(k, "_FILE") {
				t.Errorf("%s has %s in its environment", name, k)
			}
		}
	}
	// S3 over TLS, and the api's audit trail to the collector over TLS.
	p := shipped(t)
	for _, name := range []string{"api", "worker", "gpu-0", "gpu-1"} {
		env := p.Services[name].Environment
		if v := env["OCTFLOW_S3_TLS"]; v == nil || *v != "true" {
			t.Errorf("%s reaches S3 without TLS", name)
		}
	}
	if v := p.Services["s3"].Environment["VGW_CERT"]; v == nil || !strings.HasPrefix(*v, "/run/secrets/") {
		t.Error("S3 serves without TLS")
	}
	if v := p.Services["api"].Environment["OCTFLOW_AUDIT_COLLECTOR"]; v == nil || *v != "audit:2514" {
		t.Errorf("the api's audit trail does not go to the stack's collector: %v", v)
	}
	if v := p.Services["api"].Environment["OCTFLOW_AUDIT_CERT"]; v == nil || *v != "/run/secrets/audit-client.pem" {
		t.Errorf("the api presents a certificate other services hold to the audit collector: %v", v)
	}
	if v := p.Services["api"].Environment["OCTFLOW_AUDIT_PROTOCOL"]; v != nil && *v != "relp" {
		t.Errorf("the api's audit trail goes without the collector's answers: OCTFLOW_AUDIT_PROTOCOL=%s", *v)
	}
	// RELP over TLS, only from the api's own audit certificate, answered
	// once the message is written and synced: a Direct main queue (a
	// disk queue answers once the message is queued, and killed, loses
	// the batch in its action's hands) and a synced file.
	conf := read(t, filepath.Join(repoRoot, "deploy/audit/rsyslog.conf"))
	for _, want := range []string{`module(load="imrelp")`, `tls="on"`, `tls.authMode="name"`, `tls.permittedPeer=["octflow-api-audit"]`,
		`main_queue(queue.type="Direct")`, `sync="on"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("the audit collector's configuration lacks %s", want)
		}
	}
	if strings.Contains(conf, `queue.type="Disk"`) || strings.Contains(conf, `queue.type="LinkedList"`) || strings.Contains(conf, `queue.type="FixedArray"`) {
		t.Error("the audit collector queues messages before writing them: it would answer for what a crash can lose")
	}
	if certs := read(t, filepath.Join(repoRoot, "deploy/make-certs.sh")); !strings.Contains(certs, "leaf audit-client octflow-api-audit ") {
		t.Error("deploy/make-certs.sh makes no audit certificate of the api's own, named as the collector permits")
	}
	if conf := read(t, filepath.Join(repoRoot, "deploy/tls-proxy/s3-proxy.conf")); !strings.Contains(conf, "requireCert = yes") ||
		!strings.Contains(conf, "verifyChain = yes") {
		t.Error("the S3 proxy takes clients without a certificate of the stack's CA")
	}
}

func TestEveryHealthcheckAndEntrypointNamesAProgramItsImageHolds(t *testing.T) {
	p := shipped(t)
	images := programs(t)
	if !slices.Contains(images["octflow-temporal"], "temporal-server") || !slices.Contains(images["octflow-temporal"], "entrypoint.sh") ||
		slices.Contains(images["octflow-temporal"], "temporal") {
		t.Fatalf("read the server image's contents wrong: %v", images["octflow-temporal"])
	}
	if !slices.Contains(images["temporalio/admin-tools"], "temporal-sql-tool") {
		t.Fatalf("read the admin tools' contents wrong: %v", images["temporalio/admin-tools"])
	}
	checked := 0
	for name, s := range p.Services {
		has, ok := images[repository(s.Image)]
		if !ok {
			t.Errorf("%s: image %s is not one this test knows the contents of", name, s.Image)
			continue
		}
		holds := func(what, prog string) {
			checked++
			if !slices.Contains(has, filepath.Base(prog)) {
				t.Errorf("%s: its %s runs %q, which %s does not hold", name, what, prog, s.Image)
			}
		}
		if hc := s.HealthCheck; hc != nil && len(hc.Test) > 1 {
			switch hc.Test[0] {
			case "CMD":
				holds("healthcheck", hc.Test[1])
			case "CMD-SHELL":
				holds("healthcheck's shell", "sh")
				holds("healthcheck", strings.Fields(hc.Test[1])[0])
			}
		}
		if len(s.Entrypoint) > 0 {
			holds("entrypoint", s.Entrypoint[0])
			// A shell script's commands: the first word of each line.
			if len(s.Command) > 0 && filepath.Base(s.Entrypoint[0]) == "sh" {
				for _, line := range strings.Split(s.Command[0], "\n") {
					if f := strings.Fields(strings.TrimSpace(line)); len(f) > 0 && !strings.Contains(f[0], "=") {
						holds("command", f[0])
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked only %d commands", checked)
	}
}

// Every image this repository builds for the stack (octflow's, the audit
// collector's, the TLS proxy's, the Temporal server's) runs as a user of its own, not root, and
// no service of the shipped file overrides that.
func TestTheImagesBuiltHereDoNotRunAsRoot(t *testing.T) {
	for _, path := range []string{"Dockerfile", "deploy/audit/Dockerfile", "deploy/tls-proxy/Dockerfile", "deploy/temporal/Dockerfile"} {
		user := ""
		for _, line := range strings.Split(read(t, filepath.Join(repoRoot, path)), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "USER" {
				user = f[1]
			}
		}
		if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
			t.Errorf("%s: its image runs as %q", path, cmp.Or(user, "root (no USER)"))
		}
	}
	for name, s := range shipped(t).Services {
		if s.User == "root" || s.User == "0" || strings.HasPrefix(s.User, "0:") {
			t.Errorf("%s runs as root", name)
		}
	}
}

// Each service holds the secrets its job needs: identities open only in
// the api (and, where it exports, the worker), the api's audit
// certificate is the api's alone, and no GPU node, here or on another
// host, gets either.
func TestKeysAndCertificatesGoOnlyWhereTheyAreNeeded(t *testing.T) {
	p := shipped(t)
	holders := map[string][]string{}
	for name, s := range p.Services {
		for _, sec := range s.Secrets {
			holders[sec.Source] = append(holders[sec.Source], name)
		}
	}
	for secret, allowed := range map[string][]string{
		"identity-keys.json":   {"api", "worker"},
		"audit-client.pem":     {"api"},
		"audit-client-key.pem": {"api"},
		"pseudonym.key":        {"api"},
	} {
		for _, name := range holders[secret] {
			if !slices.Contains(allowed, name) {
				t.Errorf("%s holds %s, which only %v need", name, secret, allowed)
			}
		}
	}
	node := read(t, filepath.Join(repoRoot, "deploy/compose.remote-node.yml"))
	bundle := read(t, filepath.Join(repoRoot, "deploy/make-node.sh"))
	for _, secret := range []string{"identity-keys.json", "pseudonym.key", "audit-client"} {
		if strings.Contains(node, secret) || strings.Contains(bundle, secret) {
			t.Errorf("a GPU node on another host gets %s", secret)
		}
	}
}
