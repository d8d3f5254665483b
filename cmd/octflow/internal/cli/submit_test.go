package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// The device token is read from the environment only (OCTFLOW_TOKEN):
// a token on the command line, which ps shows, is not a flag.
func TestSubmitTakesItsTokenFromTheEnvironmentOnly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "exam.dcm")
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		wantErr string
	}{
		{"a token on the command line", "", []string{"--token", "dev-device", "--file", missing},
			"flag provided but not defined: -token"},
		{"no token", "", []string{"--file", missing}, "OCTFLOW_TOKEN or --dev-tokens is required"},
		// Past the token: the scan is read next.
		{"the environment's token", "dev-device", []string{"--file", missing}, "read scan"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("OCTFLOW_TOKEN", c.env)
			err := runSubmit(context.Background(), c.args)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("runSubmit(%q) = %v, want an error saying %q", c.args, err, c.wantErr)
			}
		})
	}
}
