package app

import (
	"testing"

	"go.temporal.io/sdk/client"
)

func TestCallsToTemporalAreGzippedOnlyOffThisMachine(t *testing.T) {
	cases := []struct {
		hostPort, setting string
		gzip              bool
	}{
		{"127.0.0.1:7233", "", false},
		{"127.0.0.1:7233", "auto", false},
		{"localhost:7233", "auto", false},
		{"[::1]:7233", "auto", false},
		{"temporal:7233", "auto", true},
		{"10.1.2.3:7233", "", true},
		{"127.0.0.1:7233", "gzip", true},
		{"temporal:7233", "none", false},
	}
	for _, c := range cases {
		got := DialOptions{HostPort: c.hostPort, Compression: c.setting}.compression()
		if _, gz := got.(*client.GrpcCompressionGzip); gz != c.gzip {
			t.Errorf("%s with %q: %T, want gzip %v", c.hostPort, c.setting, got, c.gzip)
		}
	}
}
