package imaging

import (
	"runtime"
	"sync"
)

// forEachFrame runs fn(f) for every frame on all cores.
func forEachFrame(frames int, fn func(f int)) {
	workers := min(runtime.GOMAXPROCS(0), frames)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for f := range next {
				fn(f)
			}
		})
	}
	for f := range frames {
		next <- f
	}
	close(next)
	wg.Wait()
}
