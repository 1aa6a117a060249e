// Package cpu is ag's pure-Go reference backend, the embedded default that
// also runs inside wasm. It registers itself as "cpu" (priority
// backend.PriorityCPUAssembly where its assembly kernels run, else
// backend.PriorityCPUPortable):
//
//	import _ "github.com/ag-go/ag/backend/cpu"
//
// Buffers are Go []float32 slices. Compile plans the intermediates of a graph
// into a few reused slabs (by liveness) and precomputes one closure per node,
// so Run allocates nothing. Matrix products use a cache-blocked, packed GEMM
// whose register-tiled micro-kernel is AVX-512 or AVX2+FMA Go assembly on
// amd64 CPUs that have it (chosen at start-up, no cgo), WebAssembly SIMD128
// under GOOS=js (a small wasm module generated at start-up that works on
// Go's memory in place, simd_js.go), and plain Go elsewhere (arm64, the
// purego build tag, a wasm host without SIMD). Large ops are split over a
// persistent pool of GOMAXPROCS goroutines.
package cpu
