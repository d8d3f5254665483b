package composetest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// Every service's log is rotated; every service of octflow's own image
// drops every capability and may gain none; its long-running roles
// (api, worker, GPU nodes) have bounded memory and processes.
func TestOctflowServicesAreHardenedByDefault(t *testing.T) {
	p := shipped(t)
	roles := 0
	for name, s := range p.Services {
		if s.Logging == nil || s.Logging.Driver != "json-file" || s.Logging.Options["max-size"] == "" || s.Logging.Options["max-file"] == "" {
			t.Errorf("%s: log %+v, want json-file rotated (max-size, max-file)", name, s.Logging)
		}
		if !strings.HasPrefix(s.Image, "octflow:") {
			continue
		}
		if !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: cap_drop %v, want ALL", name, s.CapDrop)
		}
		if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v, want no-new-privileges", name, s.SecurityOpt)
		}
		if len(s.CapAdd) > 0 || s.Privileged {
			t.Errorf("%s adds capabilities %v (privileged %v)", name, s.CapAdd, s.Privileged)
		}
		if s.Restart == "unless-stopped" { // a long-running role
			roles++
			if s.MemLimit <= 0 || s.PidsLimit <= 0 {
				t.Errorf("%s: mem_limit %d, pids_limit %d, want both bounded", name, s.MemLimit, s.PidsLimit)
			}
		}
	}
	if roles < 4 {
		t.Errorf("%d long-running octflow services checked, want the api, the worker and the GPU nodes", roles)
	}
}

// writableRoots are the services whose root file system stays writable,
// each with the reason; every other service runs read-only.
var writableRoots = map[string]string{
	"grafana": "not run by the compose test, so what its image writes outside /var/lib/grafana is unchecked",
}

// checkReadOnly checks that s runs on a read-only root, each tmpfs
// bounded in size (it counts against the container's memory).
func checkReadOnly(t *testing.T, name string, s types.ServiceConfig) {
	t.Helper()
	if !s.ReadOnly {
		t.Errorf("%s: root file system writable, want read_only", name)
	}
	for _, m := range s.Tmpfs {
		if !strings.Contains(m, "size=") {
			t.Errorf("%s: tmpfs %q has no size", name, m)
		}
	}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeTmpfs && (v.Tmpfs == nil || v.Tmpfs.Size == 0) {
			t.Errorf("%s: tmpfs at %s has no size", name, v.Target)
		}
	}
}

// volumeAt is whether s mounts a named volume, writable, at dir or
// above it.
func volumeAt(s types.ServiceConfig, dir string) bool {
	return slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && !v.ReadOnly && (dir == v.Target || strings.HasPrefix(dir, v.Target+"/"))
	})
}

// Every service runs on a read-only root file system (but those of
// writableRoots), its scratch a tmpfs of bounded size; what octflow
// writes is on named volumes: the api's upload spool and audit journal,
// and each GPU node's take notes (which a restart after a crash hands
// back, so not a tmpfs), in a directory of its own, in the shipped file,
// in the third node of deploy/compose.gpu.example.yml and in the nodes
// deploy/gpu-override.sh writes.
func TestEveryServiceRunsOnAReadOnlyRoot(t *testing.T) {
	p := shipped(t)
	for name, s := range p.Services {
		if why, ok := writableRoots[name]; ok {
			if s.ReadOnly {
				t.Errorf("%s is read-only now: take it out of writableRoots (%s)", name, why)
			}
			continue
		}
		checkReadOnly(t, name, s)
	}
	for name, why := range writableRoots {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("writableRoots names %s (%s), which the stack does not have", name, why)
		}
	}
	api := p.Services["api"]
	for _, v := range []string{"OCTFLOW_SPOOL_DIR", "OCTFLOW_AUDIT_SPOOL"} {
		if dir := api.Environment[v]; dir == nil || !volumeAt(api, *dir) {
			t.Errorf("api: %s=%v, want a directory on a named volume", v, dir)
		}
	}
	takes := func(p *types.Project, nodes ...string) {
		t.Helper()
		seen := map[string]string{}
		for _, name := range nodes {
			s, ok := p.Services[name]
			if !ok {
				t.Errorf("no GPU node %s", name)
				continue
			}
			checkReadOnly(t, name, s)
			dir := s.Environment["OCTFLOW_NODE_TAKES_DIR"]
			switch {
			case dir == nil || !volumeAt(s, *dir):
				t.Errorf("%s: OCTFLOW_NODE_TAKES_DIR=%v, want a directory on a named volume", name, dir)
			case seen[*dir] != "":
				t.Errorf("%s and %s share the take notes directory %s", seen[*dir], name, *dir)
			case filepath.Base(*dir) != name:
				t.Errorf("%s: take notes in %s, want a directory named by the node", name, *dir)
			default:
				seen[*dir] = name
			}
		}
	}
	takes(p, "gpu-0", "gpu-1")
	example, err := loadStack(repoRoot, siteSettings(), "docker-compose.yml", "deploy/compose.gpu.example.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml with deploy/compose.gpu.example.yml: %v", err)
	}
	takes(example, "gpu-0", "gpu-1", "gpu-2")
}
