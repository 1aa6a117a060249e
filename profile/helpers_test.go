package profile

import (
	"testing"
	"time"
)

// fresh clears all profiler state and switches, and does so again after the
// test, so tests sharing the package-level profiler do not see each other.
func fresh(t testing.TB) {
	t.Helper()
	off := func() {
		for _, p := range Passes() {
			Switch(p, false)
		}
		Count(false)
		SetTraceCap(defaultTraceCap)
		Reset()
		mu.Lock()
		st.xferEver = false
		mu.Unlock()
	}
	off()
	t.Cleanup(off)
}

func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
