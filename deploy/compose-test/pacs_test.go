package composetest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"octflow/app"
)

// The export to a PACS is a site's overlay (docs/operations.md, Export to
// a PACS, per campus), as the compose test's own overlay sets it up for
// its demo campus: either way the api gets the PACS file and no
// credential, the worker (and worker-next, which an upgrade starts) the
// PACS file, every file it names and the identity keys, and no GPU node
// any of them. The documented PACS file is one octflow reads, naming the
// files the documented overlay mounts.
func TestTheExportOverlayGivesEachRoleWhatItNeeds(t *testing.T) {
	doc := read(t, filepath.Join(repoRoot, "docs/operations.md"))
	start := strings.Index(doc, "* **Export to a PACS, per campus.**")
	if start < 0 {
		t.Fatal("docs/operations.md has no Export to a PACS, per campus")
	}
	section := doc[start:]
	if end := strings.Index(section[1:], "\n* **"); end > 0 {
		section = section[:end+1]
	}
	block := func(lang string) string {
		m := regexp.MustCompile("(?s)\n  ```" + lang + "\n(.*?)\n  ```\n").FindStringSubmatch(section)
		if m == nil {
			t.Fatalf("the section has no %s block", lang)
		}
		return regexp.MustCompile(`(?m)^  `).ReplaceAllString(m[1], "")
	}
	dir := t.TempDir()
	pacsFile := filepath.Join(dir, "pacs.json")
	for name, body := range map[string]string{
		"docker-compose.yml":          read(t, filepath.Join(repoRoot, "docker-compose.yml")),
		"docker-compose.override.yml": block("yaml"),
		"pacs.json":                   block("json"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := app.ReadPACSFile(pacsFile)
	if err != nil {
		t.Fatalf("the documented PACS file: %v", err)
	}
	var named []string
	for _, e := range entries {
		for _, f := range []string{e.CAFile, e.UsernameFile, e.PasswordFile, e.TokenFile} {
			if f != "" {
				named = append(named, f)
			}
		}
	}
	documented, err := loadStack(dir, siteSettings(), "docker-compose.yml", "docker-compose.override.yml")
	if err != nil {
		t.Fatalf("the shipped file with the documented overlay: %v", err)
	}
	checkExport(t, "the documented overlay", documented, named)

	env := siteSettings()
	env["OCTFLOW_TEST_API_PORT"], env["OCTFLOW_TEST_UI_PORT"] = "20001", "20002"
	test, err := loadStack(repoRoot, env, "docker-compose.yml", "deploy/compose-test/compose.test.yml")
	if err != nil {
		t.Fatalf("the shipped file with compose.test.yml: %v", err)
	}
	checkExport(t, "compose.test.yml", test, []string{"/run/secrets/pacs-demo-campus-ca.pem",
		"/run/secrets/pacs-demo-campus-user", "/run/secrets/pacs-demo-campus-password"})
	if !strings.Contains(read(t, filepath.Join(repoRoot, "deploy/compose-test/run.sh")), `"caFile": "/run/secrets/pacs-demo-campus-ca.pem"`) {
		t.Error("run.sh's PACS file does not name the CA compose.test.yml mounts")
	}
}

// checkExport checks what p gives each role for the export: files are
// the paths the PACS file names, each to be mounted in the worker.
func checkExport(t *testing.T, what string, p *types.Project, files []string) {
	t.Helper()
	service := func(name string) types.ServiceConfig {
		if s, ok := p.Services[name]; ok {
			return s
		}
		return p.DisabledServices[name]
	}
	mounted := func(s types.ServiceConfig) (paths []string) {
		for _, sec := range s.Secrets {
			paths = append(paths, secretPath(sec))
		}
		return paths
	}
	pacsFile := func(s types.ServiceConfig) string {
		v := s.Environment["OCTFLOW_PACS_FILE"]
		if v == nil {
			return ""
		}
		for _, c := range s.Configs {
			if c.Target == *v {
				return *v
			}
		}
		return "not mounted: " + *v
	}
	api := service("api")
	if f := pacsFile(api); f == "" || strings.HasPrefix(f, "not mounted") {
		t.Errorf("%s: the api's PACS file: %q, want one mounted", what, f)
	}
	for _, f := range files {
		if slices.Contains(mounted(api), f) {
			t.Errorf("%s: the api holds %s: only the worker needs the PACS's CA and credentials", what, f)
		}
	}
	for _, name := range []string{"worker", "worker-next"} {
		s := service(name)
		if f := pacsFile(s); f == "" || strings.HasPrefix(f, "not mounted") {
			t.Errorf("%s: %s's PACS file: %q, want one mounted", what, name, f)
		}
		if v := s.Environment["OCTFLOW_IDENTITY_KEYS_FILE"]; v == nil || !slices.Contains(mounted(s), *v) {
			t.Errorf("%s: %s has no identity keys mounted (OCTFLOW_IDENTITY_KEYS_FILE %q): it cannot open the identities results are filed under",
				what, name, deref(v))
		}
		for _, f := range files {
			if !slices.Contains(mounted(s), f) {
				t.Errorf("%s: %s does not mount %s, which the PACS file names", what, name, f)
			}
		}
	}
	for name, s := range p.Services {
		if !strings.HasPrefix(name, "gpu-") {
			continue
		}
		for _, f := range append(slices.Clone(files), "/run/secrets/identity-keys.json") {
			if slices.Contains(mounted(s), f) {
				t.Errorf("%s: GPU node %s holds %s", what, name, f)
			}
		}
	}
}

func deref(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

// secretPath is where a service's secret is mounted in its container.
func secretPath(s types.ServiceSecretConfig) string {
	target := s.Target
	if target == "" {
		target = s.Source
	}
	if !strings.HasPrefix(target, "/") {
		target = "/run/secrets/" + target
	}
	return target
}
