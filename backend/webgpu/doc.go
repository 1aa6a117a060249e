// Package webgpu is ag's WebGPU backend: WGSL kernels for every op of the
// backend IR and an executor that runs a whole compiled graph as one
// submission. Natively it runs on wgpu-native through
// github.com/cogentcore/webgpu (Vulkan, Metal, D3D12); compiled with
// GOOS=js it runs on the browser's navigator.gpu through syscall/js.
// Importing the package registers the driver "webgpu" (priority 30).
//
// # Execution
//
// Compile validates the graph and plans it once: where every value lives
// (args; reshapes are views; an output nobody reads as an arg is written
// straight into its arg; every other intermediate gets a pooled buffer reused
// by liveness), the dispatches of every node, one parameter buffer holding
// all kernel sizes and scalars (written once), cached pipelines (one per
// kernel variant per Backend) and the bind groups that do not depend on Run's
// args. Run binds the args (bind groups cached by buffer identity), records
// every dispatch into one compute pass of one command encoder, appends the
// copies of outputs that must land in another arg, submits once and waits.
// Data crosses the bus only in Backend.Write and Backend.Read.
//
// # Limits
//
// The device is requested with the adapter's maxBufferSize and
// maxStorageBufferBindingSize (128 MiB on lavapipe and by default in
// browsers). Elementwise ops, fills, AdamW/SGD and get_rows over buffers
// larger than one binding run as several dispatches over bound ranges; the
// other ops (broadcasting binaries, reductions, softmax, permute/expand/
// slice/concat copies, scatter_add_rows, one_hot, matmul) fail to compile
// with an error naming the binding size and the limit.
//
// # Device time
//
// Where the adapter offers timestamp-query (natively: Vulkan, Metal, D3D12;
// in browsers that expose it), RunInfo.DeviceTime is the span between
// timestamps written around the compute pass and Caps.DeviceTimer is true.
// The native binding does not expose the queue's timestamp period; the
// ticks are taken as nanoseconds, which holds for wgpu on NVIDIA and
// lavapipe (period 1). A span that is not increasing or longer than the
// host-measured run is discarded in favour of the host time. RunTimed
// (backend.NodeTimer) puts each node into its own pass between timestamps.
//
// # Memory
//
// WebGPU cannot query device memory. Memory reports an estimate: total is
// AG_WEBGPU_MEMORY_MB when set, else 16 GiB (at most 4x maxBufferSize) on a
// real GPU and 2 GiB on software adapters and in browsers; free is total
// minus the bytes this backend currently holds (buffers, program
// intermediates and parameter buffers).
//
// # Selection
//
// Available probes the adapter once per process. "auto" picks this backend
// only on a discrete or integrated GPU; software adapters (lavapipe,
// SwiftShader) are reported as available but are far slower than the CPU
// backends.
//
// # Browser
//
// Under GOOS=js the device layer (device_js.go) requests the adapter and
// the device itself through syscall/js (the binding's js side ignores
// requiredLimits, panics on requiredFeatures, and reports every mapAsync as
// successful), with the adapter's buffer limits and timestamp-query when
// offered. Calls wait on JavaScript promises, so they must run on a
// goroutine of their own, never inside a js.FuncOf callback (that
// deadlocks).
package webgpu
