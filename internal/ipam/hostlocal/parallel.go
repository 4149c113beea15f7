package hostlocal

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// inParallel runs do(i) for every i below n on a few goroutines and returns when all
// are done. GC's work per address is system calls that wait on the filesystem (reading
// a reservation, unlinking it, rewriting an index entry): one at a time, GC releasing
// 60,000 reservations spent most of its time waiting between them. do must touch only
// its own i's data.
func inParallel(n int, do func(i int)) {
	workers := min(n, 4*runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				do(i)
			}
		})
	}
	wg.Wait()
}
