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

// Temporal's address is resolved by the system's resolver (passthrough),
// never by gRPC's DNS resolver, whose SRV lookup no internal Docker
// network answers; an address that names its own scheme is kept.
func TestTemporalsAddressIsResolvedByTheSystemsResolver(t *testing.T) {
	for _, c := range []struct{ hostPort, want string }{
		{"temporal:7233", "passthrough:///temporal:7233"},
		{"127.0.0.1:7233", "passthrough:///127.0.0.1:7233"},
		{"[::1]:7233", "passthrough:///[::1]:7233"},
		{"dns:///temporal.example.org:7233", "dns:///temporal.example.org:7233"},
		{"passthrough:///temporal:7233", "passthrough:///temporal:7233"},
		{"unix:///run/temporal.sock", "unix:///run/temporal.sock"},
	} {
		if got := (DialOptions{HostPort: c.hostPort}).target(); got != c.want {
			t.Errorf("%s: target %s, want %s", c.hostPort, got, c.want)
		}
	}
}
