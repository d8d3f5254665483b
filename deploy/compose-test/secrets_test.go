package composetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
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
	p := shipped(t)
	readers := map[string][]string{} // secret → services
	for name, s := range p.Services {
		for _, sec := range s.Secrets {
			readers[sec.Source] = append(readers[sec.Source], name)
		}
	}
	entries, err := os.ReadDir(filepath.Join(deploy, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(deploy, "secrets", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		if mode&0o007 != 0 || mode&0o222 != 0 {
			t.Errorf("%s is %v: readable or writable by others, or writable", e.Name(), mode)
		}
		groupReads := false
		for _, svc := range readers[e.Name()] {
			if user, ok := imageUser[repository(p.Services[svc].Image)]; ok && uint32(user[1]) == st.Gid && user[1] != 0 {
				groupReads = true
			}
		}
		if mode&0o040 != 0 && !groupReads {
			t.Errorf("%s is readable by group %d, the group of none of the services that mount it", e.Name(), st.Gid)
		}
		for _, svc := range readers[e.Name()] {
			user, ok := imageUser[repository(p.Services[svc].Image)]
			if !ok {
				t.Errorf("%s mounts %s; its image %s's user is not known here", svc, e.Name(), p.Services[svc].Image)
				continue
			}
			uid, gid := user[0], user[1]
			readable := uid == 0 || (uint32(uid) == st.Uid && mode&0o400 != 0) || (uint32(gid) == st.Gid && mode&0o040 != 0)
			if !readable {
				t.Errorf("%s mounts %s (owner %d:%d, %v), which its user %d:%d cannot read", svc, e.Name(), st.Uid, st.Gid, mode, uid, gid)
			}
		}
	}
	if len(entries) < 10 {
		t.Errorf("make-secrets.sh made %d secrets", len(entries))
	}
}
