package testenv

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// RunDelay returns how long the calling OS thread has waited, runnable, for
// a CPU since it started (the second field of Linux's
// /proc/thread-self/schedstat), and false where the kernel does not say.
// A test that checks what share of a wall time its code accounts for
// subtracts the delay over the measured span: time the scheduler gave to
// other processes is no part of either, and on a loaded machine it can
// fall anywhere. The caller locks its goroutine to its thread
// (runtime.LockOSThread) around the span.
func RunDelay() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}
