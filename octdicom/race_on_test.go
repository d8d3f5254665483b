//go:build race

package octdicom

// raceEnabled: the race detector is on, and its own allocations are
// counted with the code's.
const raceEnabled = true
