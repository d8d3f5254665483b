package imaging

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// forEachFrame runs fn(f) for every frame on all cores.
//
// A panic in fn must not end the process: a goroutine's panic cannot be
// recovered by its caller, so it would take a GPU node down with every
// stage it runs. Each worker recovers, the remaining frames are skipped,
// and the first panic is raised again on the caller's goroutine as a
// *FramePanic, where the stage that called forEachFrame can recover it.
func forEachFrame(frames int, fn func(f int)) {
	workers := min(runtime.GOMAXPROCS(0), frames)
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		fault *FramePanic
		stop  = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() {
						fault = &FramePanic{Value: p, Stack: debug.Stack()}
						close(stop)
					})
					for range next { // let the feeder finish
					}
				}
			}()
			for f := range next {
				fn(f)
			}
		})
	}
feed:
	for f := range frames {
		select {
		case next <- f:
		case <-stop:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if fault != nil {
		panic(fault)
	}
}

// FramePanic is a panic raised while processing one frame, carried to
// the goroutine that asked for the work.
type FramePanic struct {
	Value any
	// Stack is where the panic happened, in the worker goroutine.
	Stack []byte
}

func (p *FramePanic) Error() string { return fmt.Sprintf("panic in frame worker: %v", p.Value) }
