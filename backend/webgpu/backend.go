package webgpu

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// backend.PriorityWebGPU: on a real GPU it is the fastest backend measured
// (an H200: the 4x1024 MLP step 1.6-1.8x faster than ggml-vulkan).
func init() { backend.Register("webgpu", backend.PriorityWebGPU, driver{}) }

// driver opens the WebGPU backend; its probe runs once per process.
type driver struct{}

var probe struct {
	once sync.Once
	info gpu.Info
	err  error
}

func probed() (gpu.Info, error) {
	probe.once.Do(func() { probe.info, probe.err = gpu.Probe() })
	return probe.info, probe.err
}

// Available reports whether an adapter exists. "auto" may pick it only on a
// real GPU: software adapters (lavapipe, SwiftShader) are far slower than
// the CPU backends.
func (driver) Available() backend.Availability {
	info, err := probed()
	if err != nil {
		return backend.Availability{Why: err.Error()}
	}
	why := info.String()
	if !info.GPU {
		why += " (not picked by auto)"
	}
	return backend.Availability{OK: true, Auto: info.GPU, Why: why}
}

// Open requests a device from the adapter.
func (driver) Open() (backend.Backend, error) {
	d, err := gpu.Open()
	if err != nil {
		return nil, err
	}
	info := d.Info()
	b := &Backend{d: d, info: info, pipes: map[string]*gpu.Pipeline{}, bindLimit: info.MaxBinding, maxTrips: maxTrips}
	b.total = memoryBudget(*info)
	b.noF16 = os.Getenv("AG_WEBGPU_F16") == "off"
	b.f16Why = "the device has no shader-f16"
	if info.F16 {
		b.f16Why = "shader-f16"
		if err := b.compilesF16(); err != nil {
			info.F16 = false
			b.f16Why = fmt.Sprintf("the device has shader-f16 but its WGSL compiler rejects f16: %.200s", strings.Join(strings.Fields(err.Error()), " "))
		} else if err := b.checkF16Tiles(); err != nil {
			info.F16 = false
			b.f16Why = fmt.Sprintf("f16 matmul tiles failed their check, so they stay f32: %v", err)
		}
	}
	return b, nil
}

// f16Enable opens every shader that uses f16 (WGSL's enable directive).
const f16Enable = "enable f16;\n"

// f16Probe uses f16 the way the matmul's f16 tiles do.
const f16Probe = f16Enable + `@group(0) @binding(0) var<storage, read_write> Y: array<f32>;
var<workgroup> T: array<vec4<f16>, 4>;
@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) i: u32) {
	T[i] = vec4<f16>(f16(Y[i]));
	workgroupBarrier();
	Y[i] = vec4<f32>(T[3u - i]).x;
}
`

// compilesF16 returns the error of compiling f16 on the device: an
// adapter may offer shader-f16 while the WGSL compiler does not know the
// type (wgpu-native 0.23's Naga on lavapipe and NVIDIA's Vulkan driver).
func (b *Backend) compilesF16() error {
	var err error
	gpu.Quietly(func() {
		var p *gpu.Pipeline
		if p, err = b.d.NewPipeline("f16_probe", f16Probe, []bool{false}); err == nil {
			b.d.ReleasePipeline(p)
		}
	})
	return err
}

// Backend is an opened WebGPU device. Its methods are safe for concurrent
// use; runs are serialized.
type Backend struct {
	mu sync.Mutex
	d  gpu.Device
	// info is d's description and limits, shared with it: Open clears F16
	// when f16 tiles fail their check.
	info   *gpu.Info
	closed bool
	nextID uint64
	pipes  map[string]*gpu.Pipeline // compiled kernels by WGSL source
	// live are the device buffers and programs not yet freed: Close frees
	// them, for wgpu keeps a device (and the driver's) alive while any of
	// its objects is (on NVIDIA the 30th device opened after 29 closed
	// found no adapter).
	liveBufs  map[*gpu.Buffer]struct{}
	liveProgs map[*program]struct{}
	// allocated counts the bytes of live device buffers (tensors, program
	// intermediates and parameters), total is the Memory budget.
	allocated, total uint64
	// bindLimit is the largest storage binding in bytes (the device's
	// maxStorageBufferBindingSize; tests lower it to exercise splitting).
	bindLimit uint64
	// matmulForce forces the tiling and K split of the register-blocked
	// matmul (tests).
	matmulForce *mmPlan
	// attnForce replaces attention's tiling (tests and benchmarks).
	attnForce *attnTuning
	// noFuse turns fusion off (tests and benchmarks compare both ways).
	noFuse bool
	// tbRows replaces tbMinRows when not 0 (-1: never transpose an
	// operand first; benchmarks compare).
	tbRows int
	// tnAll plans every product whose operands may be copied as mmTN's
	// (pickTN), whatever its size (tests).
	tnAll bool
	// gpuPlans plans matmuls for a GPU on a software adapter too, so that
	// tests there reach the GPU's tilings, K splits and dot kernels.
	gpuPlans bool
	// f16Why says whether matmul tiles can be f16 here, and why not.
	f16Why string
	// noF16 keeps matmul tiles f32 on a device with shader-f16 (tests and
	// benchmarks compare both ways; AG_WEBGPU_F16=off).
	noF16 bool
	// maxTrips is the bound on a data-sized loop of one invocation
	// (the constant maxTrips; tests lower it to exercise the splits on
	// small tensors).
	maxTrips int
}

// buffer is the Backend's backend.Buffer.
type buffer struct {
	g     *gpu.Buffer
	n     int
	id    uint64
	owner *Backend
	freed bool
}

// Len returns the element count.
func (b *buffer) Len() int { return b.n }

// memoryBudget is the total Memory reports. WebGPU has no memory query, so it
// is a stated budget: AG_WEBGPU_MEMORY_MB when set, else 2 GiB on a
// software adapter, and 0 (unknown) on a hardware GPU: any guess there
// either refuses models the GPU holds (a 4x maxBufferSize guess refused an
// 8x4096 model on an H200 with 139 GiB) or promises memory it lacks, so
// allocations report what fails instead.
func memoryBudget(info gpu.Info) uint64 {
	if s := os.Getenv("AG_WEBGPU_MEMORY_MB"); s != "" {
		if mb, err := strconv.ParseUint(s, 10, 64); err == nil && mb > 0 {
			return mb << 20
		}
	}
	if info.GPU {
		return 0
	}
	return 2 << 30
}

// Caps describes the device.
func (b *Backend) Caps() backend.Caps {
	return backend.Caps{
		Name:           "webgpu",
		Device:         b.info.String(),
		MaxBufferElems: int(b.info.MaxBuffer / 4),
		DeviceTimer:    b.info.Timestamps,
		Timer:          b.timerText(),
		Unsupported:    b.info.Unsupported,
		Composites:     slices.Clone(nativeComposites),
		LaterReads:     gpu.ReadsLater,
	}
}

// nativeComposites are the composites with kernels of their own here:
// the max pool's gradient, which composed from primitives gathers the
// windows, marks each one's first maximum and gathers the gradient back,
// batch norm, its gradient and its batch statistics, two or three
// dispatches each where the composition makes about ten full passes over
// the activations, and sum_squares (a gradient norm's), a dispatch per
// MaxStorageBuffers-2 inputs and one more where the composition made
// three per input.
var nativeComposites = []backend.Op{backend.OpMaxPool2dBack, backend.OpBatchNorm, backend.OpBatchNormBack, backend.OpBatchNormStats, backend.OpSumSquares}

// timerText says how RunTimed times nodes on this device.
// calibrationText says how profiled runs between calibrations are timed.
var calibrationText = fmt.Sprintf("other profiled runs timed whole and shared as the last calibration measured (estimated), calibrating as often as a %g%% overhead allows", 100*timingBudget)

func (b *Backend) timerText() string {
	if b.info.InsideTS {
		return "timestamp queries between the kernels of one pass in calibration runs (measured; a fused kernel split among its ops by cost); " + calibrationText
	}
	if b.info.Timestamps {
		return "timestamp queries around each kernel in calibration runs (measured; a fused kernel split among its ops by cost); " + calibrationText
	}
	return "host clock around each kernel, each submitted and waited for alone, in calibration runs (measured, with the submit; a fused kernel split by cost); " + calibrationText
}

func (b *Backend) newBuffer(bytes uint64) (*gpu.Buffer, error) {
	g, err := b.d.NewBuffer(max(bytes, 4))
	if err != nil {
		return nil, err
	}
	b.allocated += g.Size()
	if b.liveBufs == nil {
		b.liveBufs = map[*gpu.Buffer]struct{}{}
	}
	b.liveBufs[g] = struct{}{}
	return g, nil
}

func (b *Backend) destroy(g *gpu.Buffer) {
	b.allocated -= g.Size()
	delete(b.liveBufs, g)
	b.d.DestroyBuffer(g)
}

// Alloc returns a zero-filled buffer (WebGPU zero-initializes buffers).
func (b *Backend) Alloc(n int) (backend.Buffer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("webgpu.Alloc: backend closed")
	}
	if n < 0 || uint64(n)*4 > b.info.MaxBuffer {
		return nil, fmt.Errorf("webgpu.Alloc(%d): outside 0..%d elements (maxBufferSize %d bytes)", n, b.info.MaxBuffer/4, b.info.MaxBuffer)
	}
	g, err := b.newBuffer(uint64(n) * 4)
	if err != nil {
		return nil, fmt.Errorf("webgpu.Alloc(%d): %w", n, err)
	}
	b.nextID++
	return &buffer{g: g, n: n, id: b.nextID, owner: b}, nil
}

// own checks that buf is a live buffer of this backend.
func (b *Backend) own(fn string, buf backend.Buffer) (*buffer, error) {
	wb, ok := buf.(*buffer)
	switch {
	case !ok || wb == nil:
		return nil, fmt.Errorf("webgpu.%s: buffer %T is not a webgpu buffer", fn, buf)
	case wb.owner != b:
		return nil, fmt.Errorf("webgpu.%s: buffer belongs to another backend", fn)
	case wb.freed:
		return nil, fmt.Errorf("webgpu.%s: buffer of %d elements was freed", fn, wb.n)
	case b.closed:
		return nil, fmt.Errorf("webgpu.%s: backend closed (its buffers went with it)", fn)
	}
	return wb, nil
}

// span checks that buf is a live buffer of this backend holding elements
// [off, off+n).
func (b *Backend) span(fn string, buf backend.Buffer, off, n int) (*buffer, error) {
	wb, err := b.own(fn, buf)
	if err == nil && !backend.InRange(off, n, wb.n) {
		err = fmt.Errorf("webgpu.%s: %d elements at %d outside buffer of %d", fn, n, off, wb.n)
	}
	return wb, err
}

// Free releases the buffer's device memory.
func (b *Backend) Free(buf backend.Buffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wb, err := b.own("Free", buf)
	if err != nil || b.closed {
		return
	}
	wb.freed = true
	b.destroy(wb.g)
}

// Write copies src into buf at element off.
func (b *Backend) Write(buf backend.Buffer, off int, src []float32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	wb, err := b.span("Write", buf, off, len(src))
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if err := b.d.Write(wb.g, uint64(off)*4, gpu.BytesOf(src)); err != nil {
		return fmt.Errorf("webgpu.Write(%d elements at %d): %w", len(src), off, err)
	}
	return nil
}

// Read copies len(dst) elements of buf from element off into dst.
func (b *Backend) Read(buf backend.Buffer, off int, dst []float32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	wb, err := b.span("Read", buf, off, len(dst))
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if err := b.d.Read(wb.g, uint64(off)*4, gpu.BytesOf(dst)); err != nil {
		return fmt.Errorf("webgpu.Read(%d elements at %d): %w", len(dst), off, err)
	}
	return nil
}

// ReadLater starts a Read and returns without waiting for it
// (backend.LaterReader): the copy is submitted behind the work before it,
// into a staging buffer of its own, and the wait takes the result. In the
// browser the buffer is mapped when the GPU process says so and the wait
// reports the validation errors of the runs deferred before it; natively
// the wait maps it (under the backend's lock) and returns once that copy
// is done, whatever was submitted after. Close completes the reads in
// flight natively (their waits give the values) and fails them in the
// browser. A read of more than 64 MiB reads at once (wait is nil).
func (b *Backend) ReadLater(buf backend.Buffer, off int, dst []float32) (func() error, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wb, err := b.span("ReadLater", buf, off, len(dst))
	if err != nil {
		return nil, err
	}
	if len(dst) == 0 {
		return nil, nil
	}
	lr, err := b.d.ReadLater(wb.g, uint64(off)*4, gpu.BytesOf(dst))
	if err != nil {
		return nil, fmt.Errorf("webgpu.ReadLater(%d elements at %d): %w", len(dst), off, err)
	}
	if lr == nil {
		return nil, nil
	}
	var once sync.Once
	var res error
	return func() error {
		once.Do(func() { // a second call returns the first's result
			// await holds no lock: in the browser other goroutines use the
			// device while the GPU process answers (natively it does
			// nothing, and finish maps under the lock, as Read does)
			werr := lr.Await()
			b.mu.Lock()
			defer b.mu.Unlock()
			if err := lr.Finish(werr, b.closed); err != nil {
				res = fmt.Errorf("webgpu.ReadLater(%d elements at %d): %w", len(dst), off, err)
			}
		})
		return res
	}, nil
}

// Wait returns when every run submitted so far has finished on the device
// (backend.Waiter): plain runs are not waited for (RunInfo.Pending).
func (b *Backend) Wait() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("webgpu.Wait: backend closed")
	}
	if err := b.d.WaitIdle(); err != nil {
		return fmt.Errorf("webgpu.Wait: %w", err)
	}
	return nil
}

// Memory reports an estimate (WebGPU cannot query device memory): total is
// the budget of memoryBudget, free is total minus the bytes this backend has
// allocated (buffers, program intermediates and parameters). Without a
// budget (a hardware GPU, AG_WEBGPU_MEMORY_MB unset) it returns an error
// wrapping backend.ErrMemoryUnknown.
func (b *Backend) Memory() (free, total uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total == 0 {
		return 0, 0, fmt.Errorf("webgpu: %w (WebGPU has no memory query; AG_WEBGPU_MEMORY_MB states a budget)", backend.ErrMemoryUnknown)
	}
	if b.allocated >= b.total {
		return 0, b.total, nil
	}
	return b.total - b.allocated, b.total, nil
}

// pipeline returns the cached pipeline for a kernel, compiling it once.
func (b *Backend) pipeline(k *kernel) (*gpu.Pipeline, error) {
	if p, ok := b.pipes[k.src]; ok {
		return p, nil
	}
	p, err := b.d.NewPipeline(k.name, k.src, k.readOnly)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", k.name, err)
	}
	b.pipes[k.src] = p
	return p, nil
}

// Close releases the cached pipelines and the device.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	for p := range b.liveProgs {
		p.release()
	}
	for g := range b.liveBufs {
		b.destroy(g)
	}
	b.closed = true
	for _, p := range b.pipes {
		b.d.ReleasePipeline(p)
	}
	b.pipes = nil
	b.d.Close()
	return nil
}
