// Package core holds tensors, devices, the lazy graph, reverse-mode autograd
// and the ops with their gradients.
//
// # Laziness
//
// Ops are package functions (core.MatMul, core.ReLU, ...) that record one
// node of the backend IR on their inputs' device; nothing runs until a sync
// point: Tensor.Data or Item, Device.Sync, a write to or read of a persistent
// tensor that pending work reads, Device.Close. Tensor.Backward appends the
// gradient nodes to the same pending graph and optimizers (package nn) append
// fused update nodes, so a whole training step runs as one program. Programs
// are cached by graph structure: a step that repeats is compiled once and
// replayed with newly bound inputs (automatic capture).
//
// A run keeps the values that someone may read: its results (values no other
// pending op consumes), values marked with Tensor.Keep or passed to Sync,
// gradients, and values a Backward still to come needs. The memory of every
// other intermediate is planned by the backend and reused within the run;
// reading such a value afterwards returns ErrNotKept.
//
// Kept values hold device memory until their tensors are garbage collected
// (or released with Tensor.Release); their buffers then go to a pool for
// the next values of their size. Small values made for one step (up to 16
// KiB: a batch's indices, an optimizer's hyperparameters, the loss read
// with Item) do not wait for the collector: host data uploaded for the
// first time goes back to the host once its run is done, and a small
// result read whole keeps the values read, so the next step's values take
// the same buffers. A lazy step then binds the same buffers at every step,
// which lets a backend record the next run ahead (webgpu). Such a value
// used again is uploaded once more and stays on the device.
//
// Tensor.ReadLater and Capture.CallLater are sync points that do not wait:
// they queue a read behind the work and return a Later, whose Wait returns
// the values as they were when asked for. A loop that waits for step k's
// loss a few steps later keeps the GPU busy meanwhile (the page's training
// loop does): in the browser a read waits a round trip to the GPU process
// (1-3 ms on a GPU, whatever its size), and on native webgpu the host
// builds the next steps while the GPU runs this one. On the CPU backends
// and ggml the values are read when asked for.
//
// # Errors
//
// Shape mistakes are programming errors: ops panic at the call with a message
// naming the op and the shapes. Device and data errors (out of memory, a lost
// device, a failed transfer) are returned by the sync points, and leave the
// pending work pending, so nothing is lost.
//
// # Profiling
//
// With a profiler of package profile switched on, every sync is one profiled
// run whose stages tile its wall time, named as in ggmlR's ag_fwd_profile:
//
//	ctx       draining collected values, (re)opening the backend, program-cache lookup
//	create    recording an op (per op); for a backward also the graph walk
//	flush     allocating device memory for the kept values, making them tensors
//	upload    host values crossing to the device (inputs, first use of params)
//	graph     lowering pending nodes to the IR, compiling on a cache miss, and,
//	          on devices that time themselves, the submit/wait around compute
//	compute   the program run (device time where timestamp queries exist)
//	download  reading requested values back
//
// A sync that reads one value (Item, Data) or a replayed Capture runs and
// reads back with one wait on a backend whose programs fold the read into
// the run (backend.RunReader: webgpu natively); a profiled run does not
// fold, so that its download is timed on its own.
//
// The profile package splits each run among the passes (forward, backward,
// update) of its nodes. Build with -tags agnoprof to compile the hook out.
package core
