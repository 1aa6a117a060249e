package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A persistent pool of worker goroutines runs the tasks of parallel ops.
// Spawning goroutines per op would cost allocations and scheduler work on
// every run; the pool's goroutines block on a channel between ops instead.

// poolWork hands one worker its id within one parallel call.
type poolWork struct {
	p  *parallel
	id int
}

var (
	poolOnce    sync.Once
	poolCh      chan poolWork
	poolWorkers int // goroutines besides the caller
)

func startPool() {
	poolWorkers = runtime.GOMAXPROCS(0) - 1
	poolCh = make(chan poolWork)
	for range poolWorkers {
		go func() {
			for w := range poolCh {
				w.p.loop(w.id)
				w.p.wg.Done()
			}
		}()
	}
}

// threads is how many goroutines a parallel call may use.
func threads() int {
	poolOnce.Do(startPool)
	return poolWorkers + 1
}

// parallel runs ntask tasks fn(worker, task) over the pool and the caller.
// Workers take task indices from a shared counter, so uneven tasks balance.
// worker is 0 for the caller and 1..threads()-1 for pool goroutines; it is
// unique within one call, so it may index per-worker scratch. One parallel
// value serves one call at a time (a CPU backend's runs are serialized).
type parallel struct {
	fn    func(worker, task int)
	ntask int64
	next  atomic.Int64
	wg    sync.WaitGroup
}

// do runs the tasks and returns when all are done. fn should be created once
// (at compile time), not per call, so that calls do not allocate.
func (p *parallel) do(ntask int, fn func(worker, task int)) {
	k := min(threads()-1, ntask-1) // helpers besides the caller
	if k <= 0 {
		for t := range ntask {
			fn(0, t)
		}
		return
	}
	p.fn, p.ntask = fn, int64(ntask)
	p.next.Store(0)
	p.wg.Add(k)
	for i := 1; i <= k; i++ {
		poolCh <- poolWork{p, i}
	}
	p.loop(0)
	p.wg.Wait()
	p.fn = nil
}

func (p *parallel) loop(id int) {
	for {
		t := p.next.Add(1) - 1
		if t >= p.ntask {
			return
		}
		p.fn(id, int(t))
	}
}

// chunks splits n items into tasks of at least grain items, at most a few
// per thread (more than one each lets fast workers take up slack).
func chunks(n, grain int) int {
	if n <= grain {
		return 1
	}
	t := threads()
	if t == 1 {
		return 1
	}
	c := min((n+grain-1)/grain, 4*t)
	return c
}

// span returns the half-open item range of task t out of c over n items.
func span(n, c, t int) (lo, hi int) {
	return n * t / c, n * (t + 1) / c
}
