package core

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/cpu" // the embedded default backend
)

// Device wraps one backend instance with the values resident on it, its lazy
// graph of pending ops and its cache of compiled programs.
//
// Closing a device drains pending work and moves every live value (params,
// optimizer state, tables) to the host; the device stays usable and opens its
// backend again on the next use, uploading values as they are needed - the
// analogue of ggmlR's device switch, with nothing lost.
type Device struct {
	name string // driver name as opened ("auto" resolved)
	id   int    // 1, 2, ... in the order devices were opened: names one of two devices of a kind

	mu        sync.Mutex
	recDone   sync.Cond  // signalled when a Capture recording ends (L is &mu)
	recOwner  uintptr    // the goroutine recording a Capture (others wait); 0 when none
	recording *recording // what recOwner records (its guards)
	modes     map[uintptr]*modeStack
	lastModeG uintptr         // the goroutine of lastMode
	lastMode  *modeStack      // the stack modeOf found last, while in modes
	spareMode *modeStack      // a stack to reuse (see withMode)
	popMode   func()          // restoreMode's method value, made once (see withMode)
	be        backend.Backend // nil while closed
	caps      backend.Caps
	prof      recorder // core's one seam to the profiler
	gen       int      // backend instances so far: recordings compare it
	pending   []*Tensor
	markGen   uint64 // keepSet's and topo's current marks (see Tensor.keptGen)
	lowerGen  uint64 // the lowerings so far (see lowering.gen)
	progs     progCache
	live      map[*storage]struct{}
	pool      map[int][]backend.Buffer // freed buffers by length, for reuse
	pooled    int64
	held      int64            // bytes of the buffers allocated from the backend and not freed (see SetMemoryBudget)
	budget    uint64           // SetMemoryBudget's bound; 0: none
	lastArgs  []backend.Buffer // the last run's args: which buffer each arg had (see getBufAt)
	// spareLowering is a retired lowering whose maps and slices the next
	// one reuses (see retire); keyBuf holds the program key's bytes.
	spareLowering *lowering
	keyBuf        []byte
	shapeSlab     []int          // what is left of ownShape's chunk
	collectFn     func(*storage) // d.collect, for runtime.AddCleanup
	poolMax       int64          // poolBytes, read from the device once
	poolAdapts    bool           // the device's memory is unknown: poolFits sets poolMax
	eager         bool
	mmPrec        Precision            // SetMatMulPrecision
	store         Precision            // SetActivationStorage
	consts        map[string]*Tensor   // shape-only Constants (see constant)
	rounds        map[roundKey]*Tensor // pending roundings of pending values (see roundedTo), emptied with d.pending
	// grads are the leaves whose Grad a pending Backward replaced, with the
	// gradient they had before: a failed run puts those back.
	grads []gradUndo

	freeMu sync.Mutex
	freeq  []*storage   // values of collected tensors, freed at the next sync
	unpinq []*progEntry // programs of collected Captures, let go at the next sync

	stats Stats
	// readFloor is the fastest small read seen (see readWait); 0 before one.
	readFloor time.Duration

	guard string // set while a Capture records: sync points are errors

	rng rng // the random generator (random.go)
}

// gradUndo is a leaf's gradient before a pending Backward replaced it.
type gradUndo struct {
	leaf, prev *Tensor
}

// Stats counts what a device did; see Device.Stats.
type Stats struct {
	Runs      int // program runs
	Compiles  int // programs compiled (cache misses)
	CacheHits int // runs that reused a compiled program
	Uploads   int // host-to-device writes
	Downloads int // device-to-host reads
	UpBytes   int64
	DownBytes int64
	Evictions int // programs dropped from the cache (see SetProgramCache)
	Failures  int // runs that failed (their work was dropped)
	// Ahead counts runs that submitted commands the backend recorded
	// during the run before (backend.RunInfo.Ahead): a repeated step costs
	// no recording. Each step of a lazy or captured loop on native webgpu
	// should count one; a step that does not is binding other buffers than
	// the step before.
	Ahead int
	// Allocs counts device buffers allocated from the backend (a value's
	// when the pool had none of its length, and Zeros'), AllocBytes their
	// size. A steady training loop allocates none per step: its values
	// take the step before's buffers back.
	Allocs     int
	AllocBytes int64
}

// deviceIDs numbers opened devices.
var deviceIDs atomic.Int64

// Open opens a device by backend name: "auto" (the best available, see
// backend.Drivers), "cpu", "webgpu", "ggml-vulkan", "ggml-cpu".
//
// Only cpu is registered by core itself: a backend registers when its
// package is imported, so a program that opens the others (or wants "auto"
// to consider them) imports them for their side effect:
//
//	import _ "github.com/ag-go/ag/backend/all"
//
// Without it Open("webgpu") fails with backend.ErrNoDriver, naming the
// import. The ggml backends are real only in builds with -tags ggml and
// ggml's cgo flags: `go run github.com/ag-go/ag/cmd/ag ggml` prints them.
func Open(name string) (*Device, error) {
	be, err := backend.Open(name)
	if err != nil {
		return nil, fmt.Errorf("core.Open: %w", err)
	}
	d := &Device{
		id:   int(deviceIDs.Add(1)),
		be:   be,
		caps: be.Caps(),
		gen:  1,
		live: map[*storage]struct{}{},
		rng:  rng{key: DefaultSeed},
	}
	d.recDone.L = &d.mu
	d.popMode = d.restoreMode
	d.name = d.caps.Name
	d.progs.init(DefaultCachePrograms, d.defaultCacheBytes())
	return d, nil
}

// label names the device in messages: "cpu#2" (the second device opened).
func (d *Device) label() string { return fmt.Sprintf("%s#%d", d.name, d.id) }

// Info describes the device: its backend's capabilities.
func (d *Device) Info() backend.Caps {
	d.lock()
	defer d.mu.Unlock()
	return d.caps
}

// Name is the backend's registry name.
func (d *Device) Name() string { return d.name }

// String is e.g. "cpu (pure Go, 2 goroutines)".
func (d *Device) String() string {
	d.lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("%s (%s)", d.caps.Name, d.caps.Device)
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	d.lock()
	defer d.mu.Unlock()
	st := d.stats
	st.Evictions = d.progs.evicted
	return st
}

// Generation counts backend instances: it increases each time the device
// opens its backend again after Close. Recordings that bind device memory
// compare it to know when to record anew.
func (d *Device) Generation() int {
	d.lock()
	defer d.mu.Unlock()
	return d.gen
}

// SetEager switches eager mode: every op runs as soon as it is recorded, and
// its value is kept. For debugging and per-op profiles; slow. The mode is
// the device's, for every goroutine.
func (d *Device) SetEager(on bool) (prev bool) {
	d.lock()
	defer d.mu.Unlock()
	prev, d.eager = d.eager, on
	return prev
}

// Precision is the arithmetic of a device's matrix products (see
// Device.SetMatMulPrecision).
type Precision int

// The matmul precisions.
const (
	// PrecisionF32 multiplies f32 operands and sums in f32: the default.
	PrecisionF32 Precision = iota
	// PrecisionF16 rounds both operands to f16 (RoundF16) and sums the
	// products in f32, as autocast's f16 matmuls and ggml's f16 matmul
	// with GGML_PREC_F32 do: the same numbers on every backend. Attention
	// (fused, without dropout) takes f16 q, k and v too, and a backend may
	// round its weights to f16 before the product with v, as autocast's
	// f16 attention does (ggml-vulkan's tensor-core kernels; see
	// backend.OpAttention): a difference of about 2^-10 of the output's
	// scale between backends, where the products alone agree to f32's.
	PrecisionF16
	// PrecisionBF16 rounds both operands to bfloat16 and sums in f32.
	PrecisionBF16
)

func (p Precision) String() string {
	switch p {
	case PrecisionF32:
		return "f32"
	case PrecisionF16:
		return "f16"
	case PrecisionBF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// SetMatMulPrecision sets the precision of the matrix products recorded on
// d from now on - forward and backward, as autocast does - and returns the
// previous one (like ggmlR's ag_matmul_precision). Parameters, gradients and
// optimizer state stay f32: the rounded operands are copies, and the
// rounding's gradient passes straight through, so the f32 weights are the
// master weights of mixed-precision training. Small gradients underflow in
// f16 (below 6e-8): scale the loss (nn.GradScaler). A recorded Capture
// keeps the precision it was recorded with.
//
// A device that cannot round to p (bf16 on ggml-vulkan: round_bf16 is in
// its Caps.Unsupported) returns an error wrapping ErrUnsupported and keeps
// its setting: accepted, every later run would fail. An unknown precision
// panics.
func (d *Device) SetMatMulPrecision(p Precision) (prev Precision, err error) {
	op := roundOp(p)
	d.lock()
	defer d.mu.Unlock()
	if op != backend.OpInvalid && !d.caps.Supports(op) {
		return d.mmPrec, unsupportedf("core.Device.SetMatMulPrecision(%v): %s cannot round matmul operands to %v (%v is in its Caps.Unsupported)", p, d.caps.Name, p, op)
	}
	prev, d.mmPrec = d.mmPrec, p
	return prev, nil
}

// matMulRound is the rounding a product's operands take now (roundOp of
// the device's matmul precision): OpInvalid at f32.
func (d *Device) matMulRound() backend.Op {
	d.lock()
	p := d.mmPrec
	d.mu.Unlock()
	return roundOp(p)
}

// roundOp is the op that rounds a matmul operand to p (OpInvalid for f32).
func roundOp(p Precision) backend.Op {
	switch p {
	case PrecisionF32:
		return backend.OpInvalid
	case PrecisionF16:
		return backend.OpRoundF16
	case PrecisionBF16:
		return backend.OpRoundBF16
	}
	panic(fmt.Sprintf("core.Device.SetMatMulPrecision: unknown precision %d", int(p)))
}

// Memory reports the free and total memory the backend reports, in bytes.
func (d *Device) Memory() (free, total uint64, err error) {
	d.lock()
	defer d.mu.Unlock()
	if err := d.ensureOpen(); err != nil {
		return 0, 0, err
	}
	return d.be.Memory()
}

// ensureOpen opens the backend again after Close.
func (d *Device) ensureOpen() error {
	if d.be != nil {
		return nil
	}
	be, err := backend.Open(d.name)
	if err != nil {
		return fmt.Errorf("core: reopening device %q: %w", d.name, err)
	}
	d.be, d.caps = be, be.Caps()
	d.gen++
	return nil
}

// Close drains pending work, moves every live value to the host in 16 MB
// parts and releases the backend. If a download fails, Close returns the
// error and frees nothing. The device opens its backend again on next use.
func (d *Device) Close() error {
	d.lock()
	defer d.mu.Unlock()
	if d.be == nil {
		return nil
	}
	if err := d.syncLocked(nil, "Close"); err != nil {
		return fmt.Errorf("core: Device.Close: pending work failed, nothing was freed: %w", err)
	}
	// Download everything before freeing anything, so a failure loses
	// nothing; a host backend's buffers are taken as they are, after the
	// downloads (nothing can fail then).
	taker, _ := d.be.(backend.HostTaker)
	hosts := make(map[*storage][]float32, len(d.live))
	for s := range d.live {
		if s.buf == nil || taker != nil {
			continue
		}
		h := make([]float32, s.n)
		for off := 0; off < s.n; off += rescueChunk {
			end := min(off+rescueChunk, s.n)
			if err := d.be.Read(s.buf, off, h[off:end]); err != nil {
				return fmt.Errorf("core: Device.Close: moving a value of %d floats to the host failed at element %d, so the device was not released: %w", s.n, off, err)
			}
		}
		d.count(false, s.n, "Close rescue")
		hosts[s] = h
	}
	for s, h := range hosts {
		d.freeBuf(s.buf)
		s.buf, s.host = nil, h
	}
	if taker != nil {
		for s := range d.live {
			if s.buf == nil {
				continue
			}
			h, ok := taker.TakeHost(s.buf, s.n)
			if !ok { // not the backend's own buffer: copied, as elsewhere
				h = make([]float32, s.n)
				if err := d.be.Read(s.buf, 0, h); err != nil {
					return fmt.Errorf("core: Device.Close: moving a value of %d floats to the host failed: %w", s.n, err)
				}
				d.be.Free(s.buf)
			}
			d.count(false, s.n, "Close rescue")
			s.buf, s.host = nil, h
		}
	}
	d.drainFrees()
	d.flushPool()
	d.lastArgs, d.spareLowering = nil, nil
	d.progs.clear()
	err := d.be.Close()
	d.be = nil
	return err
}

// rescueChunk bounds the host temporary per device read on Close (16 MB).
const rescueChunk = 4 << 20

// storage is a realized value: device memory, or host memory while the
// device is closed (or before first use). It never points back to a Tensor,
// so a tensor's cleanup can free it.
type storage struct {
	n    int
	buf  backend.Buffer
	host []float32
	// madeInCapture marks host values made while a Capture records: a replay
	// would not upload them again, so the recording refuses them.
	madeInCapture bool
	// resident keeps the value on the device once uploaded: it was lent
	// to a run once already (see hostSmall), or a run updates it in place.
	resident bool
	// owned: registered (see own).
	owned bool
	// argNode is the value's arg node in the lowering of generation
	// argGen (see lowering.argOf); int32 fills the word of the flags.
	argNode int32
	argGen  uint64
}

// hostSmall is the size, in floats (16 KiB), up to which a value made for
// one step lives on the host between its uses: a small value uploaded from
// the host for the first time (a batch's indices, an optimizer's
// hyperparameters) gives its device buffer back to the pool once its run
// is done, and a small result read whole (the loss) keeps the values read
// and gives its buffer back too. Otherwise such values hold their buffers
// until the garbage collector finds them, so every step ran on different
// buffers, and a backend that records a repeated run ahead (webgpu) could
// never find a lazy step repeated. Given back at once, the next step's
// values take the same buffers from the pool. A value used again is
// uploaded once more (at most 16 KiB) and then stays on the device.
const hostSmall = 4096

// lendable reports whether t, about to be uploaded, is a small value made
// for one step: host data seen for the first time, not a parameter or
// state, not a Constant (those are used every step). Called with d.mu held.
func lendable(t *Tensor) bool {
	s := t.stor
	return s.buf == nil && s.host != nil && !s.resident && s.n <= hostSmall && !t.param && t.constValues() == nil
}

// lent is a value uploaded for one run only (see hostSmall), with its
// tensor and host data.
type lent struct {
	t    *Tensor
	s    *storage
	host []float32
}

// giveBack moves the values lent to a finished run back to the host; the
// next run's values of the same args take their buffers back (getBufAt).
// Those the run wrote in place stay on the device, registered now (see
// own). Called with d.mu held.
func (d *Device) giveBack(ls []lent) {
	for _, l := range ls {
		if l.s.buf == nil { // freed
			continue
		}
		if l.s.resident { // written in place by the run
			d.own(l.t, l.s)
			continue
		}
		d.putBuf(l.s.buf)
		l.s.buf, l.s.host, l.s.resident = nil, l.host, true
	}
}

// keepRead moves a small run result read whole to the host: v holds its
// values (see hostSmall). Leaves stay: their data is the user's, and a
// Constant is used at every step. Called with d.mu held.
func (d *Device) keepRead(t *Tensor, v []float32) {
	s := t.stor
	if s == nil || s.buf == nil || s.resident || t.op == backend.OpInvalid || s.n > hostSmall || len(v) != s.n {
		return
	}
	d.putBuf(s.buf)
	s.buf, s.host, s.resident = nil, slices.Clone(v), true
}

// newStorage makes a value and registers it (see own): a cleanup frees it
// when owner is collected.
func (d *Device) newStorage(owner *Tensor, host []float32, n int) *storage {
	s := newStorageOf(d, host, n)
	d.own(owner, s)
	return s
}

// newStorageOf makes a value that is not registered yet: host data, or a
// run's output about to be read (see realize). It must be before a call
// that gives it a device buffer returns, unless the call takes the buffer
// back (own). Called with d.mu held.
func newStorageOf(d *Device, host []float32, n int) *storage {
	return &storage{n: n, host: host, madeInCapture: d.guard != "" && host != nil}
}

// own registers s, owner's value: the device counts it live (Close
// rescues it, a recording checks it) and a cleanup frees it when owner is
// collected. A value is registered once it holds a device buffer past the
// call that gave it one; host data and the small values lent to one run
// (see hostSmall) hold none after it, and a lazy step makes three such
// values a step (the batch, the hyperparameters, the loss read), whose
// cleanups, never needed, were a third of its cleanups' cost
// (BenchmarkStepHost). Called with d.mu held.
func (d *Device) own(owner *Tensor, s *storage) {
	if s.owned {
		return
	}
	s.owned = true
	d.live[s] = struct{}{}
	if d.collectFn == nil {
		d.collectFn = d.collect // one method value, not a closure per value
	}
	runtime.AddCleanup(owner, d.collectFn, s)
}

// ownHeld registers t's value if it holds a device buffer (see own).
// Called with d.mu held.
func (d *Device) ownHeld(t *Tensor) {
	if t.stor != nil && t.stor.buf != nil {
		d.own(t, t.stor)
	}
}

// collect runs on the cleanup goroutine when a tensor is garbage collected.
// It may not take d.mu (a sync may hold it), so the storage is queued and
// freed at the next sync. A pending node holds its inputs, so a value is
// never collected while queued work still reads it.
func (d *Device) collect(s *storage) {
	d.freeMu.Lock()
	d.freeq = append(d.freeq, s)
	d.freeMu.Unlock()
}

// drainFrees frees the storage of collected tensors. Called with d.mu held.
func (d *Device) drainFrees() {
	d.freeMu.Lock()
	q, u := d.freeq, d.unpinq
	d.freeq, d.unpinq = nil, nil
	d.freeMu.Unlock()
	for _, s := range q {
		d.dropStorage(s, true)
	}
	for _, e := range u {
		d.unpin(e)
	}
}

// unpin lets go of a recording's hold on a program (a program of an earlier
// backend instance was released when that closed). Called with d.mu held.
func (d *Device) unpin(e *progEntry) {
	if e.prog == nil {
		return // released when its backend closed
	}
	e.unref()
}

// dropStorage frees s now. With reuse the buffer is kept for later run
// outputs of its size (values that come and go every step); without, it goes
// back to the device at once, so Memory reports it free. Called with d.mu held.
func (d *Device) dropStorage(s *storage, reuse bool) {
	if s.buf != nil && d.be != nil {
		if reuse {
			d.putBuf(s.buf)
		} else {
			d.freeBuf(s.buf)
		}
	}
	s.buf, s.host = nil, nil
	delete(d.live, s)
}

// minPoolBytes and poolShare bound the device memory kept for reuse: the
// larger of 256 MiB and 1/poolShare of the device's memory. A training step
// keeps the same set of values (gradients, the loss) every step; reusing
// their buffers spares an allocation per value per step, which on a GPU
// costs more than the arithmetic of a small layer. The bound must hold a
// large model's gradients (an 8x4096 MLP's are 512 MiB): with 256 MiB
// fixed, half of them were allocated anew at every lazy step. Memory kept
// here is given back when an allocation would not fit without it.
const (
	minPoolBytes = 256 << 20
	poolShare    = 8
)

// poolBytes is the pool's bound on this device. Called with d.mu held.
func (d *Device) poolBytes() int64 {
	if d.poolMax == 0 {
		d.poolMax = minPoolBytes
		if _, total, err := d.be.Memory(); err == nil {
			d.poolMax = max(d.poolMax, int64(total/poolShare))
		} else {
			d.poolAdapts = true
		}
	}
	return d.poolMax
}

// poolFits grows the pool's bound, on a device whose memory is unknown
// (WebGPU on a hardware GPU), to twice the outputs of the largest run so
// far: a lazy step's values then come back from the pool at the next step
// (an 8x4096 MLP's gradients, 512 MiB, were otherwise half allocated anew
// at every step). Allocations that fail still flush the pool first.
// Called with d.mu held.
func (d *Device) poolFits(runBytes uint64) {
	d.poolBytes()
	if d.poolAdapts {
		d.poolMax = max(d.poolMax, 2*int64(runBytes))
	}
}

// getBuf returns a buffer of n floats with undefined contents (run outputs
// and uploads overwrite all of it). When the device has no room for a new
// one, the pool's buffers go back first.
func (d *Device) getBuf(n int) (backend.Buffer, error) {
	if l := d.pool[n]; len(l) > 0 {
		b := l[len(l)-1]
		d.pool[n] = l[:len(l)-1]
		d.pooled -= 4 * int64(n)
		return b, nil
	}
	if err := d.fitBudget(4*uint64(n), 0, nil); err != nil {
		return nil, err
	}
	b, err := d.be.Alloc(n)
	if err != nil && d.pooled > 0 {
		d.flushPool()
		b, err = d.be.Alloc(n)
	}
	if err == nil {
		d.countAlloc(n)
	}
	return b, err
}

// countAlloc counts a buffer of n floats allocated from the backend.
// Called with d.mu held.
func (d *Device) countAlloc(n int) {
	d.stats.Allocs++
	d.stats.AllocBytes += 4 * int64(n)
	d.held += 4 * int64(n)
}

// freeBuf gives b back to the backend. Called with d.mu held.
func (d *Device) freeBuf(b backend.Buffer) {
	d.held -= 4 * int64(b.Len())
	d.be.Free(b)
}

// getBufAt is getBuf for arg number arg of a run: it takes the buffer
// that arg had in the last run when that one is in the pool. A lazy step
// then binds the buffers of the step before even where its values share
// sizes with others coming and going (a batch of 1024 indices and the
// gradients of 1024-wide biases), which a backend recording the repeated
// run ahead needs. Called with d.mu held.
func (d *Device) getBufAt(n, arg int) (backend.Buffer, error) {
	if arg >= 0 && arg < len(d.lastArgs) {
		if want := d.lastArgs[arg]; want != nil && want.Len() == n {
			l := d.pool[n]
			if i := slices.Index(l, want); i >= 0 {
				d.pool[n] = slices.Delete(l, i, i+1)
				d.pooled -= 4 * int64(n)
				return want, nil
			}
		}
	}
	return d.getBuf(n)
}

func (d *Device) putBuf(b backend.Buffer) {
	n := b.Len()
	if d.pooled+4*int64(n) > d.poolBytes() {
		d.freeBuf(b)
		return
	}
	if d.pool == nil {
		d.pool = map[int][]backend.Buffer{}
	}
	d.pool[n] = append(d.pool[n], b)
	d.pooled += 4 * int64(n)
}

// flushPool frees the buffers kept for reuse.
func (d *Device) flushPool() {
	for _, l := range d.pool {
		for _, b := range l {
			d.freeBuf(b)
		}
	}
	d.pool, d.pooled = nil, 0
}

// onDevice makes sure s has a device buffer, uploading the host value.
func (d *Device) onDevice(s *storage) error { return d.onDeviceAt(s, -1) }

// onDeviceAt is onDevice for a value bound as arg number arg of a run
// (see getBufAt).
func (d *Device) onDeviceAt(s *storage, arg int) error {
	if s.buf != nil {
		return nil
	}
	b, err := d.getBufAt(s.n, arg)
	if err != nil {
		return fmt.Errorf("allocating %d floats on %s: %w", s.n, d.caps.Name, err)
	}
	if s.host != nil {
		// in 16 MB parts, like the rescue, so no transfer needs a huge staging area
		for off := 0; off < s.n; off += rescueChunk {
			end := min(off+rescueChunk, s.n)
			if err := d.be.Write(b, off, s.host[off:end]); err != nil {
				d.putBuf(b)
				return fmt.Errorf("uploading %d floats to %s: %w", s.n, d.caps.Name, err)
			}
			d.count(true, end-off, "inputs")
		}
	}
	s.buf, s.host = b, nil
	return nil
}

func (d *Device) count(up bool, n int, site string) {
	d.prof.xfer(up, site, 4*n)
	if up {
		d.stats.Uploads++
		d.stats.UpBytes += 4 * int64(n)
	} else {
		d.stats.Downloads++
		d.stats.DownBytes += 4 * int64(n)
	}
}

// syncRead runs pending work and reads t, as one profiled run.
func (d *Device) syncRead(t *Tensor, fn string) ([]float32, error) {
	d.lock()
	defer d.mu.Unlock()
	// The run leaves t unregistered (see realize): registered here, after
	// the read, if it still holds its buffer (keepRead moves a small one
	// to the host).
	defer d.ownHeld(t)
	rd := &readAfter{t: t}
	rec, err := d.run([]*Tensor{t}, fn, rd)
	if err != nil {
		d.prof.run(rec)
		return nil, err
	}
	if rd.done {
		d.count(false, len(rd.dst), fn)
		d.keepRead(t, rd.dst)
		return rd.dst, nil
	}
	t0 := time.Now()
	v, err := d.read(t, fn)
	if rec != nil {
		rec.Download = time.Since(t0)
		rec.Wait = d.readWait(len(v), rec.Download)
		rec.DownloadPass = t.pass
		d.prof.run(rec)
	}
	if err == nil {
		d.keepRead(t, v)
	}
	return v, err
}

// smallRead is the largest read, in floats, whose time is all wait: at 4
// KiB the bytes cost nothing beside a round trip on any device.
const smallRead = 1024

// readWait is the part of a read of n floats that took dur that was
// waiting for the device rather than bytes moving (profile.Run.Wait): all
// of a small read (a loss), and of a larger one the fastest small read
// seen on this device, the round trip every read pays whatever its size
// (none before a small read was seen). In a browser that round trip is 1-3
// ms however few bytes come back, and charged to download it made a lazy
// step's forward 78% "transfer" for 12 bytes a step. Called with d.mu held.
func (d *Device) readWait(n int, dur time.Duration) time.Duration {
	if n <= smallRead {
		if d.readFloor == 0 || dur < d.readFloor {
			d.readFloor = dur
		}
		return dur
	}
	return min(dur, d.readFloor)
}

// read returns a realized tensor's values. Called with d.mu held.
func (d *Device) read(t *Tensor, fn string) ([]float32, error) {
	if err := t.readable(fn); err != nil {
		return nil, err
	}
	s := t.stor
	out := make([]float32, s.n)
	if s.buf == nil {
		copy(out, s.host)
		return out, nil
	}
	if err := d.be.Read(s.buf, 0, out); err != nil {
		return nil, fmt.Errorf("core: %s of %v: %w", fn, t, err)
	}
	d.count(false, s.n, fn)
	return out, nil
}

func (t *Tensor) readable(fn string) error {
	switch t.state() {
	case stateSpent:
		return fmt.Errorf("core: %s of %v: %w by the run that computed it (call Keep() on it before that run, or pass it to Device.Sync)", fn, t, ErrNotKept)
	case stateReleased:
		return fmt.Errorf("core: %s of %v: %w", fn, t, ErrReleased)
	case stateFailed:
		return fmt.Errorf("core: %s of %v: %w: %w", fn, t, ErrRunFailed, t.failure())
	case statePending:
		return fmt.Errorf("core: internal: %s of %v: still pending after a sync", fn, t)
	}
	return nil
}

// ReadAt returns n values of a realized tensor starting at element off,
// without downloading the rest (a sync point).
func (t *Tensor) ReadAt(off, n int) ([]float32, error) {
	if !backend.InRange(off, n, t.Len()) {
		return nil, fmt.Errorf("core: ReadAt(%d, %d) outside a tensor of %d elements", off, n, t.Len())
	}
	d := t.dev
	d.lock()
	defer d.mu.Unlock()
	if err := d.syncLocked([]*Tensor{t}, "ReadAt"); err != nil {
		return nil, err
	}
	if err := t.readable("ReadAt"); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if t.stor.buf == nil {
		copy(out, t.stor.host[off:off+n])
		return out, nil
	}
	if err := d.be.Read(t.stor.buf, off, out); err != nil {
		return nil, fmt.Errorf("core: ReadAt(%d, %d) of %v: %w", off, n, t, err)
	}
	d.count(false, n, "ReadAt")
	return out, nil
}

// WriteAt overwrites len(data) values of a realized tensor starting at
// element off. Pending work that reads t runs first and sees the old value;
// work recorded afterwards sees the new one.
func (t *Tensor) WriteAt(off int, data []float32) error {
	if !backend.InRange(off, len(data), t.Len()) {
		return fmt.Errorf("core: WriteAt(%d, %d values) outside a tensor of %d elements", off, len(data), t.Len())
	}
	d := t.dev
	d.lock()
	defer d.mu.Unlock()
	if d.guard != "" {
		return fmt.Errorf("core: WriteAt of %v: %w: an upload (site \"WriteAt\") during %s would not be repeated by a replay", t, ErrCapture, d.guard)
	}
	if t.state() != stateRealized || t.stor == nil {
		return fmt.Errorf("core: WriteAt on %v: only realized values (data, params, Zeros) can be written", t)
	}
	if d.readers(t) {
		if err := d.syncLocked(nil, "WriteAt"); err != nil {
			return err
		}
	}
	if len(data) == 0 {
		return nil
	}
	if err := d.ensureOpen(); err != nil {
		return err
	}
	if err := d.onDevice(t.stor); err != nil {
		return fmt.Errorf("core: WriteAt: %w", err)
	}
	d.own(t, t.stor)
	if err := d.be.Write(t.stor.buf, off, data); err != nil {
		return fmt.Errorf("core: WriteAt(%d, %d values) of %v: %w", off, len(data), t, err)
	}
	d.count(true, len(data), "WriteAt")
	return nil
}

// readers reports whether a pending node reads t. Called with d.mu held.
func (d *Device) readers(t *Tensor) bool {
	for _, p := range d.pending {
		for _, in := range p.inputs {
			if in == t {
				return true
			}
		}
	}
	return false
}
