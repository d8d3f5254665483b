// Package buildinfo says which octflow this binary is: its release
// version (the repository's VERSION file, stamped in by the Makefile and
// the Dockerfile), the commit it was built from, and the Worker
// Deployment build ID that both make (BuildID), under which Temporal
// routes workflows to the code that started them.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Stamped at link time: -X octflow/internal/buildinfo.version=1.0.0
// -X octflow/internal/buildinfo.commit=<git commit>. They are build
// constants, never written at run time.
var (
	version = ""
	commit  = ""
)

// Info is a build's identity.
type Info struct {
	// Version is the release version the build was made at ("dev" when
	// nothing stamped one: go run, go test).
	Version string
	// Commit is the git commit it was built from, with "-dirty" when the
	// tree had changes ("" when unknown).
	Commit string
}

// Read returns this binary's build: what the link stamped, else what
// the Go toolchain recorded of the checkout it built (go build stamps
// vcs.revision and vcs.modified).
func Read() Info {
	info := Info{Version: version, Commit: commit}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			info.Commit = vcsCommit(bi.Settings)
		}
	}
	return info
}

func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// BuildID is the Worker Deployment build ID of this build: the version,
// and the commit's first 12 hex digits when known ("1.0.0+3f2a9c1d0b7e"),
// so that two builds of one version from different commits are two
// versions to Temporal, and a rebuild of one commit is the same.
func (i Info) BuildID() string {
	c := i.Commit
	dirty := strings.HasSuffix(c, "-dirty")
	c = strings.TrimSuffix(c, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	switch {
	case c == "":
		return i.Version
	case dirty:
		return i.Version + "+" + c + ".dirty"
	}
	return i.Version + "+" + c
}

// String is the build as `octflow version` prints it.
func (i Info) String() string {
	c := i.Commit
	if c == "" {
		c = "unknown commit"
	}
	return "octflow " + i.Version + " (" + c + ")"
}
