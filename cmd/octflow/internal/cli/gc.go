package cli

import (
	"runtime/debug"
)

// The garbage collector of a process that embeds the engine (`octflow
// dev`, `octflow bench`). The embedded Temporal server, gateway, S3
// endpoint and workers allocate fast and keep a modest heap live, so at
// Go's default (GOGC=100) about a sixth of the process's CPU went to
// collection under the benchmark's burst. A target of 400 collects a
// quarter as often; the soft memory limit bounds what that costs in
// memory.
const (
	embeddedGCPercent   = 400
	embeddedMemoryLimit = 2 << 30 // bytes
)

// embeddedGC is the GC target and soft memory limit for a process that
// embeds the engine, given its environment: an operator's GOGC or
// GOMEMLIMIT stands (0: leave that setting as the runtime has it).
func embeddedGC(getenv func(string) string) (percent int, memoryLimit int64) {
	if getenv("GOGC") == "" {
		percent = embeddedGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		memoryLimit = embeddedMemoryLimit
	}
	return percent, memoryLimit
}

// tuneEmbeddedGC applies embeddedGC to this process.
func tuneEmbeddedGC(getenv func(string) string) {
	percent, limit := embeddedGC(getenv)
	if percent > 0 {
		debug.SetGCPercent(percent)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}
