package devstack

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// serverMain is Temporal's own server main: the program its Docker image
// runs, at the version go.mod pins (a tool of the module).
const serverMain = "go.temporal.io/server/cmd/server"

// BuildTemporalServer builds Temporal's own server main into out, for
// tests that run the production topology without Docker. moduleDir is a
// directory of this module. The server it builds reads its configuration
// from the variables of its embedded template (DB, POSTGRES_SEEDS, …), as
// the image does.
func BuildTemporalServer(ctx context.Context, moduleDir, out string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, serverMain)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", serverMain, err, b)
	}
	return nil
}
