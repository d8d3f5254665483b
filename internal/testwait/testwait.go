// Package testwait waits in tests for what another goroutine does: a
// server's handler, a stream, a collector.
package testwait

import (
	"testing"
	"time"
)

// Until polls cond until it holds, and fails the test (saying what never
// happened) if it does not within 10 s.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}
