package backend

// # Adding an op
//
// First ask whether it can be a composite: a function in core/ops.go built
// from the ops core already has, like core.SiLU (sigmoid, mul) or
// core.Sign. Its gradient then comes from its parts and every backend runs
// it as it is; on WebGPU a pointwise composite fuses into one kernel anyway.
// That touches one file, core/ops.go, and its test.
//
// Make it a primitive only where a kernel pays for itself (a long chain
// made one pass, a numerically better formula, an op no composite reaches).
//
// An elementwise primitive (ClassUnary, ClassBinary) is defined by its row
// of opInfo in backend/ir.go: its float64 definition F64 (the reference,
// the oracle), its f32 function F32 (the cpu backend's generic path) and
// its WGSL expression template (over x, y and the attributes a, b: the
// WebGPU code generator inlines it, fused or alone), with its class, name,
// domain, tolerance and cost. The reference, cpu, WebGPU, the planner's
// fusion, the cost model and the conformance suite read the row, so such
// an op touches:
//
//	backend/ir.go             the constant, its row, and its line in the
//	                          table of special values (the comment of Op)
//	backend/native/lower.go   its ggml lowering (ggml is not generic)
//	core/ops.go               its function and its gradient (vjp)
//
// and a test where core's cases do not reach it (OpExpm1 was added this
// way: see its commit). A backend may add a faster loop for an op, keyed
// by it (the cpu backend's specialised loops in elementwise.go, which
// elementwise_test.go checks against F32); it is an optimisation, never
// needed. WGSL helpers it calls live in the prelude of
// backend/webgpu/kernels.go (expp, logp, sinp, ...).
//
// Any other primitive touches, besides core:
//
//	backend/ir.go                the constant, its row in opInfo (name,
//	                             class, inputs, exactness, domain) and its
//	                             line in the table of special values
//	backend/reference/eval.go    the float64 reference: the oracle
//	backend/cpu/<kernels>.go     reduce.go, movement.go ...
//	backend/webgpu/<kernels>.go  its kernel and its lowering
//	backend/native/lower.go      its ggml lowering
//
// and core/ops.go for its function and its gradient (vjp). Nothing else:
// validation reads opInfo, the planner (package plan) is generic, and the
// conformance suite draws every-op, unary, binary and special-value cases
// from opInfo, so the new op is checked on every backend at once. A switch
// that lacks it panics through Unknown at its first use, and the
// every-op/<name> conformance cases run SampleGraph of each op on every
// backend. OpRoundF16 and OpRoundBF16 are a pair of attribute-free ops
// rather than one with a format attribute: SampleGraph and the op table
// need no special case.
//
// # Adding a composite op
//
// A composite whose fused kernel pays on some backend (ggml's norm,
// soft_max_ext, flash_attn_ext, ...) is an op of class ClassComposite,
// defined in three files of its own:
//
//	backend/composite_<name>.go   its Composite (defineComposite): checks,
//	                              its decomposition into primitives (the
//	                              definition every other backend runs, after
//	                              plan.Expand), its float64 definition, its
//	                              sample and conformance cases, tolerance
//	core/composite_<name>.go      its function for users and its gradient
//	                              (a backward composite where that fuses
//	                              too: OpLayerNormBack; OpMaxPool2dBack
//	                              only where Caps.Native says so, else a
//	                              composition cheaper there than its
//	                              decomposition)
//	backend/<b>/composite_<name>.go  its native lowering, on a backend that
//	                              runs it natively (native: lowerComposite,
//	                              which Caps.Composites lists; webgpu: a
//	                              case of its lower.go and nativeComposites)
//
// Nothing else: validation, SampleGraph, the reference backend, the cost
// model and the conformance suite read the definition. core and the suite
// expand the composites a backend does not declare before Compile;
// plan.Make refuses them. The suite's compositeCases check, on every
// backend, the native lowering and the decomposition against the float64
// definition, the special values included, and again with the inputs
// computed on the device (layer_norm/ranks, layer_norm/computed,
// special/layer_norm and their /decomposed twins).
//
// # Adding a backend
//
// A backend is its kernels plus three small parts:
//
//   - memory: Alloc, Free, Write, Read, Memory over the device's buffers;
//   - Compile: plan.Make(g, plan.Options{...}) does validation, the device
//     limits, dead nodes, views, output placement, slots by liveness, arg
//     sizes and the peak-memory check; the backend turns the plan into its
//     kernels, one per needed node that is not a view;
//   - Run: bind the args, run the kernels in order (one submission where
//     the device allows), make the plan's output copies.
//
// Its kernels see ranks up to NativeRank (4) only: core and the suite
// call plan.Expand before Compile, which lowers ranks 5 and 6 (MaxRank)
// into nodes of rank 4 at most, and plan.Make refuses a node above
// Caps.KernelRank.
//
// backend/cpu is the smallest complete example (compile.go, program.go,
// buffer.go, driver.go around its kernel files). Register the driver in an
// init with a priority (see PriorityWebGPU), add it to backend/all, and run
// the conformance suite: `func TestConformance(t *testing.T) {
// backendtest.Run(t, "name") }`.
//
// # Optional interfaces
//
// core asks for these by type assertion and does without them:
//
//   - RunReader (a program): a run and a read of one of its results in one
//     wait, for a step that reads its loss at once;
//   - NodeTimer (a program): per-node times for the profiler, by the one
//     scheme of NodeClock (the backend times kernels; the clock calibrates,
//     attributes and estimates);
//   - ProgramSizer (a program): the memory it holds, for core's program
//     cache;
//   - Waiter (a backend): a barrier, for backends whose runs return before
//     their work is done (RunInfo.Pending);
//   - LaterReader (a backend, where Caps.LaterReads): a read queued behind
//     the work and waited for later (core.Later). The values are those at
//     the time it is asked, whatever is submitted after; every wait is
//     called once; a backend bounds the reads it keeps in flight. webgpu
//     implements it in both layers: Close completes the reads in flight
//     natively and fails them in the browser;
//   - HostTaker (a backend whose buffers are host memory: cpu): Close
//     takes each buffer's memory for the value's host copy instead of
//     copying it.
