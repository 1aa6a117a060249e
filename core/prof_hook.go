//go:build !agnoprof

package core

import "github.com/ag-go/ag/profile"

// profiling reports whether any profiler is on: the one branch per op that
// the profiler costs when off. Build with -tags agnoprof to compile the hook
// out entirely (BenchmarkRecord compares the two).
func profiling() bool { return profile.Any() }
