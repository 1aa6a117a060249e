package core

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core/internal/goid"
	"github.com/ag-go/ag/profile"
)

// ErrCapture is wrapped by errors of a capture's recording: work inside the
// captured function that a replay could not repeat (an upload of a value
// made inside it, a download, an eager run).
var ErrCapture = errors.New("capture")

// Input is one host input of a captured call.
type Input struct {
	Data  []float32
	Shape []int
}

// In makes an Input.
func In(data []float32, shape ...int) Input { return Input{data, shape} }

// Capture records a function of tensors once per input shapes and replays
// the compiled program afterwards, the analogue of ggmlR's ag_capture: a call
// packs every input into one upload, runs the program, and reads every
// output back in one download. Nothing else crosses the bus and nothing is
// recorded or lowered again, so a replay costs the device work plus a few
// microseconds.
//
// The function must be a pure recording of ops on its inputs and on
// persistent tensors (params, optimizer state, device tables): while it
// records, an upload of a value made inside it, a download or an eager run
// is an error (ErrCapture) naming the site, because a replay would not repeat
// it. The capture records again when the input shapes change, when the device
// reopened its backend (Device.Generation), or when a persistent tensor it
// reads was released or moved, or when a parameter it reads was frozen or
// thawed (Tensor.SetRequiresGrad).
//
// Random draws inside the function (RandUniform, Uniform, Normal, Dropout)
// draw new numbers at every replay: each replay takes the next numbers of
// the device's stream, as calling the function again lazily would (see
// Device.Seed).
//
// Host state the function branches on while it records - a layer's
// training or evaluation mode - becomes part of the recording through
// Device.Guard: a Call under another mode records for that mode, and the
// capture keeps one recording per mode (up to maxRecordings), so switching
// between training and evaluation replays both without recording again.
type Capture struct {
	dev  *Device
	fn   func(in []*Tensor) []*Tensor
	slot *recSlot // the recordings, in their own object for the cleanup
	recs int
}

// recSlot holds a Capture's recordings apart from the Capture, so that a
// cleanup can read them after the Capture is collected. The most recently
// used comes first.
type recSlot struct{ recs []*recording }

// maxRecordings bounds the recordings a Capture keeps (each pins its
// program and its buffers): one per combination of guarded modes.
const maxRecordings = 4

type recording struct {
	shapes [][]int
	gen    int
	prog   *progEntry // pinned: the cache may evict it, the recording keeps it
	args   []backend.Buffer
	bound  []boundArg // persistent values the program reads, as recorded
	consts []*Tensor  // the Constants among them, kept alive by the recording
	// outs are the values the program writes (gradients, kept results),
	// as recorded: a replay writes their buffers again, so one given back
	// (ZeroGrad, Release, a read moving it to the host) means recording
	// anew, or the replay would write into memory another value may hold.
	outs    []boundArg
	kept    []*Tensor // their tensors: a collected one would free its buffer
	packed  *Tensor   // all inputs, one upload
	offsets []int
	flat    *Tensor            // all outputs, one download
	sizes   []int              // the outputs' lengths, in the flat output's order
	nodes   []profile.NodeTime // the recorded nodes, for profiles of replays
	nodeIdx []int              // their graph node indices (their times in RunTimed)
	nnodes  int                // the graph's node count
	// rngBlocks is what the recorded draws take of the random stream: each
	// replay takes as much more (see random.go).
	rngBlocks uint64
	// guards are the host conditions the function read while recording
	// (Device.Guard), with the values they had.
	guards []guard
}

type guard struct {
	cond func() bool
	was  bool
}

// Guard returns cond() and, while a Capture records on this goroutine,
// makes the recording depend on its value: a later Call under which cond()
// is different does not replay this recording but records again (or
// replays the one made under that value). A function of layers whose
// recording depends on host state calls it for that state: nn.Dropout's
// Forward guards its Training flag, so one Capture serves training and
// evaluation. cond must be cheap and must not use the device (it runs
// under the device's lock at every Call).
func (d *Device) Guard(cond func() bool) bool {
	if cond == nil {
		panic("core.Device.Guard: nil condition")
	}
	v := cond()
	d.lock()
	if d.recOwner == goid.Get() && d.recording != nil {
		d.recording.guards = append(d.recording.guards, guard{cond, v})
	}
	d.mu.Unlock()
	return v
}

// guardsHold reports whether every guard of r has its recorded value now.
func (r *recording) guardsHold() bool {
	for _, g := range r.guards {
		if g.cond() != g.was {
			return false
		}
	}
	return true
}

// gradSwitches is a guard on the gradient switches (SetRequiresGrad) of the
// parameters the pending nodes read: they decided which gradient and update
// nodes were recorded, so a replay after one of them changed would train a
// frozen parameter or leave a thawed one out. ok is false when no node reads
// a parameter. Called with d.mu held.
func gradSwitches(pending []*Tensor) (g guard, ok bool) {
	var ps []*Tensor
	var on []bool
	seen := map[*Tensor]bool{}
	for _, t := range pending {
		for _, x := range t.inputs {
			if x.trainable && !seen[x] {
				seen[x] = true
				ps, on = append(ps, x), append(on, x.requiresGrad)
			}
		}
	}
	if len(ps) == 0 {
		return guard{}, false
	}
	// Guards are checked under the device lock, which guards requiresGrad.
	return guard{cond: func() bool {
		for i, p := range ps {
			if p.requiresGrad != on[i] {
				return false
			}
		}
		return true
	}, was: true}, true
}

type boundArg struct {
	stor *storage
	buf  backend.Buffer
}

// NewCapture makes a capture of fn on dev. fn receives the inputs as tensors
// of the shapes given to Call and returns the outputs to read back.
func NewCapture(dev *Device, fn func(in []*Tensor) []*Tensor) *Capture {
	if dev == nil || fn == nil {
		panic("core.NewCapture: nil device or function")
	}
	c := &Capture{dev: dev, fn: fn, slot: &recSlot{}}
	// The pinned program of a collected capture is let go at the next sync
	// (a cleanup may not take the device lock).
	runtime.AddCleanup(c, func(s *recSlot) {
		for _, r := range s.recs {
			if r.prog != nil {
				dev.freeMu.Lock()
				dev.unpinq = append(dev.unpinq, r.prog)
				dev.freeMu.Unlock()
			}
		}
	}, c.slot)
	return c
}

// Records counts the recordings made so far.
func (c *Capture) Records() int {
	c.dev.lock()
	defer c.dev.mu.Unlock()
	return c.recs
}

// Call runs the captured function on the inputs and returns the outputs'
// values, recording first when needed (see Capture).
func (c *Capture) Call(in ...Input) ([][]float32, error) {
	l, err := c.call("Capture.Call", in, readNow)
	if err != nil {
		return nil, err
	}
	return l.Wait()
}

// CallLater runs the captured function on the inputs as Call does and asks
// for its outputs without waiting for them: Wait on the result returns
// them. In the browser the run and the read are queued and the call
// returns at once, so the next steps are queued while this one's outputs
// travel back (see Later); elsewhere it is Call. The run that records
// reads its outputs at once.
func (c *Capture) CallLater(in ...Input) (*Later, error) {
	return c.call("Capture.CallLater", in, readLater)
}

// Run runs the captured function on the inputs as Call does and does not
// read its outputs back: for steps whose outputs nobody looks at (a loss
// reported every tenth step). The run that records reads them all the
// same. A backend that can submit work without waiting for it (WebGPU,
// natively and in the browser) returns as soon as the run is submitted, so
// the next step is built and queued while the GPU runs this one; elsewhere
// Run waits for the run, as Call does, and saves only the download.
func (c *Capture) Run(in ...Input) error {
	_, err := c.call("Capture.Run", in, readNone)
	return err
}

// readHow is what a call does with the outputs of its run.
type readHow int

const (
	readNone  readHow = iota // Run: nothing (the run that records reads them all the same)
	readNow                  // Call
	readLater                // CallLater
)

// call is Call, CallLater or Run (how), named fn in errors. Its Later has
// the outputs read (or being read); nil for Run's replays.
func (c *Capture) call(fn string, in []Input, how readHow) (*Later, error) {
	start := time.Now()
	for i, x := range in {
		checkShape(fn, x.Shape)
		if backend.NumElems(x.Shape) != len(x.Data) {
			return nil, fmt.Errorf("core: %s: input %d has %d values for shape %v", fn, i, len(x.Data), x.Shape)
		}
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("core: %s: no inputs: the captured function takes its inputs as tensors made from the call's arguments; pass at least one (core.In(data, shape...))", fn)
	}
	d := c.dev
	d.lock()
	defer d.mu.Unlock()
	if err := d.syncLocked(nil, fn); err != nil { // earlier work first
		return nil, err
	}
	recs := c.slot.recs
	for i, r := range recs {
		if r.valid(d, in) {
			copy(recs[1:i+1], recs[:i]) // most recently used first
			recs[0] = r
			return r.replay(d, in, start, fn, how)
		}
	}
	// A recording made under the modes that hold now is out of date (other
	// shapes, a parameter reallocated): the new one replaces it. Those of
	// other modes stay, up to maxRecordings.
	kept := recs[:0]
	for _, r := range recs {
		if r.guardsHold() || len(kept) == maxRecordings-1 {
			r.release(d)
			continue
		}
		kept = append(kept, r)
	}
	c.slot.recs = kept
	rec, outs, err := c.record(in)
	if err != nil {
		return nil, err
	}
	c.slot.recs = append([]*recording{rec}, kept...)
	c.recs++
	return Ready(outs...), nil
}

func (r *recording) valid(d *Device, in []Input) bool {
	if r.gen != d.gen || len(in) != len(r.shapes) || !r.guardsHold() {
		return false
	}
	for i, x := range in {
		if !slices.Equal(x.Shape, r.shapes[i]) {
			return false
		}
	}
	return held(d, r.bound) && held(d, r.outs)
}

// held reports whether every value of bs is live with its recorded buffer.
func held(d *Device, bs []boundArg) bool {
	for _, b := range bs {
		if b.stor.buf != b.buf {
			return false
		}
		if _, live := d.live[b.stor]; !live {
			return false
		}
	}
	return true
}

// release drops a recording's packed buffers (its program stays cached).
func (r *recording) release(d *Device) {
	if r.prog != nil {
		d.unpin(r.prog)
		r.prog = nil
	}
	r.kept = nil // their owners hold them, if anyone does
	for _, t := range []*Tensor{r.packed, r.flat} {
		if t != nil && t.stor != nil {
			d.dropStorage(t.stor, false)
			t.stor = nil
			t.setState(stateReleased)
		}
	}
}

// record runs fn under the guard, then runs its program once as a sync and
// keeps what a replay needs. Called with d.mu held and nothing pending.
func (c *Capture) record(in []Input) (*recording, [][]float32, error) {
	d := c.dev
	if d.eager {
		return nil, nil, fmt.Errorf("core: Capture: %w: the device is in eager mode, which launches every op", ErrCapture)
	}
	if err := d.ensureOpen(); err != nil {
		return nil, nil, err
	}
	rec := &recording{gen: d.gen}
	total := 0
	for _, x := range in {
		rec.shapes = append(rec.shapes, slices.Clone(x.Shape))
		rec.offsets = append(rec.offsets, total)
		// Each input starts at a multiple of 256 bytes, as the seed's
		// segments do: the largest storage-buffer offset alignment Vulkan
		// allows, so an op that binds an input view (ggml-vulkan's fused
		// AdamW reading the hyperparameters) never gets a misaligned one.
		total += (len(x.Data) + packAlign - 1) / packAlign * packAlign
	}
	packed := make([]float32, max(total, 1))
	for i, x := range in {
		copy(packed[rec.offsets[i]:], x.Data)
	}
	rec.packed = &Tensor{dev: d, shape: []int{len(packed)}}
	rec.packed.setState(stateRealized)
	rec.packed.stor = d.newStorage(rec.packed, packed, len(packed))

	// fn runs unlocked (ops take the lock), under the guard, and holds the
	// device: other goroutines' calls wait (lock), since everything pending
	// becomes the recording.
	d.guard = "Capture recording"
	d.recOwner = goid.Get()
	d.recording = rec
	d.mu.Unlock()
	outs, err := c.callFn(rec)
	d.mu.Lock()
	d.guard = ""
	d.recOwner = 0
	d.recording = nil
	d.recDone.Broadcast()
	// abort drops what the recording made; the device stays usable.
	abort := func(lw *lowering, err error) (*recording, [][]float32, error) {
		if lw != nil {
			lw.free(d)
		}
		d.dropPending(err)
		rec.release(d)
		return nil, nil, err
	}
	if err != nil {
		return abort(nil, err)
	}
	// Everything lowered now is what a replay repeats; uploads other than
	// the packed inputs would be frozen into the recording.
	for _, p := range d.pending {
		for _, x := range p.inputs {
			if x.state() == stateRealized && x.stor.madeInCapture {
				return abort(nil, fmt.Errorf("core: Capture: %w: the function reads %v, made on the host inside it (upload site %q); pass it as an input", ErrCapture, x, "inputs"))
			}
		}
	}
	if g, ok := gradSwitches(d.pending); ok {
		rec.guards = append(rec.guards, g)
	}
	lw, err := d.lower(false)
	if err != nil {
		return abort(lw, fmt.Errorf("core: Capture: %w", err))
	}
	e, _, err := d.program(lw)
	if err != nil {
		return abort(lw, fmt.Errorf("core: Capture: %w", err))
	}
	if err := d.allocOutputs(lw); err != nil {
		return abort(lw, fmt.Errorf("core: Capture: %w", err))
	}
	e.refs++
	rec.prog, rec.args = e, lw.args
	for _, s := range lw.bound {
		rec.bound = append(rec.bound, boundArg{s, lw.args[lw.g.Nodes[s.argNode].Arg]})
	}
	// Constants made for the recording (a causal mask, index tables) have
	// no other owner: the recording keeps them, or a collection would free
	// their storage and invalidate it (see valid).
	seen := map[*Tensor]bool{}
	for _, t := range d.pending {
		for _, x := range t.inputs {
			if x.constValues() != nil && !seen[x] {
				seen[x] = true
				rec.consts = append(rec.consts, x)
			}
		}
	}
	for _, t := range lw.profiled(d) { // arg nodes do no work: left out
		rec.nodes = append(rec.nodes, t.nodeTime(nil, 0))
		rec.nodeIdx = append(rec.nodeIdx, lw.nodeOf.of(t))
	}
	rec.nnodes = len(lw.g.Nodes)
	rec.rngBlocks = lw.rngBlocks
	if _, err := e.prog.Run(lw.args); err != nil {
		return abort(lw, fmt.Errorf("core: Capture: first run: %w", err))
	}
	d.prof.launch("captured", 1)
	kept := lw.kept
	d.realize(lw, nil)
	for _, t := range kept {
		// resident: a read keeps it on the device (see keepRead), where
		// the replays write it
		t.stor.resident = true
		rec.outs = append(rec.outs, boundArg{t.stor, t.stor.buf})
	}
	rec.kept = slices.Clone(kept)
	rec.flat = outs
	res, err := rec.download(d, nil)
	return rec, res, err
}

// callFn runs the user's function and joins its outputs into one flat
// tensor, so a replay reads them back in one download.
func (c *Capture) callFn(rec *recording) (flat *Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("core: Capture: the function panicked while recording: %w", e)
			} else {
				err = fmt.Errorf("core: Capture: the function panicked while recording: %v", r)
			}
		}
	}()
	ins := make([]*Tensor, len(rec.shapes))
	for i, s := range rec.shapes {
		ins[i] = Reshape(SliceRows(rec.packed, rec.offsets[i], backend.NumElems(s)), s...)
	}
	outs := c.fn(ins)
	if len(outs) == 0 {
		return nil, fmt.Errorf("core: Capture: the function returned no outputs")
	}
	for _, o := range outs {
		rec.sizes = append(rec.sizes, o.Len())
		o = Reshape(o, o.Len())
		if flat == nil {
			flat = o
		} else {
			flat = ConcatRows(flat, o)
		}
	}
	if flat == outs[0] || flat.state() != statePending {
		flat = Scale(flat, 1) // a node of its own, so it is a program output
	}
	return flat.Keep(), nil
}

// packAlign is the alignment of each packed input, in floats (256 bytes).
const packAlign = 64

// replay uploads the packed inputs, runs the program and downloads the
// outputs. Called with d.mu held and nothing pending.
func (r *recording) replay(d *Device, in []Input, start time.Time, fn string, how readHow) (*Later, error) {
	prof := profiling()
	t0 := time.Now()
	packed := make([]float32, r.packed.stor.n)
	for i, x := range in {
		copy(packed[r.offsets[i]:], x.Data)
	}
	if err := d.be.Write(r.packed.stor.buf, 0, packed); err != nil {
		return nil, fmt.Errorf("core: %s: uploading inputs: %w", fn, err)
	}
	d.count(true, len(packed), "capture inputs")
	if r.rngBlocks > 0 {
		// The recorded draws read the stream's position from the state
		// tensor: this replay's numbers are the next ones.
		if err := d.writeRNG(); err != nil {
			return nil, fmt.Errorf("core: %s: %w", fn, err)
		}
		d.rng.base += r.rngBlocks
	}
	t1 := time.Now()
	var info backend.RunInfo
	var times *backend.NodeTimes
	var err error
	var flat []float32 // the outputs, when the run read them back itself
	rr, folds := r.prog.prog.(backend.RunReader)
	if _, ok := d.laterReader(); how == readLater && (prof || !ok) {
		how = readNow // reads are taken when asked here: Call's path
	}
	switch {
	case prof:
		info, times, err = runTimed(r.prog, r.args, r.nnodes)
	case folds && how == readNow:
		// one wait for the run and the download (see backend.RunReader)
		flat = make([]float32, r.flat.stor.n)
		info, err = rr.RunRead(r.args, r.flat.stor.buf, 0, flat)
	default:
		info, err = r.prog.prog.Run(r.args)
	}
	if err != nil {
		return nil, fmt.Errorf("core: %s: running: %w", fn, err)
	}
	d.stats.Runs++
	d.stats.CacheHits++
	if info.Ahead {
		d.stats.Ahead++
	}
	d.prof.launch("captured", info.Launches)
	t2 := time.Now()
	var res *Later
	switch how {
	case readNow:
		var out [][]float32
		if out, err = r.download(d, flat); err == nil {
			res = Ready(out...)
		}
	case readLater:
		res, err = r.downloadLater(d, fn)
	case readNone:
	default:
		panic(fmt.Sprintf("core: %s: unknown read %d", fn, how))
	}
	if prof {
		// ctx: checking that the recording still holds, before the upload
		nodes := slices.Clone(r.nodes)
		if times != nil {
			for k, i := range r.nodeIdx {
				nodes[k].Dur, nodes[k].How = times.Dur[i], timing(times.How[i])
			}
		}
		rec := profile.Run{Site: "captured", Start: start, Ctx: t0.Sub(start), Upload: t1.Sub(t0), Compute: t2.Sub(t1),
			Download: time.Since(t2), Nodes: nodes, DownloadPass: profile.PassForward, Replayed: true}
		if how == readNow {
			rec.Wait = d.readWait(r.flat.stor.n, rec.Download)
		}
		d.useDeviceTime(&rec, info)
		d.prof.run(&rec)
	}
	return res, err
}

// downloadLater asks for the outputs without waiting (see Later), on a
// backend that reads later (Device.laterReader).
func (r *recording) downloadLater(d *Device, fn string) (*Later, error) {
	flat := make([]float32, r.flat.stor.n)
	wait, err := d.readLater(r.flat.stor.buf, flat, "capture outputs")
	if err != nil {
		return nil, fmt.Errorf("core: %s: downloading outputs: %w", fn, err)
	}
	return newLater(fn, flat, r.sizes, wait), nil
}

// download reads the outputs (unless the run did: flat) and splits them.
func (r *recording) download(d *Device, flat []float32) ([][]float32, error) {
	if flat == nil {
		flat = make([]float32, r.flat.stor.n)
		if err := d.be.Read(r.flat.stor.buf, 0, flat); err != nil {
			return nil, fmt.Errorf("core: Capture.Call: downloading outputs: %w", err)
		}
	}
	d.count(false, len(flat), "capture outputs")
	return splitOutputs(flat, r.sizes), nil
}
