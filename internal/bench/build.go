package bench

import (
	"runtime"
	"runtime/debug"
)

// Build says what ran a benchmark, so a result file can be read apart
// from where it was written: the commit the binary was built from and
// the machine's CPUs (runs on 2 and on 16 cores are different runs).
type Build struct {
	// Revision is the VCS commit the binary was built from, Time its
	// commit time, Modified whether the working tree had changes; all
	// empty when the build carried no VCS information (a test binary,
	// `go build -buildvcs=false`).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// CPUs is the number of logical CPUs the process could use.
	CPUs int `json:"cpus"`
}

// ShortRevision is the first 7 digits of the revision, "unknown" without one.
func (b Build) ShortRevision() string {
	if b.Revision == "" {
		return "unknown"
	}
	return b.Revision[:min(7, len(b.Revision))]
}

// readBuild reads Build from the running binary.
func readBuild() Build {
	b := Build{GoVersion: runtime.Version(), CPUs: runtime.GOMAXPROCS(0)}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}
