package core

import (
	"fmt"
	"slices"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
	"github.com/ag-go/ag/core/internal/goid"
	"github.com/ag-go/ag/profile"
)

// Tensor makes a tensor holding a copy of data with the given shape (no
// gradient). The data crosses to the device when a run first reads it.
// It panics when len(data) does not match the shape.
func (d *Device) Tensor(data []float32, shape ...int) *Tensor {
	return d.leaf("Tensor", data, shape, false)
}

// Constant makes a tensor like Tensor whose values are part of the
// program rather than data: masks, index tables, position ids - values that
// depend only on shapes and options. A Capture may bake a Constant made
// inside its function into the recording (where a Tensor made there is an
// error, since a replay would silently reuse stale data), so build one only
// from values that are the same on every call.
func (d *Device) Constant(data []float32, shape ...int) *Tensor {
	t := d.leaf("Constant", data, shape, false)
	t.stor.madeInCapture = false
	t.more().constData = t.stor.host // immutable: Gather's gradient may read it
	return t
}

// constant returns the Constant named key on d, making it with make the
// first time: the masks and tables ops build from shapes alone (a causal
// triangle, a countdown, Cumsum's triangle) are built and uploaded once
// per device and shape instead of at every call. The cache lives as long
// as the device; each key is one shape.
func (d *Device) constant(key string, make func() []float32, shape ...int) *Tensor {
	d.lock()
	t := d.consts[key]
	d.mu.Unlock()
	if t != nil {
		return t
	}
	t = d.Constant(make(), shape...)
	d.lock()
	if d.consts == nil {
		d.consts = map[string]*Tensor{}
	}
	if old := d.consts[key]; old != nil { // another goroutine made it first
		t = old
	} else {
		d.consts[key] = t
	}
	d.mu.Unlock()
	return t
}

// cached is the constant made under key, or nil.
func (d *Device) cached(key string) *Tensor {
	d.lock()
	defer d.mu.Unlock()
	return d.consts[key]
}

// Param makes a persistent, trainable tensor (requires grad) holding a copy of
// init. It panics when len(init) does not match the shape.
func (d *Device) Param(init []float32, shape ...int) *Tensor {
	return d.leaf("Param", init, shape, true)
}

// Zeros makes a persistent zero-filled tensor without gradient, allocated on
// the device at once (optimizer state, device tables). Its memory lives
// outside any run's plan; WriteAt and ReadAt update and read it in place.
func (d *Device) Zeros(shape ...int) (*Tensor, error) {
	checkShape("Zeros", shape)
	d.lock()
	defer d.mu.Unlock()
	if err := d.ensureOpen(); err != nil {
		return nil, err
	}
	n := backend.NumElems(shape)
	if err := d.fitBudget(4*uint64(n), 0, nil); err != nil {
		return nil, fmt.Errorf("core: Zeros%v: %w", shape, err)
	}
	b, err := d.be.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("core: Zeros%v: allocating %d floats on %s: %w", shape, n, d.caps.Name, err)
	}
	d.countAlloc(n)
	t := &Tensor{dev: d, shape: slices.Clone(shape), param: true}
	t.setState(stateRealized)
	t.stor = d.newStorage(t, nil, n)
	t.stor.buf = b
	return t, nil
}

func (d *Device) leaf(fn string, data []float32, shape []int, grad bool) *Tensor {
	checkShape(fn, shape)
	if n := backend.NumElems(shape); n != len(data) {
		panic(fmt.Sprintf("core.%s: %d values for shape %v (%d elements)", fn, len(data), shape, n))
	}
	t := &Tensor{dev: d, shape: slices.Clone(shape), requiresGrad: grad, param: grad, trainable: grad}
	t.setState(stateRealized)
	host := slices.Clone(data)
	d.lock() // newStorageOf reads the guard
	// registered when it first keeps a device buffer (see own)
	t.stor = newStorageOf(d, host, len(data))
	d.mu.Unlock()
	return t
}

// checkShape panics, naming fn and the shape, on a shape no tensor can have
// (see backend.CheckShape).
func checkShape(fn string, shape []int) {
	if err := backend.CheckShape(shape); err != nil {
		panic(fmt.Sprintf("core.%s: %v", fn, err))
	}
}

// needTensors panics, naming fn and the position, on a nil input (a bare
// nil dereference deep inside an op would say nothing of where it came
// from) or on inputs of different devices.
func needTensors(fn string, ts ...*Tensor) {
	for i, t := range ts {
		if t == nil {
			panic(fmt.Sprintf("core.%s: input %d is nil", fn, i))
		}
	}
	// Composites call this with all their inputs first, so a mix of devices
	// is named by the function the user called, not by an op inside it.
	for i, t := range ts {
		if t.dev != ts[0].dev {
			panic(fmt.Sprintf("core.%s: input %d is on device %s, the others on %s: move it with Data and Tensor, or use one device", fn, i, t.dev.label(), ts[0].dev.label()))
		}
	}
}

// record appends a pending node computing op over ins. fn names the public
// function for error messages.
func (d *Device) record(fn string, op backend.Op, shape []int, attr attrs, ins ...*Tensor) *Tensor {
	return d.recordGrad(fn, op, shape, attr, true, ins...)
}

// recordGrad is record for ops whose result may carry a gradient (grad) or
// never does (OpMax, OneHot: no gradient flows through them).
//
// A composite recorded without gradient is a composite's gradient op (the
// *Back composites, which have none of their own): while Grad records a
// gradient that is differentiated again (GradOptions.CreateGraph), it is
// recorded as its decomposition in ops that have gradients instead, so
// that a second derivative flows through it.
func (d *Device) recordGrad(fn string, op backend.Op, shape []int, attr attrs, grad bool, ins ...*Tensor) *Tensor {
	if !grad && op.IsComposite() && d.creatingGraph() {
		return d.decomposed(fn, op, shape, attr, ins...)
	}
	return d.push(&Tensor{op: op, shape: shape, attr: attr}, nil, fn, grad, ins...)
}

// recordShaped is record for a shape computed in scratch memory (an
// array on the caller's stack): the node gets a copy (see ownShape), so
// the ops that compute shapes allocate none of their own.
func (d *Device) recordShaped(fn string, op backend.Op, shape []int, attr attrs, ins ...*Tensor) *Tensor {
	return d.push(&Tensor{op: op, attr: attr}, shape, fn, true, ins...)
}

// shapeChunk is how many ints ownShape cuts shapes from at a time.
const shapeChunk = 128

// ownShape returns an unchanging copy of s: an input's shape when equal
// (shapes never change, so tensors share them), or a copy cut from a chunk
// the device fills: a lazy step makes shapes for a few dozen nodes each
// step, and their allocations were a tenth of its own. A chunk holds ints
// only, so a long-lived shape keeps no tensor alive, only its chunk.
// Called with d.mu held.
func (d *Device) ownShape(s []int, ins []*Tensor) []int {
	for _, in := range ins {
		if slices.Equal(in.shape, s) {
			return in.shape
		}
	}
	if len(s) > len(d.shapeSlab) {
		d.shapeSlab = make([]int, max(shapeChunk, len(s)))
	}
	c := d.shapeSlab[:len(s):len(s)]
	d.shapeSlab = d.shapeSlab[len(s):]
	copy(c, s)
	return c
}

// push appends t, a node of op, shape and attr over ins (and any other
// recipe fields set), to the pending graph: the body of recordGrad. A
// non-nil shape is scratch memory holding t's shape (see recordShaped).
func (d *Device) push(t *Tensor, shape []int, fn string, grad bool, ins ...*Tensor) *Tensor {
	needTensors(fn, ins...)
	var t0 time.Time
	if profiling() {
		t0 = time.Now()
	}
	for i, in := range ins {
		if in.dev != d {
			panic(fmt.Sprintf("core.%s: input %d is on device %s, the others on %s: move it with Data and Tensor, or use one device", fn, i, in.dev.label(), d.label()))
		}
	}
	t.dev, t.g, t.user = d, goid.Get(), fn
	if len(ins) <= len(t.in) {
		t.inputs = append(t.in[:0:len(t.in)], ins...)
	} else {
		t.inputs = slices.Clone(ins)
	}
	d.lock()
	defer d.mu.Unlock()
	if shape != nil {
		t.shape = d.ownShape(shape, t.inputs)
	}
	needGrad := false
	for i, in := range ins {
		in.check(fn, i)
		needGrad = needGrad || in.requiresGrad
	}
	m := d.modeOf(t.g)
	// (a t that comes requiring grad is WithGrad's view: it does, though
	// its input does not)
	t.requiresGrad = (t.requiresGrad || grad && needGrad) && (m == nil || m.noGrad == 0)
	t.pass = profile.PassForward
	if m != nil {
		t.pass, t.scope = m.pass, m.scope
		if m.user != "" {
			t.user = m.user
		}
	}
	t.seq = len(d.pending)
	d.pending = append(d.pending, t)
	// A node outside composites is a call of its own; inside one (or a
	// gradient) the first after the call opened is.
	t.callHead = m == nil || m.user == "" || m.callOpen
	t.callTail = m == nil || m.user == ""
	if m != nil {
		m.callOpen = false
		if m.user != "" {
			m.last = t
		}
	}
	if !t0.IsZero() {
		if m != nil && m.timed {
			t0 = m.mark
		}
		d.prof.built(t, time.Since(t0))
	}
	if d.eager {
		t.keep = true
		// A failure drops t with the rest of the run; reading t returns it.
		_ = d.syncLocked(nil, "eager")
	}
	if m != nil && m.timed {
		m.mark = time.Now()
	}
	return t
}

// Sync runs all pending work on the device as one program, keeps the
// values of ts (and of tensors marked with Keep) and returns when the
// device has finished it and everything before: the barrier to time work
// by, as torch.cuda.synchronize. (A backend may return from a run before
// its work is done, backend.Waiter: WebGPU does. Reads wait for what they
// read; steps that read nothing - nn.StepCapture.StepUnread, a lazy step
// ended by Release - do not wait, so the host builds the next step while
// the device runs this one.)
func (d *Device) Sync(ts ...*Tensor) error {
	needTensors("Device.Sync", ts...)
	d.lock()
	defer d.mu.Unlock()
	if err := d.syncLocked(ts, "Sync"); err != nil {
		return err
	}
	if w, ok := d.be.(backend.Waiter); ok {
		if err := w.Wait(); err != nil {
			return fmt.Errorf("core: Device.Sync: %w", err)
		}
	}
	return nil
}

// syncLocked runs the pending work (see run) and hands its profile to the
// profiler. Called with d.mu held.
func (d *Device) syncLocked(want []*Tensor, site string) error {
	rec, err := d.run(want, site, nil)
	d.prof.run(rec)
	return err
}

// run lowers the pending nodes to one backend graph, runs it (from the
// program cache when its structure was seen before) and realizes the kept
// values. When lowering, compiling, allocating or running fails, the pending
// work is dropped (see ErrRunFailed) and the error is returned once; values
// computed before stay as they were. With a profiler on it returns the
// run's profile, for the caller to complete (a download) and record.
// With rd, a value the caller reads next, a backend that can fold the read
// into the run (backend.RunReader) does, unless profiling (the profile
// times the download on its own), and rd.done says so. Called with d.mu
// held.
func (d *Device) run(want []*Tensor, site string, rd *readAfter) (*profile.Run, error) {
	if d.guard != "" {
		return nil, fmt.Errorf("core: %s: %w: a sync point (a download or a run) during %s would not be repeated by a replay", site, ErrCapture, d.guard)
	}
	t0 := time.Now()
	d.drainFrees()
	for _, t := range want {
		if t.dev != d {
			return nil, fmt.Errorf("core: %s: a tensor of device %s synced on %s", site, t.dev.label(), d.label())
		}
		if t.state() != statePending {
			// readable formats its error: only worth it off the hot path
			if err := t.readable(site); err != nil {
				return nil, err
			}
		}
		t.keep = t.keep || t.state() == statePending
	}
	if len(d.pending) == 0 {
		return nil, nil
	}
	if err := d.ensureOpen(); err != nil {
		return nil, d.fail(nil, fmt.Errorf("core: %s: %w", site, err))
	}
	prof := profiling()
	lw, err := d.lower(true)
	if err != nil {
		return nil, d.fail(lw, fmt.Errorf("core: %s: %w", site, err))
	}
	e, compiled, err := d.program(lw)
	t1 := time.Now()
	if err != nil {
		return nil, d.fail(lw, fmt.Errorf("core: %s: %w", site, err))
	}
	if err := d.runFitsBudget(lw, e); err != nil {
		return nil, d.fail(lw, fmt.Errorf("core: %s: %w", site, err))
	}
	if err := d.allocOutputs(lw); err != nil {
		return nil, d.fail(lw, fmt.Errorf("core: %s: %w", site, err))
	}
	prog := e.prog
	t2 := time.Now()
	var info backend.RunInfo
	var times *backend.NodeTimes
	rr, folds := prog.(backend.RunReader)
	var rbuf backend.Buffer
	if rd != nil && folds {
		rbuf, folds = lw.out[rd.t]
	}
	switch {
	case prof:
		info, times, err = runTimed(e, lw.args, len(lw.g.Nodes))
	case rd != nil && folds:
		rd.dst = make([]float32, rd.t.Len())
		info, err = rr.RunRead(lw.args, rbuf, 0, rd.dst)
		rd.done = err == nil
	default:
		info, err = prog.Run(lw.args)
	}
	if err != nil {
		return nil, d.fail(lw, fmt.Errorf("core: %s: running %d nodes on %s: %w", site, len(lw.g.Nodes), d.caps.Name, err))
	}
	d.prof.launch(site, info.Launches)
	if info.Ahead {
		d.stats.Ahead++
	}
	t3 := time.Now()
	var nodes []profile.NodeTime
	if prof {
		// arg nodes read bound memory and do no work: they are left out
		nodes = make([]profile.NodeTime, 0, len(d.pending)+len(lw.half))
		for _, t := range lw.profiled(d) {
			nodes = append(nodes, t.nodeTime(times, lw.nodeOf.of(t)))
		}
	}
	var read *Tensor // registered by the caller after its read (see syncRead)
	if rd != nil {
		read = rd.t
	}
	d.realize(lw, read)
	d.giveBack(lw.lent)
	var rec *profile.Run
	if prof {
		// The stages tile the sync's wall time (see doc.go for the mapping).
		rec = &profile.Run{Site: site, Start: t0, Upload: lw.upload,
			Ctx:     t1.Sub(t0) - lw.lowerTime(),
			Graph:   lw.lowerTime() - lw.flush - lw.upload + t2.Sub(t1) - lw.alloc,
			Flush:   lw.flush + lw.alloc + time.Since(t3),
			Compute: t3.Sub(t2), Nodes: nodes}
		d.useDeviceTime(rec, info)
	}
	d.retire(lw, compiled)
	return rec, nil
}

// program returns the compiled program of lw's graph, from the cache or
// compiled now (compiled is then true). The key is built in a buffer the
// device reuses, and the cache looked up without making a string of it: a
// lazy step asks this every step, and finds its program.
func (d *Device) program(lw *lowering) (e *progEntry, compiled bool, err error) {
	d.keyBuf = lw.g.AppendKey(d.keyBuf[:0])
	if e = d.progs.get(d.keyBuf); e != nil {
		d.stats.CacheHits++
		return e, false, nil
	}
	e, err = d.compile(string(d.keyBuf), &lw.g)
	return e, true, err
}

// newLowering returns the lowering the last run retired (see retire), or
// a new one.
func (d *Device) newLowering() *lowering {
	lw := d.spareLowering
	d.spareLowering = nil
	if lw == nil {
		return &lowering{start: time.Now()}
	}
	*lw = lowering{start: time.Now(), g: backend.Graph{Nodes: lw.g.Nodes, Outputs: lw.g.Outputs},
		args: lw.args, slab: lw.slab, bound: lw.bound[:0], nodeOf: lw.nodeOf, kept: lw.kept[:0],
		out: lw.out, lent: lw.lent[:0], half: lw.half[:0]}
	return lw
}

// retire ends a run's lowering. Its args become lastArgs (see getBufAt),
// and its maps and slices are kept for the next lowering to fill: a lazy
// step lowers the same graph every step, and making them anew was a third
// of its allocation (BenchmarkStepHost). Not when the run compiled its
// graph: a backend may keep the graph's slices in its program. The args
// the lowering takes are the run before's, so that lastArgs stays as it
// was during the next run's getBufAt. Called with d.mu held.
func (d *Device) retire(lw *lowering, compiled bool) {
	prev := d.lastArgs
	d.lastArgs = lw.args
	if compiled {
		return
	}
	// emptied now, not when reused: a device holding the last run's
	// tensors would keep them from the garbage collector
	clear(lw.bound)
	lw.nodeOf.clear()
	clear(lw.out)
	clear(lw.kept)
	clear(lw.lent)
	clear(lw.half)
	clear(prev)
	lw.args = prev[:0]
	d.spareLowering = lw
}

// readAfter is a read that follows a run (see run): t's values in dst once
// done.
type readAfter struct {
	t    *Tensor
	dst  []float32
	done bool
}

// fail ends a failed sync: it gives back what the lowering allocated, drops
// every pending node (reading one returns ErrRunFailed with err), puts back
// the gradients a dropped Backward replaced, and returns err. Called with
// d.mu held.
func (d *Device) fail(lw *lowering, err error) error {
	if lw != nil {
		lw.free(d)
		for _, l := range lw.lent { // they keep their buffers: registered now
			if l.s.buf != nil {
				d.own(l.t, l.s)
			}
		}
	}
	d.dropPending(err)
	d.stats.Failures++
	return err
}

// dropPending marks every pending node failed with err and empties the
// pending graph. Called with d.mu held.
func (d *Device) dropPending(err error) {
	for _, t := range d.pending {
		t.setState(stateFailed)
		t.more().err = err
		t.dropInputs()
		t.keep = false
	}
	clear(d.pending)
	d.pending = d.pending[:0]
	clear(d.rounds)
	// The gradients the dropped Backward would have produced are gone; the
	// ones from before it are intact.
	for i := len(d.grads) - 1; i >= 0; i-- {
		u := d.grads[i]
		if g := u.leaf.grad; g != nil && g.state() == stateFailed {
			u.leaf.grad = u.prev
		}
	}
	d.grads = nil
}

// compile compiles g and caches the program under key. Called with d.mu held.
func (d *Device) compile(key string, g *backend.Graph) (*progEntry, error) {
	// The backend sees the composites it runs natively; the planner
	// decomposes the others (the key stays the undecomposed graph's).
	xg, origin := plan.Expand(g, d.caps)
	prog, err := d.be.Compile(xg)
	if err != nil && d.pooled > 0 {
		// A program's memory check counts the pool's buffers as used: give
		// them back and try once more.
		d.flushPool()
		prog, err = d.be.Compile(xg)
	}
	if err != nil {
		return nil, fmt.Errorf("compiling %d nodes on %s: %w", len(xg.Nodes), d.caps.Name, err)
	}
	d.stats.Compiles++
	e := d.progs.put(key, prog, d.gen)
	e.origin, e.nodes = origin, len(xg.Nodes)
	if d.budget > 0 && e.bytes == 0 {
		// a program that does not report its memory: its planned
		// intermediates count against the budget at each run (the backend
		// plans them too, so only where a budget asks for them)
		if pl, err := plan.Make(xg, plan.Options{Composites: d.caps.Composites}); err == nil {
			e.planned = pl.SlotBytes
		}
	}
	return e, nil
}

// useDeviceTime makes a run's compute stage the device's own measure where
// the device times itself; the host time around it (submit, wait) goes to
// graph, so the stages still tile the wall time.
func (d *Device) useDeviceTime(rec *profile.Run, info backend.RunInfo) {
	if d.caps.DeviceTimer && info.DeviceTime > 0 && info.DeviceTime <= rec.Compute {
		rec.DeviceTimed = true
		rec.Graph += rec.Compute - info.DeviceTime
		rec.Compute = info.DeviceTime
	}
}

// realize ends a successful run of the pending nodes: kept values become
// tensors over their output buffers, the others are spent, and nodes whose
// recipe no backward needs let go of their inputs. read, if not nil, is a
// value the caller reads next and registers after (see own). Called with
// d.mu held.
func (d *Device) realize(lw *lowering, read *Tensor) {
	d.stats.Runs++
	for _, t := range lw.kept {
		t.setState(stateRealized)
		t.stor = newStorageOf(d, nil, t.Len())
		t.stor.buf = lw.out[t]
		if t != read {
			d.own(t, t.stor)
		}
	}
	for _, t := range d.pending {
		if t.state() == statePending { // not kept
			t.setState(stateSpent)
		}
		if !t.requiresGrad || t.backwarded {
			t.dropInputs() // let the ancestors go
		}
	}
	clear(d.pending)
	d.pending = d.pending[:0]
	clear(d.rounds)
	clear(d.grads) // emptied, not dropped: the next Backward fills it again
	d.grads = d.grads[:0]
}

// lowering is one sync's translation of pending tensors to a backend graph.
type lowering struct {
	start  time.Time
	flush  time.Duration // allocating kept values' memory
	alloc  time.Duration // allocating the outputs after compiling (allocOutputs), apart from flush
	upload time.Duration // host values crossing to the device
	end    time.Time
	g      backend.Graph
	args   []backend.Buffer
	slab   []int // the nodes' input lists, cut from one slice
	// gen marks the values bound as args (storage.argGen), bound lists
	// them in binding order: a lazy step binds dozens of values, and a
	// map of them was a fiftieth of its host time.
	gen    uint64
	bound  []*storage
	nodeOf nodeIndex
	kept   []*Tensor                  // values that outlive the run, in output order
	out    map[*Tensor]backend.Buffer // kept values and their new buffers
	// rngBlocks is the Philox blocks the run's random draws take.
	rngBlocks uint64
	// lent are the small values uploaded for this run only (see hostSmall).
	lent []lent
	// lends: the lowering's run gives the lent values back (giveBack) or
	// registers them (fail), so input leaves them unregistered (see own).
	lends bool
	// half are the nodes a lowering adds to the pending ones, as tensors
	// outside the pending list (in nodeOf too), so the profile shows their
	// time: the packs and unpacks of SetActivationStorage, as the op
	// "ActivationStorage", in the layer and pass of the value stored (a
	// pack) or of its first reader (an unpack); and the get_rows of each
	// HalfTable.Gather, as part of the Gather.
	half []*Tensor
}

// profiled is the tensors whose nodes a run's profile lists: the pending
// ones and the storage conversions added to them.
func (lw *lowering) profiled(d *Device) []*Tensor {
	return append(d.pending[:len(d.pending):len(d.pending)], lw.half...)
}

// storeHalf applies SetActivationStorage to the lowered graph (see
// storeHalf): node indices move, and the added nodes join the profile.
func (lw *lowering) storeHalf(d *Device) {
	if d.store == PrecisionF32 {
		return
	}
	pass := make([]profile.Pass, len(lw.g.Nodes)) // args read PassForward: storeHalf never stores them
	from := make([]*Tensor, len(lw.g.Nodes))
	for _, t := range d.pending {
		pass[lw.nodeOf.of(t)], from[lw.nodeOf.of(t)] = t.pass, t
	}
	for _, t := range lw.half { // the gathers' get_rows
		pass[lw.nodeOf.of(t)], from[lw.nodeOf.of(t)] = t.pass, t
	}
	remap, added := storeHalf(&lw.g, pass, d.store)
	lw.nodeOf.remap(remap)
	for _, s := range lw.bound {
		s.argNode = int32(remap[s.argNode])
	}
	for _, h := range added {
		f := from[h.from]
		t := &Tensor{dev: d, op: h.op, user: "ActivationStorage", scope: f.scope, pass: f.pass, shape: lw.g.Nodes[h.node].Shape}
		lw.nodeOf.set(t, h.node)
		lw.half = append(lw.half, t)
	}
}

// argOf returns the arg node of a value lw binds, and whether it binds s.
func (lw *lowering) argOf(s *storage) (int, bool) {
	if s.argGen != lw.gen {
		return 0, false
	}
	return int(s.argNode), true
}

func (lw *lowering) lowerTime() time.Duration { return lw.end.Sub(lw.start) }

func (lw *lowering) free(d *Device) {
	for _, b := range lw.out {
		d.putBuf(b)
	}
	clear(lw.out)
}

// keepSet marks the pending values that outlive a run of d.pending
// (kept(t) is true for them afterwards, until the next keepSet) and returns
// how many there are: results (values no other pending node consumes, but
// for a Checkpoint's recomputed copies: no one asked for those), values
// marked Keep, values a Backward still to come needs (nodes that require
// grad and their inputs), and other goroutines' values. Marks on the
// tensors rather than maps: a lazy step asks this of every node, every
// step. Called with d.mu held.
func (d *Device) keepSet() int {
	d.markGen++
	gen, n := d.markGen, 0
	mark := func(t *Tensor) {
		if t.keptGen != gen {
			t.keptGen = gen
			n++
		}
	}
	for _, t := range d.pending {
		for _, in := range t.inputs {
			in.consumedGen = gen
		}
		if t.requiresGrad && !t.backwarded {
			mark(t)
			for _, in := range t.inputs {
				if in.state() == statePending {
					mark(in)
				}
			}
			if c := t.customOp(); c != nil {
				for _, in := range c.ins { // the user's backward reads them
					if in.state() == statePending {
						mark(in)
					}
				}
			}
		}
	}
	// Another goroutine's pending values are kept whether consumed or not:
	// it may still use them as inputs, and it did not ask for this run.
	me := goid.Get()
	for _, t := range d.pending {
		if t.keep || (t.consumedGen != gen && !t.recomputed || t.g != me) && !t.op.InPlace() {
			mark(t)
		}
	}
	return n
}

// kept reports whether the last keepSet marked t.
func (d *Device) kept(t *Tensor) bool { return t.keptGen == d.markGen }

// lower translates d.pending into lw.g (lends: see lowering.lends). It decides which values outlive the
// run: results (values no other pending node consumes), values marked Keep or
// asked for, and values a Backward still to come needs (nodes that require
// grad and their inputs). Every other value is an intermediate whose memory
// the backend plans. Output args are assigned here and allocated by
// allocOutputs once the program is compiled, so that a program too large for
// the device fails before any of its memory is taken.
func (d *Device) lower(lends bool) (*lowering, error) {
	lw := d.newLowering()
	lw.lends = lends
	defer func() { lw.end = time.Now() }()
	nkeep := d.keepSet()
	// Sized once: a lazy step lowers a few hundred nodes every time, and
	// growing these (and a slice of inputs per node) was about a tenth
	// of its host time in a profile (BenchmarkStepHost).
	ins, outer := 0, 0
	for _, t := range d.pending {
		ins += len(t.inputs)
		for _, in := range t.inputs {
			if in.state() != statePending {
				outer++
			}
		}
	}
	if lw.out == nil {
		lw.out = make(map[*Tensor]backend.Buffer, nkeep)
	}
	d.lowerGen++
	lw.gen = d.lowerGen
	lw.bound = slices.Grow(lw.bound[:0], outer)
	lw.nodeOf.reset(d.pending)
	lw.args = slices.Grow(lw.args[:0], outer+nkeep)
	lw.slab = slices.Grow(lw.slab[:0], ins)[:ins]
	inSlab := lw.slab
	// Random draws take their place in the device's stream here, in
	// recording order: the state tensor gets the stream's position for this
	// run, and each draw its offset from it (see random.go).
	for _, t := range d.pending {
		if t.op == backend.OpRandUniform {
			if err := d.writeRNG(); err != nil {
				return lw, err
			}
			break
		}
	}
	lw.g.Nodes = slices.Grow(lw.g.Nodes[:0], len(d.pending)+outer+8)
	lw.g.Outputs = slices.Grow(lw.g.Outputs[:0], nkeep)
	lw.kept = slices.Grow(lw.kept[:0], nkeep)
	for _, t := range d.pending {
		if err := checkLabels(t); err != nil {
			return lw, err
		}
		n := t.attr.node()
		if t.op == backend.OpRandUniform {
			if o := t.recomputedFrom(); o != nil {
				// a Checkpoint's recomputed draw, at its original's place
				i, ok := lw.nodeOf.get(o)
				if !ok {
					return lw, fmt.Errorf("internal: the recomputed draw %v has no original in this run", t)
				}
				n.Start = lw.g.Nodes[i].Start
			} else {
				n.Start = int(lw.rngBlocks)
				lw.rngBlocks += randBlocks(t.shape)
			}
		}
		if t.op.InPlace() {
			for _, k := range backend.UpdateTargets(t.op) {
				if in := t.inputs[k]; in.state() != statePending {
					in.stor.resident = true
				}
			}
		}
		n.Op = t.op
		n.Shape = t.shape
		n.In, inSlab = inSlab[:len(t.inputs):len(t.inputs)], inSlab[len(t.inputs):]
		for i, in := range t.inputs {
			idx, err := lw.input(d, in)
			if err != nil {
				return lw, err
			}
			n.In[i] = idx
		}
		if t.gather {
			// the get_rows joins the profile as a node of the Gather
			i := gatherNode(&lw.g, t, &n)
			x := &Tensor{dev: d, op: backend.OpGetRows, user: t.user, scope: t.scope, pass: t.pass, shape: lw.g.Nodes[i].Shape}
			lw.nodeOf.set(x, i)
			lw.half = append(lw.half, x)
		}
		lw.nodeOf.set(t, len(lw.g.Nodes))
		if d.kept(t) {
			lw.g.Outputs = append(lw.g.Outputs, backend.Output{Node: len(lw.g.Nodes), Arg: len(lw.args)})
			lw.args = append(lw.args, nil) // allocOutputs
			lw.kept = append(lw.kept, t)
		}
		lw.g.Nodes = append(lw.g.Nodes, n)
	}
	lw.g.NumArgs = len(lw.args)
	d.rng.base += lw.rngBlocks // drawn, whatever becomes of the run
	lw.storeHalf(d)
	return lw, nil
}

// outputCheckBytes is the size of a run's new outputs above which
// allocOutputs first asks the device for its free memory (a query costs a
// system call or more, too much for every small step).
const outputCheckBytes = 64 << 20

// allocOutputs allocates the kept values' buffers, after checking that
// their total fits the device's free memory. Called with d.mu held.
func (d *Device) allocOutputs(lw *lowering) error {
	a0 := time.Now()
	defer func() { lw.alloc = time.Since(a0) }() // not in lw.flush: that is the lowering's
	var need, all uint64
	for _, t := range lw.kept {
		all += 4 * uint64(t.Len())
		if len(d.pool[t.Len()]) == 0 {
			need += 4 * uint64(t.Len())
		}
	}
	d.poolFits(all)
	if need > outputCheckBytes {
		free, _, err := d.be.Memory()
		if err == nil && need > free && d.pooled > 0 {
			// The pool's buffers of other sizes hold memory the run needs.
			d.flushPool()
			free, _, err = d.be.Memory()
		}
		if err == nil && need > free {
			return fmt.Errorf("the run keeps %d value(s) needing %s of new memory, more than the %s free on %s", len(lw.kept), bytesText(need), bytesText(free), d.caps.Name)
		}
	}
	for i, o := range lw.g.Outputs {
		t := lw.kept[i]
		b, err := d.getBufAt(t.Len(), o.Arg)
		if err != nil {
			return fmt.Errorf("allocating %d floats for %v: %w", t.Len(), t, err)
		}
		lw.out[t] = b
		lw.args[o.Arg] = b
	}
	return nil
}

// bytesText writes a byte count for people: "3.7 TiB".
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, "KMGTPE"[i-1], n)
}

// input returns the node index for an op input: a pending node of this
// lowering, or an arg node over a realized value (uploaded if on the host).
func (lw *lowering) input(d *Device, in *Tensor) (int, error) {
	if in.state() == statePending {
		idx, ok := lw.nodeOf.get(in)
		if !ok {
			return 0, fmt.Errorf("internal: %v is pending but was not recorded before its consumer", in)
		}
		return idx, nil
	}
	if err := in.readable("an op input"); err != nil {
		return 0, err
	}
	if idx, ok := lw.argOf(in.stor); ok {
		return idx, nil
	}
	var host []float32
	if lendable(in) {
		host = in.stor.host
	}
	if in.stor.buf == nil {
		// timed only when it uploads: a lazy step binds dozens of values
		// already on the device, and two clock reads each were 6% of it
		u0 := time.Now()
		err := d.onDeviceAt(in.stor, len(lw.args))
		lw.upload += time.Since(u0)
		if err != nil {
			return 0, err
		}
		if host == nil || !lw.lends {
			d.own(in, in.stor)
		}
	}
	if host != nil {
		lw.lent = append(lw.lent, lent{in, in.stor, host})
	}
	idx := len(lw.g.Nodes)
	lw.g.Nodes = append(lw.g.Nodes, backend.Node{Op: backend.OpArg, Shape: in.shape, Arg: len(lw.args)})
	lw.args = append(lw.args, in.stor.buf)
	in.stor.argGen, in.stor.argNode = lw.gen, int32(idx)
	lw.bound = append(lw.bound, in.stor)
	return idx, nil
}

// checkLabels validates the class indices of a OneHot or composite node whose indices
// are host data about to cross to the device: a label outside 0..classes-1
// is an error of the sync naming it, where the device would clamp it.
// Indices computed on the device are clamped there (see OneHot).
func checkLabels(t *Tensor) error {
	var idx *Tensor
	var classes int
	if t.op == backend.OpOneHot {
		idx, classes = t.inputs[0], t.shape[1]
	} else if c := composites[t.op]; c != nil && c.labels != nil {
		idx, classes = c.labels(t)
	} else {
		return nil
	}
	if idx.state() != stateRealized || idx.stor == nil || idx.stor.host == nil {
		return nil
	}
	for i, v := range idx.stor.host {
		if !(v >= 0 && v <= float32(classes-1)) || v != float32(int(v)) {
			return fmt.Errorf("%s: label %g at index %d is not a class index 0..%d (%d classes)", t.op, v, i, classes-1, classes)
		}
	}
	return nil
}

// runTimed runs prog with per-node times when it can time nodes (times is
// nil when it cannot: the profiler then splits the run's compute evenly).
// A program compiled from an expanded graph (see compile) times the
// expanded nodes; their times are folded onto the graph's.
func runTimed(e *progEntry, args []backend.Buffer, nodes int) (backend.RunInfo, *backend.NodeTimes, error) {
	nt, ok := e.prog.(backend.NodeTimer)
	if !ok {
		info, err := e.prog.Run(args)
		return info, nil, err
	}
	if e.origin == nil {
		times := backend.NewNodeTimes(nodes)
		info, err := nt.RunTimed(args, times)
		return info, times, err
	}
	xt := backend.NewNodeTimes(e.nodes)
	info, err := nt.RunTimed(args, xt)
	times := backend.NewNodeTimes(nodes)
	if err == nil {
		plan.FoldTimes(times, xt, e.origin)
	}
	return info, times, err
}

// nodeIndex is a lowering's graph node of each tensor it lowered: a
// pending one's by its place in the pending list (Tensor.seq), since a
// map's insert per node and lookup per input were a twentieth of a lazy
// step's host time (BenchmarkStepHost); the nodes the lowering adds (its
// half tensors) in a map.
type nodeIndex struct {
	pend  []*Tensor // the pending list lowered
	at    []int     // the node of pend[i], -1 until lowered
	extra map[*Tensor]int
}

// reset starts the index of a lowering of pend.
func (x *nodeIndex) reset(pend []*Tensor) {
	x.pend = pend
	x.at = slices.Grow(x.at[:0], len(pend))[:len(pend)]
	for i := range x.at {
		x.at[i] = -1
	}
	clear(x.extra)
}

// pending reports whether t is pend[t.seq].
func (x *nodeIndex) pending(t *Tensor) bool {
	return t.seq >= 0 && t.seq < len(x.pend) && x.pend[t.seq] == t
}

// get returns t's node, and whether t has one.
func (x *nodeIndex) get(t *Tensor) (int, bool) {
	if x.pending(t) {
		i := x.at[t.seq]
		return i, i >= 0
	}
	i, ok := x.extra[t]
	return i, ok
}

// of returns t's node (0 when it has none, as a map's lookup would).
func (x *nodeIndex) of(t *Tensor) int {
	i, ok := x.get(t)
	if !ok {
		return 0
	}
	return i
}

func (x *nodeIndex) set(t *Tensor, i int) {
	if x.pending(t) {
		x.at[t.seq] = i
		return
	}
	if x.extra == nil {
		x.extra = map[*Tensor]int{}
	}
	x.extra[t] = i
}

// remap moves every node i to r[i].
func (x *nodeIndex) remap(r []int) {
	for k, i := range x.at {
		if i >= 0 {
			x.at[k] = r[i]
		}
	}
	for t, i := range x.extra {
		x.extra[t] = r[i]
	}
}

// clear lets go of the tensors (see retire).
func (x *nodeIndex) clear() {
	x.pend = nil
	clear(x.extra)
}
