package composetest

import (
	"strings"
	"testing"
)

// No registry can be reached from the machines the compose test runs
// on: compose.test.yml swaps every image of the shipped file for one
// run.sh builds (octflow-test/…), but for the services it leaves out of
// the run by a profile. A service added to docker-compose.yml without
// its stand-in fails here, not minutes into `make compose-test`.
func TestTheComposeTestSwapsEveryImage(t *testing.T) {
	env := siteSettings()
	env["OCTFLOW_TEST_API_PORT"], env["OCTFLOW_TEST_UI_PORT"] = "18080", "18233"
	p, err := loadStack(repoRoot, env, "docker-compose.yml", "deploy/compose-test/compose.test.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml with compose.test.yml: %v", err)
	}
	checked := 0
	for name, s := range p.Services {
		if len(s.Profiles) > 0 {
			continue
		}
		checked++
		if !strings.HasPrefix(s.Image, "octflow-test/") {
			t.Errorf("%s runs %s in the compose test, want a stand-in built here (octflow-test/…)", name, s.Image)
		}
		if s.Build != nil && s.Build.Context != "" {
			t.Errorf("%s is built by Compose in the compose test (%s), want run.sh's image", name, s.Build.Context)
		}
	}
	if checked < 15 {
		t.Errorf("checked %d services", checked)
	}
}
