package composetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// imageUser is the user (uid and primary gid) each image of the shipped
// stack runs as: the images built here from their Dockerfiles' USER
// (octflow and its collector and proxy 10001, Temporal's server 1000),
// the pinned upstream images as their own Dockerfiles set it (admin-tools
// and the Web UI 1000, PostgreSQL 999 after its entrypoint drops root,
// Grafana 472, Alertmanager, Prometheus and the exporters nobody),
// versitygw root.
var imageUser = map[string][2]int{
	"octflow": {10001, 10001}, "octflow-audit": {10001, 10001}, "octflow-tls-proxy": {10001, 10001},
	"octflow-temporal": {1000, 1000}, "temporalio/admin-tools": {1000, 1000}, "temporalio/ui": {1000, 1000},
	"postgres": {999, 999}, "grafana/grafana": {472, 472}, "prom/alertmanager": {65534, 65534},
	"prom/prometheus": {65534, 65534}, "prom/node-exporter": {65534, 65534},
	"prometheuscommunity/postgres-exporter": {65534, 65534}, "versity/versitygw": {0, 0},
}

// Each secret deploy/make-secrets.sh makes, run as root, is readable by
// the users of the images that mount it and by no one else (Compose
// without Swarm bind-mounts a secret with its host owner and mode).
func TestEachSecretIsReadableOnlyByTheServicesThatMountIt(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("make-secrets.sh gives secrets their owners only as root")
	}
	deploy := t.TempDir()
	if out, err := exec.Command(filepath.Join(repoRoot, "deploy/make-secrets.sh"), deploy).CombinedOutput(); err != nil {
		t.Fatalf("make-secrets.sh: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(filepath.Join(deploy, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	readableOnlyByMounters(t, shipped(t), filepath.Join(deploy, "secrets"), names)
	if len(entries) < 10 {
		t.Errorf("make-secrets.sh made %d secrets", len(entries))
	}
}

// readableOnlyByMounters checks each of names in dir: readable by the
// users of the images of the services of p that mount it (by its owner,
// or its group where that is one of theirs), writable by none, and not
// by others.
func readableOnlyByMounters(t *testing.T, p *types.Project, dir string, names []string) {
	t.Helper()
	readers := map[string][]string{} // secret → services
	for name, s := range p.Services {
		for _, sec := range s.Secrets {
			readers[sec.Source] = append(readers[sec.Source], name)
		}
	}
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		if mode&0o007 != 0 || mode&0o222 != 0 {
			t.Errorf("%s is %v: readable or writable by others, or writable", name, mode)
		}
		groupReads := false
		for _, svc := range readers[name] {
			if user, ok := imageUser[repository(p.Services[svc].Image)]; ok && uint32(user[1]) == st.Gid && user[1] != 0 {
				groupReads = true
			}
		}
		if mode&0o040 != 0 && !groupReads {
			t.Errorf("%s is readable by group %d, the group of none of the services that mount it", name, st.Gid)
		}
		for _, svc := range readers[name] {
			user, ok := imageUser[repository(p.Services[svc].Image)]
			if !ok {
				t.Errorf("%s mounts %s; its image %s's user is not known here", svc, name, p.Services[svc].Image)
				continue
			}
			uid, gid := user[0], user[1]
			readable := uid == 0 || (uint32(uid) == st.Uid && mode&0o400 != 0) || (uint32(gid) == st.Gid && mode&0o040 != 0)
			if !readable {
				t.Errorf("%s mounts %s (owner %d:%d, %v), which its user %d:%d cannot read", svc, name, st.Uid, st.Gid, mode, uid, gid)
			}
		}
	}
}

// Each key deploy/make-certs.sh makes, run as root, likewise: the metrics
// key, which octflow's services and the exporters and Alertmanager
// (nobody) serve with, by its owner (octflow's user) and group (nobody's);
// the CA's key by no service at all.
func TestEachKeyIsReadableOnlyByTheServicesThatMountIt(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("make-certs.sh gives keys their owners only as root")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(repoRoot, "deploy/make-certs.sh"), dir)
	cmd.Env = append(os.Environ(), "OCTFLOW_API_HOSTS=octflow.hospital.test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-certs.sh: %v\n%s", err, out)
	}
	keys, err := filepath.Glob(filepath.Join(dir, "*-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := shipped(t)
	var names []string
	for _, k := range keys {
		if name := filepath.Base(k); name != "ca-key.pem" {
			names = append(names, name)
		}
	}
	if !slices.Contains(names, "metrics-key.pem") || len(names) < 10 {
		t.Fatalf("make-certs.sh made the keys %v", names)
	}
	readableOnlyByMounters(t, p, dir, names)
	for name, s := range p.Services {
		for _, sec := range s.Secrets {
			if sec.Source == "ca-key.pem" {
				t.Errorf("%s mounts the CA's key", name)
			}
		}
	}
}
