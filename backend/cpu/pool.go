package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A persistent pool of worker goroutines runs the tasks of parallel ops.
// Spawning goroutines per op would cost allocations and scheduler work on
// every run. Between ops a worker spins a while on its job slot, then
// sleeps. Handing work to sleeping goroutines through a channel cost 25 us a
// call on a 2-core VM (the woken goroutine waits in the caller's run queue
// until another core steals it): two tasks of 20 us took 45 us, and a 256
// matmul makes one such call, a 1024 one eight.

// poolSpin is how long an idle worker, or a caller waiting on workers,
// checks for news before it sleeps: long enough to span the gap between
// the parallel calls of one op and between the ops of a step.
const poolSpin = 100 * time.Microsecond

// poolWorker is one pool goroutine's mailbox.
type poolWorker struct {
	job      atomic.Pointer[parallel] // the call it is to join, poolBusy while in one, nil when free
	sleeping atomic.Bool              // set before it sleeps on wake
	wake     chan struct{}            // one token per wake-up
	_        [64]byte                 // keep workers' flags off one cache line
}

var (
	poolOnce    sync.Once
	pool        []poolWorker
	poolWorkers int // goroutines besides the caller
)

func startPool() {
	poolWorkers = runtime.GOMAXPROCS(0) - 1
	pool = make([]poolWorker, poolWorkers)
	for i := range pool {
		w := &pool[i]
		w.wake = make(chan struct{}, 1)
		go w.run(i + 1)
	}
}

// poolBusy marks a job slot whose worker has taken its job: the caller can
// no longer take the posting back.
var poolBusy = new(parallel)

// run is worker id's loop: wait for a job, run its share, free the slot.
func (w *poolWorker) run(id int) {
	for {
		p := w.await()
		if p == nil || !w.job.CompareAndSwap(p, poolBusy) {
			continue // taken back: the caller ran out of tasks first
		}
		p.loop(id)
		// Free the slot before counting done: the caller's next call may
		// then post here again.
		w.job.Store(nil)
		p.finish()
	}
}

// await returns the next job, spinning first, then sleeping. The caller
// posts the job, then wakes the worker if it finds it sleeping; the worker
// sets sleeping, then checks the job once more: one of the two sees the
// other's write, and the CAS on sleeping decides who owns the wake token.
func (w *poolWorker) await() *parallel {
	var p *parallel
	if spinUntil(func() bool { p = w.job.Load(); return p != nil }) {
		return p
	}
	w.sleeping.Store(true)
	if p = w.job.Load(); p != nil {
		if !w.sleeping.CompareAndSwap(true, false) {
			<-w.wake // the caller cleared it first and sent a token
		}
		return p
	}
	<-w.wake
	return w.job.Load() // nil if the caller took the job back
}

// spinUntil polls cond until it holds (true) or poolSpin has passed.
func spinUntil(cond func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		spinPause()
		if i%64 == 63 { // reading the clock costs more than a poll
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > poolSpin {
				return false
			}
		}
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
// value serves one call at a time (a CPU backend's runs are serialized);
// calls of different backends share the workers: a worker busy with one
// call is not waited for by another.
type parallel struct {
	fn      func(worker, task int)
	ntask   int64
	next    atomic.Int64
	pending atomic.Int32  // workers posted and not finished
	waiting atomic.Bool   // the caller sleeps on done
	done    chan struct{} // one token per wake-up of the caller
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
	if p.done == nil {
		p.done = make(chan struct{}, 1)
	}
	p.fn, p.ntask = fn, int64(ntask)
	p.next.Store(0)
	for i := range pool[:k] {
		w := &pool[i]
		p.pending.Add(1)
		if !w.job.CompareAndSwap(nil, p) { // busy with another backend's call
			p.pending.Add(-1)
			continue
		}
		if w.sleeping.Load() && w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	p.loop(0)
	// Workers not yet started (asleep: waking one can take 100 us on a VM)
	// would only find no task left; the caller does not wait for them.
	for i := range pool[:k] {
		if pool[i].job.CompareAndSwap(p, nil) {
			p.pending.Add(-1)
		}
	}
	p.wait()
	p.fn = nil
}

// wait returns once every posted worker has finished: spinning first, then
// sleeping (the same handshake as poolWorker.await, on waiting). A token
// can come from a worker of the previous call that counted itself done
// before this call began, so the count is checked again after each wake.
func (p *parallel) wait() {
	zero := func() bool { return p.pending.Load() == 0 }
	for !zero() {
		if spinUntil(zero) {
			return
		}
		p.waiting.Store(true)
		if zero() {
			if !p.waiting.CompareAndSwap(true, false) {
				<-p.done
			}
			return
		}
		<-p.done
	}
}

// finish counts a worker done and wakes the caller if it sleeps.
func (p *parallel) finish() {
	if p.pending.Add(-1) == 0 && p.waiting.CompareAndSwap(true, false) {
		p.done <- struct{}{}
	}
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
