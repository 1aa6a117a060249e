package webgpu

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/ag-go/ag/backend"
)

// This file holds what the two device layers (device_native.go through
// wgpu-native, device_js.go through the browser's navigator.gpu) share: their
// contract (gpuDevice, pendingRead), the description of an adapter and the
// plain structs the executor hands them. Each layer defines the types gbuf,
// gpipe, gbind, stageBuf (its size field and destroy method serve
// laterStage), laterRead (embedding laterBase) and dev, asserts in its file
// that they satisfy the contract, and defines
//
//	openDev() (*dev, error)     // the device, with the limits doc.go lists
//	probeDev() (devInfo, error) // the adapter's description, no device
//	const readsLater bool       // Caps.LaterReads
//	(*dev).newStage(size uint64) (stageBuf, error)      // a MapRead staging buffer
//	(*dev).startLater(b *gbuf, off uint64, r *laterRead) // submits r's copy
//
// This file's code reads dev's fields info (devInfo), later and laterFree
// (the reads in flight and the staging buffers kept); the rest of a dev is
// its layer's.

// gpuDevice is what the executor asks of a device layer.
type gpuDevice interface {
	// Memory: storage buffers of size bytes, written and read at byte
	// offsets (a read waits for the runs before it).
	newBuffer(size uint64, usage bufUsage) (*gbuf, error)
	destroyBuffer(*gbuf)
	write(b *gbuf, off uint64, data []byte) error
	read(b *gbuf, off uint64, dst []byte) error
	// readLater queues a read of len(dst) bytes behind the work submitted
	// so far; nil: it read at once. completeRead finishes the oldest when
	// too many are in flight (laterStage).
	readLater(b *gbuf, off uint64, dst []byte) (*laterRead, error)
	completeRead(*laterRead)

	// Kernels: a pipeline per WGSL source (readOnly per binding, binding 0
	// the parameters) and bind groups of buffer ranges.
	newPipeline(label, wgsl string, readOnly []bool) (*gpipe, error)
	releasePipeline(*gpipe)
	newBindGroup(p *gpipe, entries []bindEntry) (*gbind, error)
	releaseBindGroup(*gbind)

	// Runs: passes of dispatches then copies, one submission. With timed,
	// a timestamp before the first pass and after each (ticks in ns);
	// runInside times between the dispatches of one pass where
	// devInfo.insideTS says the device can. runRead folds a read into the
	// run where foldsRead allows its size (rb may be nil).
	run(passes [][]dispatch, copies []copyOp, timed bool) (ticks []uint64, err error)
	runRead(passes [][]dispatch, copies []copyOp, timed bool, rb *readBack) (ticks []uint64, err error)
	runInside(ds []dispatch, copies []copyOp) (ticks []uint64, err error)
	foldsRead(bytes int) bool
	// runRepeatable is a run that may repeat (key): natively the next one
	// is recorded while this one runs (ahead: this one was); build makes
	// its dispatches when they are needed.
	runRepeatable(key runKey, build func() ([]dispatch, []copyOp, error), timed bool, rb *readBack) (ticks []uint64, ahead bool, err error)
	// Deferred runs return before their work is done (RunInfo.Pending):
	// always in the browser, natively unless setDefer(false).
	defersRuns() bool
	setDefer(on bool) (was bool)
	deferRun(key runKey, build func() ([]dispatch, []copyOp, error)) (ahead bool, err error)
	drainDeferred()
	// dropAhead forgets what was recorded ahead (a buffer it binds went).
	dropAhead()
	waitIdle() error
	close()
}

// pendingRead is a read in flight (gpuDevice.readLater): await waits
// without the backend's lock (in the browser other goroutines use the
// device meanwhile), finish completes it under the lock.
type pendingRead interface {
	await() error
	finish(awaitErr error, closed bool) error
}

// maxStaging bounds one readback or upload chunk so that a read of a large
// table does not need a staging buffer as large as the table.
const maxStaging = 64 << 20

// The limits both layers request above WebGPU's defaults (16 KiB of
// workgroup memory, 256 invocations, 8 storage buffers per stage), up to
// what the adapter has: larger matmul tiles need the first two, fused
// kernels the third; these bounds are "within reason", not measured optima.
const (
	wantWGStorage      = 48 << 10 // maxComputeWorkgroupStorageSize
	wantInvocations    = 1024     // maxComputeInvocationsPerWorkgroup, workgroup sizes X and Y
	wantStorageBuffers = 40       // maxStorageBuffersPerShaderStage
)

// readLater queues a read of len(dst) bytes of b at off behind the work
// submitted so far, into a staging buffer of its own (laterStage), and
// returns without waiting (the layer's startLater submits the copy); the
// read's await and finish take the bytes. A read larger than one staging
// chunk reads at once (nil).
func (d *dev) readLater(b *gbuf, off uint64, dst []byte) (*laterRead, error) {
	n := uint64(len(dst))
	if n > maxStaging {
		return nil, d.read(b, off, dst)
	}
	st, err := d.laterStage(n)
	if err != nil {
		return nil, err
	}
	r := &laterRead{laterBase: laterBase{d: d, st: st, n: n, dst: dst}}
	if err := d.startLater(b, off, r); err != nil {
		d.giveStage(st)
		return nil, err
	}
	d.later = append(d.later, r)
	return r, nil
}

// laterBase is what a read in flight holds in both layers.
type laterBase struct {
	d   *dev
	st  stageBuf // the copy's destination, given back or destroyed once taken
	n   uint64
	dst []byte
	// complete: the bytes are in dst (or err says why not), taken by its
	// wait or earlier (completeRead: too many in flight, a throttle, close)
	complete bool
	err      error
}

// Reads waited for later (readLater) each copy into a staging buffer of
// their own. maxLaterFree bounds those kept for the next reads; maxLater
// the reads in flight: past it the oldest completes (its wait then returns
// what it took), so reads never waited for, against LaterReader's
// contract, hold a bounded number of staging buffers.
const (
	maxLaterFree = 64
	maxLater     = 256
)

// stageSize is the size of a later read's staging buffer for n bytes.
func stageSize(n uint64) uint64 { return max((n+3)&^3, 256) }

// laterStage returns a staging buffer of at least n bytes for a later
// read: one given back, or a fresh one of stageSize(n) bytes. Past
// maxLater reads in flight the oldest completes first.
func (d *dev) laterStage(n uint64) (stageBuf, error) {
	for len(d.later) >= maxLater {
		d.completeRead(d.later[0])
	}
	if i := slices.IndexFunc(d.laterFree, func(s stageBuf) bool { return s.size >= n }); i >= 0 {
		st := d.laterFree[i]
		d.laterFree = slices.Delete(d.laterFree, i, i+1)
		return st, nil
	}
	return d.newStage(stageSize(n))
}

// giveStage keeps a staging buffer for the next later read, or destroys it.
func (d *dev) giveStage(st stageBuf) {
	if len(d.laterFree) < maxLaterFree {
		d.laterFree = append(d.laterFree, st)
		return
	}
	st.destroy()
}

// dropStages destroys the staging buffers kept (close).
func (d *dev) dropStages() {
	for _, st := range d.laterFree {
		st.destroy()
	}
	d.laterFree = nil
}

// devInfo describes the adapter and the limits the device was created with.
type devInfo struct {
	name   string // adapter name ("llvmpipe (LLVM 15.0.6, 256 bits)")
	driver string // driver description, may be empty
	api    string // "Vulkan", "Metal", "browser", ...
	kind   string // "discrete GPU", "integrated GPU", "CPU", "unknown"
	// gpu: a real GPU (discrete or integrated), the only kind "auto" picks.
	gpu bool
	// unsupported are ops this device does not run (Caps.Unsupported).
	unsupported []backend.Op

	maxBuffer         uint64 // maxBufferSize, bytes
	maxBinding        uint64 // maxStorageBufferBindingSize, bytes
	maxInvocations    uint32 // maxComputeInvocationsPerWorkgroup
	maxWGSizeX        uint32 // maxComputeWorkgroupSizeX
	maxWGStorage      uint32 // maxComputeWorkgroupStorageSize, bytes
	storageAlign      uint32 // minStorageBufferOffsetAlignment, bytes
	maxWGPerDim       uint32 // maxComputeWorkgroupsPerDimension
	maxStorageBuffers uint32 // maxStorageBuffersPerShaderStage
	// timestamps: the device was created with timestamp-query.
	timestamps bool
	// insideTS: timestamps can be written between the dispatches of a
	// pass (the browser's chromium-experimental-timestamp-query-inside-passes).
	insideTS bool
	// f16: the device was created with shader-f16 (matmuls of f16 values
	// stage their tiles in f16).
	f16 bool
}

// String is the human description used in Caps.Device and Availability.Why.
func (i devInfo) String() string {
	s := i.name
	if i.driver != "" && i.driver != i.name {
		s += " (" + i.driver + ")"
	}
	return fmt.Sprintf("%s via %s, %s", s, i.api, i.kind)
}

// bufUsage says what a device buffer is for.
type bufUsage int

const (
	usageStorage bufUsage = iota // storage + copy src/dst: tensors, params
)

// readBack is a read that a run folds into its submission (RunRead):
// len(dst) bytes of src from byte off, copied after the run's own copies
// (foldsRead bounds it to one staging chunk).
type readBack struct {
	src *gbuf
	off uint64
	dst []byte
}

// runKey identifies a run for recording the next one ahead (natively) or
// for reusing its encoding (deferRun, in the browser): its program and its
// bound buffers. A read folded into the run is not part of it (natively a
// command buffer of its own), and whether a run writes timestamps is the
// device's, the same for all. Holding the pointers keeps their addresses
// from being reused.
type runKey struct {
	prog *program
	bufs []*buffer
}

func (k runKey) same(o runKey) bool {
	return k.prog != nil && k.prog == o.prog && slices.Equal(k.bufs, o.bufs)
}

// clone copies the buffer list, which the caller's run owns.
func (k runKey) clone() runKey {
	k.bufs = slices.Clone(k.bufs)
	return k
}

// bindEntry binds bytes [off, off+size) of buf at the binding of its index.
type bindEntry struct {
	buf       *gbuf
	off, size uint64
}

// dispatch is one compute dispatch of a pass.
type dispatch struct {
	pipe    *gpipe
	bind    *gbind
	x, y, z uint32
	node    int // the graph node it computes (RunTimed's attribution)
}

// copyOp is a buffer-to-buffer copy recorded after the compute passes
// (outputs that must land in another arg).
type copyOp struct {
	src, dst       *gbuf
	srcOff, dstOff uint64
	size           uint64
}

// bytesOf views a slice of words (f32 values, u32 words, u64 timestamps)
// as bytes without copying.
func bytesOf[T float32 | uint32 | uint64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
