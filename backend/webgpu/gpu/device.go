package gpu

import (
	"fmt"
	"unsafe"

	"github.com/ag-go/ag/backend"
)

// The layers' contract: each asserts it here, in the build it is part of.
var (
	_ Device      = (*dev)(nil)
	_ PendingRead = (*laterRead)(nil)
)

// Device is what the executor asks of a device layer. Its methods are not
// safe for concurrent use: the executor holds its lock around each call
// (PendingRead.Await excepted).
type Device interface {
	// Info is the adapter's description and the device's limits. The
	// executor may clear F16 (a failed f16 check) and tests may clear
	// Timestamps: the device reads what it holds then.
	Info() *Info

	// Memory: storage buffers of size bytes (storage, copy source and
	// destination), written and read at byte offsets (a read waits for
	// the runs before it).
	NewBuffer(size uint64) (*Buffer, error)
	DestroyBuffer(*Buffer)
	Write(b *Buffer, off uint64, data []byte) error
	Read(b *Buffer, off uint64, dst []byte) error
	// ReadLater queues a read of len(dst) bytes behind the work submitted
	// so far and returns without waiting for it; nil: it read at once (a
	// read larger than MaxStaging). Past a bound of reads in flight the
	// oldest completes (its wait then returns what it took).
	ReadLater(b *Buffer, off uint64, dst []byte) (PendingRead, error)

	// Kernels: a pipeline per WGSL source (entry point main; readOnly per
	// binding, binding 0 the parameters) and bind groups of buffer ranges.
	NewPipeline(label, wgsl string, readOnly []bool) (*Pipeline, error)
	ReleasePipeline(*Pipeline)
	NewBindGroup(p *Pipeline, entries []BindEntry) (*BindGroup, error)
	ReleaseBindGroup(*BindGroup)

	// Runs: passes of dispatches then copies, one submission, waited for.
	// With timed, a timestamp before the first pass and after each (ticks
	// in ns); RunInside times between the dispatches of one pass where
	// Info.InsideTS says the device can. RunRead folds a read into the run
	// where FoldsRead allows its size (rb may be nil).
	Run(passes [][]Dispatch, copies []CopyOp, timed bool) (ticks []uint64, err error)
	RunRead(passes [][]Dispatch, copies []CopyOp, timed bool, rb *ReadBack) (ticks []uint64, err error)
	RunInside(ds []Dispatch, copies []CopyOp) (ticks []uint64, err error)
	FoldsRead(bytes int) bool
	// RunRepeatable is a run of one pass that may repeat (key): natively
	// the next one is recorded while this one runs (ahead: this one was);
	// build makes its dispatches when they are needed.
	RunRepeatable(key RunKey, build func() ([]Dispatch, []CopyOp, error), timed bool, rb *ReadBack) (ticks []uint64, ahead bool, err error)
	// Deferred runs return before their work is done (RunInfo.Pending):
	// always in the browser, natively unless SetDefer(false). Reads, and
	// runs waited for, wait for them (queue order).
	DefersRuns() bool
	SetDefer(on bool) (was bool)
	DeferRun(key RunKey, build func() ([]Dispatch, []CopyOp, error)) (ahead bool, err error)
	DrainDeferred()
	// DropAhead forgets what was recorded ahead (a buffer it binds went).
	DropAhead()
	// WaitIdle waits until everything submitted has finished.
	WaitIdle() error
	// Close finishes or fails the work in flight and releases the device
	// (and every buffer, pipeline and bind group of it).
	Close()

	// Counters and Unfinished are for tests: what the device counted, and
	// the deferred runs not known finished (natively; 0 in the browser).
	Counters() Counters
	Unfinished() uint64
}

// PendingRead is a read in flight (Device.ReadLater): Await waits without
// the executor's lock (in the browser other goroutines use the device
// meanwhile), Finish completes it under the lock.
type PendingRead interface {
	// Await waits for the read's bytes (natively it does nothing: Finish
	// maps them under the lock).
	Await() error
	// Finish takes the bytes into the read's dst unless done before, and
	// returns awaitErr joined with the read's own error; closed says the
	// executor closed the device meanwhile.
	Finish(awaitErr error, closed bool) error
}

// Counters are what a device counts for tests.
type Counters struct {
	Ahead     int // runs that submitted a command buffer recorded ahead (native)
	Drains    int // throttles that waited for the queue to drain (native)
	PlanHits  int // deferred runs that reused a plan (browser)
	PlanBuilt int // plans built (browser)
}

// Open requests a device from the adapter Probe describes, with the limits
// package webgpu's doc lists and, where offered, timestamp queries and
// shader-f16.
func Open() (Device, error) {
	d, err := openDev()
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Probe describes the adapter Open would use, without opening a device.
func Probe() (Info, error) { return probeDev() }

func (d *dev) Info() *Info { return &d.info }

func (d *dev) Counters() Counters { return d.counters }

// ReadsLater: ReadLater returns before the values are in (Caps.LaterReads),
// in both layers.
const ReadsLater = true

// withFewer calls request with feats and, while it fails, again without
// the last feature asked for (the features are listed most wanted first:
// shader-f16 failing keeps timestamps); it returns the features of the
// last request and its error.
func withFewer[F any](feats []F, request func([]F) error) ([]F, error) {
	for {
		err := request(feats)
		if err == nil || len(feats) == 0 {
			return feats, err
		}
		feats = feats[:len(feats)-1]
	}
}

// inChunks calls f on data in chunks of at most MaxStaging bytes, in
// order, each with the byte offset from off where it belongs; the first
// error stops it.
func inChunks(off uint64, data []byte, f func(off uint64, chunk []byte) error) error {
	for len(data) > 0 {
		n := min(len(data), MaxStaging)
		if err := f(off, data[:n]); err != nil {
			return err
		}
		data, off = data[n:], off+uint64(n)
	}
	return nil
}

// MaxStaging bounds one readback or upload chunk so that a read of a large
// table does not need a staging buffer as large as the table.
const MaxStaging = 64 << 20

// The limits both layers request above WebGPU's defaults (16 KiB of
// workgroup memory, 256 invocations, 8 storage buffers per stage), up to
// what the adapter has: larger matmul tiles need the first two, fused
// kernels the third; these bounds are "within reason", not measured optima.
const (
	wantWGStorage      = 48 << 10 // maxComputeWorkgroupStorageSize
	wantInvocations    = 1024     // maxComputeInvocationsPerWorkgroup, workgroup sizes X and Y
	wantStorageBuffers = 40       // maxStorageBuffersPerShaderStage
)

// Info describes the adapter and the limits the device was created with.
type Info struct {
	Name   string // adapter name ("llvmpipe (LLVM 15.0.6, 256 bits)")
	Driver string // driver description, may be empty
	API    string // "Vulkan", "Metal", "browser", ...
	Kind   string // "discrete GPU", "integrated GPU", "CPU", "unknown"
	// GPU: a real GPU (discrete or integrated), the only kind "auto" picks.
	GPU bool
	// Unsupported are ops this device does not run (Caps.Unsupported).
	Unsupported []backend.Op

	MaxBuffer         uint64 // maxBufferSize, bytes
	MaxBinding        uint64 // maxStorageBufferBindingSize, bytes
	MaxInvocations    uint32 // maxComputeInvocationsPerWorkgroup
	MaxWGSizeX        uint32 // maxComputeWorkgroupSizeX
	MaxWGStorage      uint32 // maxComputeWorkgroupStorageSize, bytes
	StorageAlign      uint32 // minStorageBufferOffsetAlignment, bytes
	MaxWGPerDim       uint32 // maxComputeWorkgroupsPerDimension
	MaxStorageBuffers uint32 // maxStorageBuffersPerShaderStage
	// Timestamps: the device was created with timestamp-query.
	Timestamps bool
	// InsideTS: timestamps can be written between the dispatches of a
	// pass (the browser's chromium-experimental-timestamp-query-inside-passes).
	InsideTS bool
	// F16: the device was created with shader-f16 (matmuls of f16 values
	// stage their tiles in f16).
	F16 bool
}

// String is the human description used in Caps.Device and Availability.Why.
func (i Info) String() string {
	s := i.Name
	if i.Driver != "" && i.Driver != i.Name {
		s += " (" + i.Driver + ")"
	}
	return fmt.Sprintf("%s via %s, %s", s, i.API, i.Kind)
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// ReadBack is a read that a run folds into its submission (RunRead):
// len(Dst) bytes of Src from byte Off, copied after the run's own copies
// (FoldsRead bounds it to one staging chunk).
type ReadBack struct {
	Src *Buffer
	Off uint64
	Dst []byte
}

// RunKey identifies a run for recording the next one ahead (natively) or
// for reusing its encoding (DeferRun, in the browser): the executor's
// program and its bound buffers. A read folded into the run is not part of
// it (natively a command buffer of its own), and whether a run writes
// timestamps is the device's, the same for all. A key holding the pointers
// keeps their addresses from being reused.
type RunKey interface {
	// Same reports whether o (nil: none) is the key of the same run.
	Same(o RunKey) bool
	// Clone is a copy the device may keep (the caller's run owns what
	// the key holds).
	Clone() RunKey
}

// BindEntry binds bytes [Off, Off+Size) of Buf at the binding of its index.
type BindEntry struct {
	Buf       *Buffer
	Off, Size uint64
}

// Dispatch is one compute dispatch of a pass.
type Dispatch struct {
	Pipe    *Pipeline
	Bind    *BindGroup
	X, Y, Z uint32 // workgroups
	Node    int    // the graph node it computes (RunTimed's attribution)
}

// CopyOp is a buffer-to-buffer copy recorded after the compute passes
// (outputs that must land in another arg).
type CopyOp struct {
	Src, Dst       *Buffer
	SrcOff, DstOff uint64
	Size           uint64
}

// BytesOf views a slice of words (f32 values, u32 words, u64 timestamps)
// as bytes without copying.
func BytesOf[T float32 | uint32 | uint64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
