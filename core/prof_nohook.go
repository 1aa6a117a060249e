//go:build agnoprof

package core

// profiling is constant false in builds without the profiler hook.
func profiling() bool { return false }
