//go:build (!amd64 || purego) && !(js && wasm)

package cpu

// bestKernel: without amd64 assembly only the portable kernel exists.
func bestKernel() microKernel { return goKernel }

// kernels lists the micro-kernels this CPU can run, best first (for tests).
func kernels() []microKernel { return []microKernel{goKernel} }
