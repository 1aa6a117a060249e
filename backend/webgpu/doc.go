// Package webgpu is ag's WebGPU backend: WGSL kernels for every op of the
// backend IR and an executor that runs a whole compiled graph as one
// submission. Natively it runs on wgpu-native through
// github.com/cogentcore/webgpu (Vulkan, Metal, D3D12; OpenGL only with
// AG_WEBGPU_BACKENDS=all or gl, because wgpu-native aborts the process when
// its OpenGL backend meets an EGL without a display); compiled with
// GOOS=js it runs on the browser's navigator.gpu through syscall/js.
// Importing the package registers the driver "webgpu" (priority
// backend.PriorityWebGPU).
//
// This package is the executor (programs, lowering, fusion, kernels); the
// device layer under it (buffers, pipelines, submissions, waits, reads in
// flight), native and in the browser, is package gpu, used only through
// its Device interface.
//
// # Execution
//
// Compile validates the graph and plans it once. Which nodes share a
// kernel is backend/plan's Fuse (its rules are documented there), told by
// Backend.fuseCaps what these kernels fuse: a pointwise chain becomes one
// generated WGSL kernel (fusedgen.go), also as the epilogue of a matmul or
// sum/max and as the prologue of a sum/max, and a run of AdamW/SGD updates
// one dispatch over all their tensors (with the members' own dispatches
// kept for runs whose args alias); a kernel binds at most the device's
// storage buffers. A 4x1024 MLP training step as core lowers it runs 20
// kernels (plus the sums of split matmuls) where node by node it ran 50.
//
// backend/plan's Make then decides where every value lives (views, outputs
// written straight into their args, pooled intermediates reused by
// liveness); this package adds the dispatches, one parameter buffer holding
// all kernel sizes and scalars (plan.PackParams, written once), cached
// pipelines (one per kernel source per Backend) and the bind groups that do
// not depend on Run's args. Run binds the args (bind groups cached by buffer
// identity), records every dispatch into one compute pass of one command
// encoder, appends the copies of outputs that must land in another arg,
// submits once and waits by polling the fence without blocking: on a GPU without pause
// (a blocking wait added about 20 us of wake-up latency per wait on an
// H200), on a software adapter with short sleeps between polls
// (AG_WEBGPU_WAIT=spin or block overrides). wgpu's blocking poll is never
// used: after 5 s it treats unfinished work as done and frees its command
// buffers (see the wait of package gpu's native.go).
// Data crosses the bus only in Backend.Write and Backend.Read.
//
// # Matmul
//
// matmul.go generates a register-blocked kernel: a workgroup computes a
// BM x BN tile with TM x TN accumulators per invocation, A and B staged
// through workgroup memory as vec4s (A transposed), the next K step loaded
// into registers during the current one, and 16-byte global loads and
// stores when M, N and K are multiples of 4. The tiling follows the product
// (pickMatmul). The largest products (from 2^32 multiply-adds) run laid
// out A stored transposed and B not, where both tiles are loaded along M
// and N and stored into workgroup memory as loaded: 128x128 tiles with K
// steps of 32 (mmTN), 38-40 TFLOP/s on an H200 where the same tiles did
// 28-30 in the other layouts; an operand stored the other way is first
// transposed through workgroup tiles into a scratch buffer (A from N =
// 2048, both operands of dX = dY W^T), which costs a few per cent of the
// product. Below that: 128x64 double-buffered with 8x8 per invocation for
// large products and, K split in two or four, for those of about 1024;
// 128x128 where B is stored transposed; and for products with few tiles
// but a long K (a batch of 64-256 rows) 64x64 with K split into parts
// whose partial products a second kernel sums, applying the epilogue. From
// 2048 rows, B stored transposed is transposed first too, since tiles
// loaded along K on both sides ran at half speed. Measured on an H200 by
// ag bench: 34-39 TFLOP/s at 2048-4096 (PyTorch f32 without TF32: 46-51).
// Products of at most 16 outputs (a dot product, a row times a few columns)
// run as dot products, one workgroup per output and part of K.
//
// On a device with shader-f16 (requested whenever the adapter offers it) a
// matmul whose operands are both f16 values - the RoundF16 operands of
// core's f16 matmul precision, or unpack_f16 outputs - stages its tiles in
// f16 workgroup memory: exact, since every value is an f16, and bit for bit
// the f32 kernel's result, since products and sums stay f32 in the same
// order; half the workgroup memory traffic. Open enables this only after
// compiling an f16 shader and checking f16 against f32 tiles bit for bit
// (f16check.go); AG_WEBGPU_F16=off keeps f32 tiles. Of the adapters
// measured, none qualifies: wgpu-native 0.23 (Naga) knows no f16 type
// although lavapipe and the H200 offer the feature, SwiftShader offers
// none, and Chromium 156 on the H200 offers subgroups and
// chromium-experimental-subgroup-matrix but not shader-f16.
//
// # Attention
//
// attention.go runs attention as one kernel in the manner of
// FlashAttention: a workgroup owns a block of queries (one per
// invocation), streams the keys through workgroup memory in tiles, and
// keeps the softmax's running maximum and sum and the output in registers,
// so the [Tq, Tk] scores are never stored. A tile's keep values are read
// together (coalesced) and masked keys are skipped; D past 64 is taken in
// chunks, Dv past 64 in slices (a workgroup each), and key ranges past the
// loop bound, or spread over more workgroups where few would run, in parts
// that a second kernel combines. Measured on an H200 by the device clock
// (counting 4*T*T*D per head): 12-20 TFLOP/s at 16-128 heads of 1024-2048
// tokens with D 64 (20 at 128 x 1024 and 16 x 2048), causal masks alike;
// PyTorch's f32 SDPA reaches about 30, matmul-softmax-matmul here 12-15. With D 128 or 256 it falls to 5-10
// (scores recomputed per slice of Dv; the unfused path reaches 22-24):
// with one query per invocation, each value read from workgroup memory
// serves one multiply-add; blocking several queries per invocation is the
// next step.
//
// # Reductions
//
// A sum/max along the last axis runs one workgroup per row; with fewer than
// 64 rows of at least 8192 elements (a loss over a whole batch) parts of each
// row are reduced by many workgroups and combined by a second kernel. Along
// another axis a workgroup owns 32 consecutive outputs and 8 lanes split the
// reduced axis, in parts combined by a second kernel when it is longer than
// the lanes may loop over (see Limits).
//
// # Limits
//
// The device is requested with the adapter's maxBufferSize and
// maxStorageBufferBindingSize (128 MiB on lavapipe and by default in
// browsers) and, natively, the adapter's workgroup memory (up to 48 KiB),
// invocations (up to 1024) and storage buffers per stage (up to 40; WebGPU's
// default is 8, which limits what fuses in a browser). Elementwise ops,
// fills, AdamW/SGD and get_rows over buffers larger than one binding run as
// several dispatches over bound ranges (plan.DispatchLimits; they are not
// fused); the other ops
// (broadcasting binaries, reductions, softmax, permute/expand/
// slice/concat copies, scatter_add_rows, one_hot, matmul, attention) fail
// to compile with an error naming the binding size and the limit.
//
// Every dispatch folds its workgroups (and a matmul its tiles) into two
// dimensions of at most maxComputeWorkgroupsPerDimension each. No
// invocation loops more than maxTrips (16384) times over data: lavapipe
// ends an invocation's loops after 65535 iterations in all and carries on
// as if they had finished (a sum over 1M rows kept 524280 of them). Longer
// reduced axes, softmax rows, matmul K extents and attention's keys run in
// parts that a second kernel combines (a tree of sequential runs, so
// precision stays), and scatter_add_rows over many source rows as several
// dispatches.
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
// (backend.NodeTimer, through backend.NodeClock) times each kernel by
// timestamps in its calibration runs.
// RunRead (backend.RunReader) records a read's copy after the run's and
// maps it with the timestamps, so a training step natively waits once; the
// read's copy is a command buffer of its own, so that runs that read and
// runs that do not share recordings. A plain run (no read) is submitted
// and not waited for (RunInfo.Pending), so the host builds the next step
// while the GPU runs this one: at most three such runs are submitted
// before the queue is waited empty, and a read waits for all before it
// (AG_WEBGPU_DEFER=off waits at every run). Reading the loss every tenth
// 4x1024 step at batch 64 on an H200, a lazy step went 0.30 -> 0.22 ms and
// a captured one 0.25 -> 0.21 (bench/results/h200-2026-12-04-s13g-*). A
// run that repeats the one before (the same program and buffers: a
// captured step's replays) records the next run's command buffer while
// the device runs it, so the next step submits at once rather than after
// recording its dispatches; anything that could make that recording wrong
// (a buffer destroyed, the query set replaced, a program released) drops
// it. A read asked for with ReadLater (backend.LaterReader, core.Later)
// is a copy into a staging buffer of its own, submitted and not waited
// for; its wait maps that buffer and returns once the copy is done,
// whatever was submitted after, so a loop that waits for step k's loss a
// few steps later never leaves the GPU idle while the host builds a step.
// With reads in flight, the three-run throttle waits for the oldest read's
// copy rather than for the queue to drain.
//
// # Memory
//
// WebGPU cannot query device memory. Memory reports an estimate: total is
// AG_WEBGPU_MEMORY_MB when set, else 2 GiB on software adapters (Chromium's
// SwiftShader included); free is total minus the bytes this backend
// currently holds (buffers, program intermediates and parameter buffers).
// On a real GPU without AG_WEBGPU_MEMORY_MB it returns an error wrapping
// backend.ErrMemoryUnknown (see memoryBudget).
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
// Under GOOS=js the device layer (package gpu's js.go) requests the adapter and
// the device itself through syscall/js (the binding's js side ignores
// requiredLimits, panics on requiredFeatures, and reports every mapAsync as
// successful), with the limits gpu.Open asks for natively (the adapter's
// buffer sizes; workgroup memory, invocations and storage buffers raised
// within reason) and timestamp-query when offered. WGSL constants avoid
// inf and NaN literals, which Chromium's compiler rejects. Calls wait on
// JavaScript promises, so they must run on a goroutine of their own, never
// inside a js.FuncOf callback (that deadlocks). A plain run is submitted
// and not waited for (a wait is a round trip to the GPU process); the next
// read waits and reports its errors. Its dispatches are encoded by one
// JavaScript function from a plan of arrays, kept while the same program
// runs over the same buffers (a captured step's replays, a lazy step that
// binds what it bound before), so a run costs Go one call across the wasm
// boundary rather than three per dispatch. Package browsertest runs the
// tests in headless Chromium.
package webgpu
