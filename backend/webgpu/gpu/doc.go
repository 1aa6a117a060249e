// Package gpu is the WebGPU backend's device layer: the Device interface
// that package webgpu (programs, lowering, fusion, kernels) runs its work
// through, and its two implementations, chosen by build tags: native.go,
// wgpu-native through github.com/cogentcore/webgpu (every GOOS but js), and
// js.go, the browser's navigator.gpu through syscall/js (GOOS=js).
//
// A Device makes storage buffers, compute pipelines of WGSL and bind groups
// (the handle types Buffer, Pipeline and BindGroup, each layer's own), and
// runs passes of Dispatch values and CopyOp copies in one submission,
// waited for (Run, RunRead), recorded ahead when it repeats
// (RunRepeatable) or returned from before it is done (DeferRun). Info
// describes the adapter and the limits the device was opened with.
//
// Each layer defines the types Buffer, Pipeline, BindGroup, stageBuf (its
// size field and destroy method serve laterStage), laterRead (embedding
// laterBase) and dev, and
//
//	openDev() (*dev, error)     // the device, with the limits webgpu's doc lists
//	probeDev() (Info, error)    // the adapter's description, no device
//	const ReadsLater bool       // Caps.LaterReads
//	(*dev).newStage(size uint64) (stageBuf, error)         // a MapRead staging buffer
//	(*dev).startLater(b *Buffer, off uint64, r *laterRead) // submits r's copy
//	(*dev).completeRead(r *laterRead)                      // waits for r, takes its bytes
//
// The shared code (device.go, later.go) reads dev's fields info (Info),
// later and laterFree (the reads in flight and the staging buffers kept)
// and counters; the rest of a dev is its layer's.
package gpu
