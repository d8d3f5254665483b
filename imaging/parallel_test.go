package imaging

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEachFrameRunsEveryFrameOnce(t *testing.T) {
	var seen [97]atomic.Int32
	forEachFrame(len(seen), func(f int) { seen[f].Add(1) })
	for f := range seen {
		if n := seen[f].Load(); n != 1 {
			t.Errorf("frame %d ran %d times", f, n)
		}
	}
}

func TestAPanicInAFrameWorkerReachesTheCallerAsFramePanic(t *testing.T) {
	caught := func() (p any) {
		defer func() { p = recover() }()
		forEachFrame(64, func(f int) {
			if f == 17 {
				panic("index out of range in frame 17")
			}
		})
		return nil
	}()
	var fp *FramePanic
	err, _ := caught.(error)
	if !errors.As(err, &fp) || fp.Value != "index out of range in frame 17" || len(fp.Stack) == 0 {
		t.Fatalf("caller recovered %#v, want a *FramePanic with the value and the worker's stack", caught)
	}
}
