package profile

import (
	"sync"
	"sync/atomic"
	"time"
)

// passMask makes on[p&passMask] provably in range, so Enabled compiles to an
// AND and one load, with no bounds check. The spare slot is never switched
// on, so an invalid Pass reads as off.
const passMask = 3

var (
	on       [passMask + 1]atomic.Bool // per-pass profiler switches
	anyOn    atomic.Bool               // on[0] || on[1] || on[2], kept by Switch
	counting atomic.Bool               // transfer counter switch

	// mu guards st. Recording takes it; the switches above are read without it
	// so that a disabled profiler costs one load and one branch per op.
	mu sync.Mutex
	st = newState()
)

// Enabled reports whether the profiler of pass p is on. It inlines to a
// plain atomic load; callers check it before reading any clock.
func Enabled(p Pass) bool { return on[p&passMask].Load() }

// Any reports whether any pass profiler is on.
func Any() bool { return anyOn.Load() }

// Counting reports whether transfer counting is on.
func Counting() bool { return counting.Load() }

// Forward switches the forward profiler on or off and returns its previous
// state, like ag_forward_profile. Switching on keeps what was recorded
// before; only a profiler with nothing recorded starts from a reset (the
// seed resets when its totals are NULL). Use ResetForward to start over.
func Forward(on bool) (prev bool) { return Switch(PassForward, on) }

// Backward switches the backward profiler, like Forward does the forward.
func Backward(on bool) (prev bool) { return Switch(PassBackward, on) }

// Switch switches the profiler of pass p (Forward and Backward are
// shorthands; the optimizer's PassUpdate is only reachable here) and returns
// its previous state. An invalid pass is ignored and reports false.
func Switch(p Pass, enable bool) (prev bool) {
	if p >= numPasses {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	prev = on[p].Load()
	if enable && st.pass[p].empty() {
		st.pass[p].reset()
		// The trace clock starts at the first switch-on of an empty profile,
		// so a trace opens at t=0 rather than at process start.
		if !anyOn.Load() && st.trace.len() == 0 {
			st.epoch = time.Now()
		}
	}
	on[p].Store(enable)
	anyOn.Store(on[PassForward].Load() || on[PassBackward].Load() || on[PassUpdate].Load())
	return prev
}

// Count switches transfer counting on or off and returns its previous
// state, like ag_xfer_count: switching on always clears the tally, so a
// measurement starts from zero.
func Count(enable bool) (prev bool) {
	mu.Lock()
	defer mu.Unlock()
	prev = counting.Load()
	if enable {
		st.resetXfer()
		st.xferEver = true
	}
	counting.Store(enable)
	return prev
}

// ResetForward clears the forward profile (stages, ops, per-op totals).
func ResetForward() { ResetPass(PassForward) }

// ResetBackward clears the backward profile.
func ResetBackward() { ResetPass(PassBackward) }

// ResetPass clears the profile of pass p. The switches keep their state.
func ResetPass(p Pass) {
	if p >= numPasses {
		return
	}
	mu.Lock()
	st.pass[p].reset()
	mu.Unlock()
}

// Reset clears everything recorded: every pass, transfer and launch
// counters, step times and the trace. The switches keep their state.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	for p := range st.pass {
		st.pass[p].reset()
	}
	st.resetXfer()
	st.launch = map[string]int{}
	st.steps = stepLog{}
	st.trace.clear()
	st.epoch = time.Now()
}
