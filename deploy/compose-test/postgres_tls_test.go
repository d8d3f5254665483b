package composetest

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// PostgreSQL takes TLS only, and each of its clients checks the server's
// certificate against the stack's CA and the name postgresql
// (docker-compose.yml; docs/operations.md, Security defaults).

// pgTLS pins it, setting by setting: what each service must hold. A
// setting is "command" (the server's -c settings, the last of each
// name), a variable of the
// service's environment ("" wanted: the variable unset), VAR?key (a key
// of the DSN's query in VAR) or VAR,list (one of VAR's comma-separated
// items).
var pgTLS = []struct{ service, setting, want string }{
	{"postgresql", "command", "ssl=on"},
	{"postgresql", "command", "ssl_cert_file=/run/secrets/postgresql.pem"},
	{"postgresql", "command", "ssl_key_file=/run/secrets/postgresql-key.pem"},
	{"postgresql", "command", "hba_file=/etc/octflow/pg_hba.conf"},
	// Temporal's server, both stores: sslmode verify-full.
	{"temporal", "SQL_TLS_ENABLED", "true"},
	{"temporal", "SQL_HOST_VERIFICATION", "true"},
	{"temporal", "SQL_CA", "/run/secrets/ca.pem"},
	// Its schema job: temporal-sql-tool checks the host unless told not to.
	{"temporal-schema", "SQL_TLS", "true"},
	{"temporal-schema", "SQL_TLS_CA_FILE", "/run/secrets/ca.pem"},
	{"temporal-schema", "SQL_TLS_DISABLE_HOST_VERIFICATION", ""},
	{"postgres-roles", "PGSSLMODE", "verify-full"},
	{"postgres-roles", "PGSSLROOTCERT", "/run/secrets/ca.pem"},
	{"postgres-exporter", "DATA_SOURCE_URI?sslmode", "verify-full"},
	{"postgres-exporter", "DATA_SOURCE_URI?sslrootcert", "/run/secrets/ca.pem"},
	// Its expiry watched, like every certificate of deploy/make-certs.sh.
	{"api", "OCTFLOW_CERTIFICATE_FILES,list", "/run/secrets/postgresql.pem"},
}

// pgSetting is what s holds for a setting of pgTLS.
func pgSetting(s types.ServiceConfig, setting string) []string {
	env := func(name string) string {
		if v := s.Environment[name]; v != nil {
			return *v
		}
		return ""
	}
	switch name, key, isQuery := strings.Cut(setting, "?"); {
	case setting == "command":
		// The server takes the last -c of a name.
		var settings []string
		for i, arg := range s.Command {
			if arg == "-c" && i+1 < len(s.Command) {
				name, _, _ := strings.Cut(s.Command[i+1], "=")
				settings = slices.DeleteFunc(settings, func(set string) bool { return strings.HasPrefix(set, name+"=") })
				settings = append(settings, s.Command[i+1])
			}
		}
		return settings
	case isQuery:
		_, query, _ := strings.Cut(env(name), "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return []string{"unparsable: " + err.Error()}
		}
		return q[key]
	case strings.HasSuffix(setting, ",list"):
		return strings.Split(env(strings.TrimSuffix(setting, ",list")), ",")
	default:
		if v := env(setting); v != "" {
			return []string{v}
		}
		return nil
	}
}

// sslmode is any libpq sslmode a service's settings name.
var sslmode = regexp.MustCompile(`(?i)(?:sslmode=|PGSSLMODE=)([a-z-]*)`)

// hbaFile is the pg_hba.conf postgresql's command names, as the file it
// mounts there ("" if none).
func hbaFile(p *types.Project) string {
	s := p.Services["postgresql"]
	for _, setting := range pgSetting(s, "command") {
		if path, ok := strings.CutPrefix(setting, "hba_file="); ok {
			for _, v := range s.Volumes {
				if v.Target == path && v.Type == types.VolumeTypeBind {
					return v.Source
				}
			}
		}
	}
	return ""
}

// pgTLSProblems is every way p, with hba for its pg_hba.conf, lets a
// connection to PostgreSQL go without TLS or without checking the
// server's certificate.
func pgTLSProblems(p *types.Project, hba string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	pinned := map[string]bool{}
	for _, c := range pgTLS {
		pinned[c.service] = true
		s, ok := p.Services[c.service]
		if !ok {
			bad("no service %s", c.service)
			continue
		}
		got := pgSetting(s, c.setting)
		switch {
		case c.want == "" && len(got) > 0:
			bad("%s: %s is %q, want it unset", c.service, c.setting, got)
		case c.want != "" && !slices.Contains(got, c.want):
			bad("%s: %s is %q, want %s", c.service, c.setting, got, c.want)
		}
		// A file it names is a secret the service mounts.
		if file, ok := strings.CutPrefix(c.want, "/run/secrets/"); ok && !slices.ContainsFunc(s.Secrets, func(r types.ServiceSecretConfig) bool {
			return r.Source == file && (r.Target == "" || r.Target == file || r.Target == c.want)
		}) {
			bad("%s names %s but does not mount the secret %s", c.service, c.want, file)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		s := p.Services[name]
		// No service says sslmode=disable, or anything short of
		// verify-full.
		words := slices.Concat(s.Command, s.Entrypoint)
		for k, v := range s.Environment {
			if v != nil {
				words = append(words, k+"="+*v)
			}
		}
		for _, w := range words {
			for _, m := range sslmode.FindAllStringSubmatch(w, -1) {
				if m[1] != "verify-full" {
					bad("%s: %s, want verify-full", name, m[0])
				}
			}
		}
		// Every service that reaches PostgreSQL is one whose TLS is
		// pinned above.
		if name != "postgresql" && !pinned[name] && len(shared(p, name, "postgresql")) > 0 {
			bad("%s reaches postgresql on %v: pin its TLS settings in pgTLS", name, shared(p, name, "postgresql"))
		}
	}
	// Over the network TLS only: hostssl lines, hostnossl ones that
	// reject, the socket (local) as the image has it; no host line, which
	// would take a connection either way.
	ssl := 0
	for _, line := range strings.Split(hba, "\n") {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		switch {
		case len(f) == 0 || f[0] == "local":
		case f[0] == "hostssl":
			ssl++
		case f[0] == "hostnossl" && f[len(f)-1] == "reject":
		default:
			bad("pg_hba.conf takes connections without TLS: %q", strings.TrimSpace(line))
		}
	}
	if ssl == 0 {
		bad("pg_hba.conf takes no connection over the network with TLS (no hostssl line)")
	}
	return problems
}

// The settings hold in the shipped file and under the compose test's
// overlay, which changes no command or environment of these services.
func TestPostgreSQLTakesTLSOnlyAndItsClientsCheckIt(t *testing.T) {
	env := siteSettings()
	env["OCTFLOW_TEST_API_PORT"], env["OCTFLOW_TEST_UI_PORT"] = "18080", "18233"
	for label, files := range map[string][]string{
		"docker-compose.yml":    {"docker-compose.yml"},
		"with compose.test.yml": {"docker-compose.yml", "deploy/compose-test/compose.test.yml"},
	} {
		t.Run(label, func(t *testing.T) {
			p, err := loadAll(repoRoot, env, files...)
			if err != nil {
				t.Fatal(err)
			}
			hba := hbaFile(p)
			if hba == "" {
				t.Fatal("postgresql mounts no pg_hba.conf where its hba_file setting points")
			}
			got, _ := filepath.Abs(hba)
			if want, _ := filepath.Abs(filepath.Join(repoRoot, "deploy/postgres/pg_hba.conf")); got != want {
				t.Errorf("postgresql's pg_hba.conf is %s, want deploy/postgres/pg_hba.conf", hba)
			}
			for _, problem := range pgTLSProblems(p, read(t, hba)) {
				t.Error(problem)
			}
		})
	}
}

// The check catches each way back to plaintext or to an unchecked
// certificate, by the rule that names it.
func TestThePostgreSQLTLSCheckCatchesAWayBackToPlaintext(t *testing.T) {
	setEnv := func(svc, name, value string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services[svc]
			s.Environment[name] = &value
			p.Services[svc] = s
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(*types.Project)
		hba    string
		want   string
	}{
		{"the server without TLS", func(p *types.Project) {
			s := p.Services["postgresql"]
			s.Command = slices.Clone(s.Command)
			s.Command[slices.Index(s.Command, "ssl=on")] = "ssl=off"
			p.Services["postgresql"] = s
		}, "", "postgresql: command is"},
		{"the server's TLS turned off by a later setting", func(p *types.Project) {
			s := p.Services["postgresql"]
			s.Command = append(slices.Clone(s.Command), "-c", "ssl=off")
			p.Services["postgresql"] = s
		}, "", "postgresql: command is"},
		{"the exporter in plaintext", setEnv("postgres-exporter", "DATA_SOURCE_URI", "postgresql:5432/postgres?sslmode=disable"),
			"", "postgres-exporter: sslmode=disable, want verify-full"},
		{"Temporal without TLS", setEnv("temporal", "SQL_TLS_ENABLED", "false"), "", "temporal: SQL_TLS_ENABLED is"},
		{"Temporal without checking the name", setEnv("temporal", "SQL_HOST_VERIFICATION", "false"), "", "temporal: SQL_HOST_VERIFICATION is"},
		{"the schema job without checking the name", setEnv("temporal-schema", "SQL_TLS_DISABLE_HOST_VERIFICATION", "true"), "",
			"temporal-schema: SQL_TLS_DISABLE_HOST_VERIFICATION is"},
		{"postgres-roles on TLS unchecked", setEnv("postgres-roles", "PGSSLMODE", "require"), "", "postgres-roles: PGSSLMODE=require"},
		{"the exporter's CA not mounted", func(p *types.Project) {
			s := p.Services["postgres-exporter"]
			s.Secrets = slices.DeleteFunc(slices.Clone(s.Secrets), func(r types.ServiceSecretConfig) bool { return r.Source == "ca.pem" })
			p.Services["postgres-exporter"] = s
		}, "", "postgres-exporter names /run/secrets/ca.pem but does not mount the secret ca.pem"},
		{"a new client of PostgreSQL", func(p *types.Project) {
			s := p.Services["worker"]
			s.Networks = maps.Clone(s.Networks)
			s.Networks["database"] = nil
			p.Services["worker"] = s
		}, "", "worker reaches postgresql on [database]: pin its TLS settings"},
		{"pg_hba.conf taking plaintext", nil, "host all all all scram-sha-256\n", "pg_hba.conf takes connections without TLS"},
		{"pg_hba.conf without hostssl", nil, "hostnossl all all all reject\n", "pg_hba.conf takes no connection over the network with TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := loadAll(repoRoot, siteSettings(), "docker-compose.yml")
			if err != nil {
				t.Fatal(err)
			}
			hba := read(t, hbaFile(p))
			if problems := pgTLSProblems(p, hba); len(problems) > 0 {
				t.Fatalf("the shipped file, before the mutation: %v", problems)
			}
			if c.mutate != nil {
				c.mutate(p)
			}
			if c.hba != "" {
				hba = "local all all trust\n" + c.hba
			}
			problems := pgTLSProblems(p, hba)
			if !slices.ContainsFunc(problems, func(s string) bool { return strings.HasPrefix(s, c.want) }) {
				t.Errorf("not caught: want %q among %q", c.want, problems)
			}
		})
	}
}

// deploy/make-certs.sh makes PostgreSQL's certificate, for the name its
// clients check, under the stack's CA; run as root, its key is the
// postgres image's user's (999) alone, mode 0400, as PostgreSQL requires
// of a key it does not get from root (no group or other access).
func TestMakeCertsMakesPostgreSQLsCertificate(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(repoRoot, "deploy/make-certs.sh"), dir)
	cmd.Env = append(os.Environ(), "OCTFLOW_API_HOSTS=octflow.hospital.test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make-certs.sh: %v: %s", err, out)
	}
	block, _ := pem.Decode([]byte(read(t, filepath.Join(dir, "postgresql.pem"))))
	if block == nil {
		t.Fatal("postgresql.pem holds no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(read(t, filepath.Join(dir, "ca.pem"))))
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "postgresql", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("postgresql.pem does not verify under the stack's CA as the server postgresql: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "postgresql-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		if !strings.Contains(string(out), "chown 999") {
			t.Errorf("make-certs.sh, not run as root, does not say how to give PostgreSQL its key: %s", out)
		}
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if user := imageUser["postgres"]; st.Uid != uint32(user[0]) || fi.Mode().Perm() != 0o400 {
		t.Errorf("postgresql-key.pem is uid %d, %v; want the postgres image's user %d, 0400", st.Uid, fi.Mode().Perm(), user[0])
	}
}
