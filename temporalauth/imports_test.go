package temporalauth

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Only the dev stack and the stack's own server build link the server
// (docs/architecture.md): every other package talks to Temporal through
// the SDK and its API types.
func TestOnlyTheServerBuildsImportTheServer(t *testing.T) {
	allowed := []string{"octflow/internal/devstack", "octflow/cmd/octflow-temporal", "octflow/temporalauth"}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "octflow/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || slices.Contains(allowed, fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == "go.temporal.io/server" || strings.HasPrefix(imp, "go.temporal.io/server/") {
				t.Errorf("%s imports %s: only %v may", fields[0], imp, allowed)
			}
		}
	}
}
