//go:build js && wasm

package cpu

// bestKernel: the wasm SIMD block kernel where the browser or Node can run
// it (simd_js.go), else the portable Go kernel.
func bestKernel() microKernel { return kernels()[0] }

// kernels lists the micro-kernels that run here, best first (for tests).
func kernels() []microKernel {
	if simdMod != nil {
		return []microKernel{simdKernel, goKernel}
	}
	return []microKernel{goKernel}
}

func init() {
	if simdMod == nil {
		fallbackWhy = "wasm SIMD unavailable: " + simdWhy
	}
}
