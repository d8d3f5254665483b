package composetest

import (
	"slices"
	"strings"
	"testing"
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
