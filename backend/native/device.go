//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/ag-go/ag/backend"
)

// device is one opened ggml backend (CPU or Vulkan). ggml backends are not
// safe for concurrent use, so every call into ggml holds mu.
type device struct {
	mu    sync.Mutex
	name  string
	desc  string
	isCPU bool
	be    C.ggml_backend_t
	// viewAlign: the byte alignment a view's offset must have for every
	// kernel to read it (ggml-vulkan's storage-buffer offset alignment;
	// 0 where any offset does, ggml-cpu)
	viewAlign C.size_t
	dummy     C.ggml_backend_buffer_t // placeholder memory for unbound args at Compile
	caps      backend.Caps
	closed    bool
	// getRowsBack: the device runs GGML_OP_GET_ROWS_BACK (ggml-cpu does,
	// ggml-vulkan does not); ScatterAddRows then avoids a one-hot matmul.
	getRowsBack bool
	// clampKeepsNaN: GGML_OP_CLAMP keeps NaN here (probeClamp), so a clamp
	// or ReLU is one node (ggml-vulkan; ggml-cpu runs ag_clamp instead).
	clampKeepsNaN bool
	// stepStrict: ggml_step is [x > 0], 0 for NaN (probeStep: ggml-cpu's,
	// and ggml-vulkan's with patch 0006), so [y > 0] is one node.
	stepStrict bool
	// signStep: a clamp to an empty interval (min > max) is the sign step
	// (probeSignStep: ggml-vulkan's with patch 0007), so ReLU's gradient
	// mask is one node (composite_relumask.go).
	signStep bool
	// drawsPhilox: rand_uniform is drawn on the device (probeDraw:
	// ggml-vulkan's arange with patch 0010); else a leaf the host fills.
	drawsPhilox bool
	// geluBack: gelu_back is one node (probeGeluBack: ggml-vulkan's
	// silu_back in the GELU mode of patch 0012); else its 13-node form.
	geluBack bool
	// twoPassNorm: ggml_norm takes the variance of the centred row
	// (probeNorm: ggml-vulkan's with patch 0013), so layer norm is one
	// node; else the row is centred first.
	twoPassNorm bool
	// layerNormBack: layer norm's gradient is one node (probeLayerNormBack:
	// ggml-vulkan's rms_norm_back in the layer-norm mode of patch 0013);
	// else five.
	layerNormBack bool
	// maxPoolBack: a max pool's gradient is one node (probeMaxPoolBack:
	// ggml-vulkan's pool_2d_back of patch 0014); else the device does not
	// list backend.OpMaxPool2dBack and core composes it.
	maxPoolBack bool
	// batchNorm: batch norm and its gradient are three nodes each, its
	// batch statistics one more (probeBatchNorm: ggml-vulkan's kernels of
	// patch 0015); else the device does not list them and core composes
	// them.
	batchNorm bool
	// crossEntropy: the cross-entropy loss is three nodes and its gradient
	// one (probeCrossEntropy: ggml-vulkan's kernels of patch 0016); else 27
	// and five.
	crossEntropy bool
	// colSums: a column sum (sum_to over leading axes: bias gradients) is
	// two nodes (probeColSums: ggml-vulkan's kernels of patch 0017); else
	// pools in stages and a scale.
	colSums bool
	// sumSquares: sum_squares is two nodes per three inputs
	// (probeSumSquares: ggml-vulkan's kernels of patch 0018); else three
	// or four per input (sumSquaresWaves).
	sumSquares bool
	// vkMatmul: f32 products may run on ag's matmul kernel (probeMatmul:
	// ggml-vulkan's of patch 0019; AG_GGML_MATMUL, see pickVKMatmul); else
	// ggml's mul_mat.
	vkMatmul bool
	// mmTuned: tunedMatmul's measurements and picks by product, made at
	// Compile (under mu).
	mmTuned map[mmKey]mmChoice
	// matrixCores: what ggml-vulkan said of the device's matrix cores
	// ("KHR_coopmat", "NV_coopmat2"; "none" or "" without them, or in a
	// ggml built without its cooperative-matrix shaders): f16 matmuls then
	// run on them, and are left whole (mmSplitRows).
	matrixCores string
	// software: a CPU-type Vulkan device (lavapipe), whose memory is never
	// freed (see keeps).
	software bool
	slabs    slabPool // small buffers (see slab.go)
	// flash: flashSupported's answers, asked at Compile (under mu).
	flash map[flashKey]bool
}

// coopmat reports whether ggml runs f16 matmuls on d's matrix cores.
func (d *device) coopmat() bool { return d.matrixCores != "" && d.matrixCores != "none" }

// newDevice opens a device on be; software (a CPU-type Vulkan driver) is
// known before the probes run, whose buffers keeps covers too.
func newDevice(name, desc string, be C.ggml_backend_t, isCPU, software bool) (*device, error) {
	d := &device{name: name, desc: desc, isCPU: isCPU, be: be, software: software}
	if !isCPU {
		d.viewAlign = C.ggml_backend_get_alignment(be)
	}
	d.dummy = C.ggml_backend_alloc_buffer(be, 256)
	if d.dummy == nil {
		C.ggml_backend_free(be)
		return nil, fmt.Errorf("native: %s: allocating a 256-byte placeholder buffer failed", name)
	}
	maxElems := 0
	if m := uint64(C.ggml_backend_get_max_size(be)); m/4 < math.MaxInt32 {
		// CPU reports SIZE_MAX: no limit (0). A GPU reports its largest allocation.
		maxElems = int(m / 4)
	}
	d.caps = backend.Caps{Name: name, Device: desc, MaxBufferElems: maxElems,
		Timer: fmt.Sprintf("host clock around the whole graph, split by per-kernel shares measured in %d runs every %d profiled runs (estimated)", calibrateRuns, calibrateEvery)}
	if isCPU {
		d.caps.Timer = "the clock as thread 0 ends each node of the real graph compute (measured; the wait for the other threads goes to the next node)"
	}
	d.getRowsBack = d.probeGetRowsBack()
	if !isCPU {
		d.clampKeepsNaN = d.probeClamp()
		d.signStep = d.probeSignStep()
		d.drawsPhilox = d.probeDraw()
		d.geluBack = d.probeGeluBack()
		d.twoPassNorm = d.probeNorm()
		d.layerNormBack = d.probeLayerNormBack()
		d.maxPoolBack = d.probeMaxPoolBack()
		d.batchNorm = d.probeBatchNorm()
		d.crossEntropy = d.probeCrossEntropy()
		d.colSums = d.probeColSums()
		d.sumSquares = d.probeSumSquares()
		d.vkMatmul = d.probeMatmul()
	}
	d.stepStrict = d.probeStep()
	d.caps.Composites = nativeOps() // composite_*.go; the probe below drops any a device refuses
	if !isCPU {
		d.caps.Composites = slices.DeleteFunc(d.caps.Composites, func(o backend.Op) bool {
			return o == backend.OpMaxPool2dBack && !d.maxPoolBack ||
				(o == backend.OpBatchNorm || o == backend.OpBatchNormBack || o == backend.OpBatchNormStats) && !d.batchNorm
		})
	}
	d.caps.Unsupported = d.probeUnsupported()
	return d, nil
}

func (d *device) Caps() backend.Caps { return d.caps }

// buffer is one Alloc: its own ggml context holding a 1-D f32 tensor and the
// backend buffer behind it, or for a small buffer a chunk of a shared slab.
type buffer struct {
	d   *device
	ctx *C.struct_ggml_context
	buf C.ggml_backend_buffer_t // nil once freed; the slab for a small buffer
	t   *C.struct_ggml_tensor
	n   int
	// small: the memory is chunk, a part of a slab (see slab.go).
	small bool
	chunk chunk
	// dirty: the memory still holds a former user's values while the buffer
	// reads as zeros. Read returns zeros, a whole Write or a Run that writes
	// every element simply overwrites, anything else zeroes first (clean).
	dirty bool
}

func (b *buffer) Len() int { return b.n }

// errFreed is returned when a freed buffer is used.
var errFreed = errors.New("native: buffer used after Free")

func (d *device) Alloc(n int) (backend.Buffer, error) {
	if n < 1 {
		return nil, fmt.Errorf("native: %s Alloc(%d): size must be at least 1", d.name, n)
	}
	if d.caps.MaxBufferElems > 0 && n > d.caps.MaxBufferElems {
		return nil, fmt.Errorf("native: %s Alloc(%d): larger than the device's largest buffer (%d floats)", d.name, n, d.caps.MaxBufferElems)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("native: %s Alloc(%d): device closed", d.name, n)
	}
	stats.allocs.Add(1)
	defer since(&stats.allocNs, time.Now())
	if d.useSlabs(n) {
		b, err := d.allocSmall(n)
		if err != nil {
			return nil, fmt.Errorf("native: %s Alloc(%d): %w", d.name, n, err)
		}
		b.buf = b.chunk.buf
		return b, nil
	}
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(C.ggml_tensor_overhead() + 256), no_alloc: true})
	if ctx == nil {
		return nil, fmt.Errorf("native: %s Alloc(%d): ggml_init failed", d.name, n)
	}
	t := C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_F32, C.int64_t(n))
	buf := C.ggml_backend_alloc_ctx_tensors(ctx, d.be)
	if buf == nil {
		C.ggml_free(ctx)
		return nil, fmt.Errorf("native: %s Alloc(%d): out of device memory (%d bytes)", d.name, n, 4*n)
	}
	C.ggml_backend_buffer_clear(buf, 0)
	return &buffer{d: d, ctx: ctx, buf: buf, t: t, n: n}, nil
}

// keepMemory, when set, makes Free, Program.Release and Close on a Vulkan
// device forget their ggml objects without freeing them, so the memory lives
// until the process ends. This package's tests set it on lavapipe (see
// main_test.go); a device on a CPU-type Vulkan driver keeps its memory
// anyway (device.software).
var keepMemory bool

// keeps reports whether d must not free ggml objects: keepMemory, or a
// CPU-type Vulkan device. Debian bookworm's lavapipe (Mesa 22.3.6) corrupts
// its heap now and then when Vulkan memory is freed and more work follows:
// glibc aborted with "double free or corruption (!prev)" in a free() on
// lavapipe's own thread during a graph compute, and earlier with "corrupted
// double-linked list", or the process died of SIGSEGV on that thread - in
// about 1 of 3 runs of nn's tests on ggml-vulkan, never in this package's
// tests, which keep their memory. Such a device is for testing (ggml skips
// it unless GGML_VK_VISIBLE_DEVICES selects it), and a training loop
// reuses its buffers (core's pool), so what is kept stays bounded there.
func (d *device) keeps() bool { return (keepMemory || d.software) && !d.isCPU }

// freeProbe frees a probe's buffer unless d keeps its memory. The probes
// of Open computed and freed on lavapipe before the device knew it was
// one: session 28's CI aborted with glibc's "malloc(): unsorted double
// linked list corrupted" in the ggml_init of one probe, right after the
// one before it had freed its buffer (core's tests open devices many
// times).
func (d *device) freeProbe(buf C.ggml_backend_buffer_t) {
	if !d.keeps() {
		C.ggml_backend_buffer_free(buf)
	}
}

func (d *device) Free(b backend.Buffer) {
	nb, ok := b.(*buffer)
	if !ok || nb.d != d {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if nb.buf == nil {
		return
	}
	if nb.small {
		// Only the tensor's host context goes; the chunk is reused.
		d.slabs.put(nb.n, nb.chunk)
		C.ggml_free(nb.ctx)
		nb.buf, nb.ctx, nb.t = nil, nil, nil
		return
	}
	if !d.keeps() {
		C.ggml_backend_buffer_free(nb.buf)
		C.ggml_free(nb.ctx)
	}
	nb.buf, nb.ctx, nb.t = nil, nil, nil
}

// own checks that b is a live buffer of this device.
func (d *device) own(fn string, b backend.Buffer) (*buffer, error) {
	nb, ok := b.(*buffer)
	if !ok {
		return nil, fmt.Errorf("native: %s %s: buffer of type %T is not from this backend", d.name, fn, b)
	}
	if nb.d != d {
		return nil, fmt.Errorf("native: %s %s: buffer belongs to another device (%s)", d.name, fn, nb.d.name)
	}
	if nb.buf == nil {
		return nil, fmt.Errorf("native: %s %s: %w", d.name, fn, errFreed)
	}
	return nb, nil
}

func (d *device) Write(b backend.Buffer, off int, src []float32) error {
	nb, err := d.own("Write", b)
	if err != nil {
		return err
	}
	if off < 0 || len(src) > nb.n || off > nb.n-len(src) { // overflow-proof: off+len may wrap
		return fmt.Errorf("native: %s Write(off %d, %d values): outside the buffer of %d", d.name, off, len(src), nb.n)
	}
	if len(src) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	stats.writes.Add(1)
	defer since(&stats.writeNs, time.Now())
	if off == 0 && len(src) == nb.n {
		nb.dirty = false // overwritten whole
	}
	nb.clean()
	C.ggml_backend_tensor_set(nb.t, unsafe.Pointer(&src[0]), C.size_t(4*off), C.size_t(4*len(src)))
	return nil
}

func (d *device) Read(b backend.Buffer, off int, dst []float32) error {
	nb, err := d.own("Read", b)
	if err != nil {
		return err
	}
	if off < 0 || len(dst) > nb.n || off > nb.n-len(dst) { // overflow-proof: off+len may wrap
		return fmt.Errorf("native: %s Read(off %d, %d values): outside the buffer of %d", d.name, off, len(dst), nb.n)
	}
	if len(dst) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	stats.reads.Add(1)
	defer since(&stats.readNs, time.Now())
	if nb.dirty {
		clear(dst) // it reads as zeros (see buffer.dirty)
		return nil
	}
	C.ggml_backend_tensor_get(nb.t, unsafe.Pointer(&dst[0]), C.size_t(4*off), C.size_t(4*len(dst)))
	return nil
}

// Memory is what ggml_backend_dev_memory reports: system memory for the
// CPU backend, the Vulkan heap budget (or heap size) for a GPU. On Vulkan
// it enumerates the devices again, which throws when the device is lost:
// guarded, that is an error instead of an abort.
func (d *device) Memory() (free, total uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var f, t C.size_t
	var msg [512]C.char
	if C.ag_dev_memory(C.ggml_backend_get_device(d.be), &f, &t, &msg[0], C.size_t(len(msg))) != 0 {
		return 0, 0, fmt.Errorf("native: %s Memory: ggml_backend_dev_memory threw %s", d.name, C.GoString(&msg[0]))
	}
	return uint64(f), uint64(t), nil
}

func (d *device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.keeps() {
		return nil
	}
	d.slabs.release()
	C.ggml_backend_buffer_free(d.dummy)
	C.ggml_backend_free(d.be)
	return nil
}
