package core

import (
	"fmt"
	"slices"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// Tensor makes a tensor holding a copy of data with the given shape (no
// gradient). The data crosses to the device when a run first reads it.
// It panics when len(data) does not match the shape.
func (d *Device) Tensor(data []float32, shape ...int) *Tensor {
	return d.leaf("Tensor", data, shape, false)
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ensureOpen(); err != nil {
		return nil, err
	}
	n := backend.NumElems(shape)
	b, err := d.be.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("core: Zeros%v: allocating %d floats on %s: %w", shape, n, d.caps.Name, err)
	}
	t := &Tensor{dev: d, shape: slices.Clone(shape), st: stateRealized, param: true}
	t.stor = d.newStorage(t, nil, n)
	t.stor.buf = b
	return t, nil
}

func (d *Device) leaf(fn string, data []float32, shape []int, grad bool) *Tensor {
	checkShape(fn, shape)
	if n := backend.NumElems(shape); n != len(data) {
		panic(fmt.Sprintf("core.%s: %d values for shape %v (%d elements)", fn, len(data), shape, n))
	}
	t := &Tensor{dev: d, shape: slices.Clone(shape), st: stateRealized, requiresGrad: grad, param: grad}
	d.mu.Lock()
	t.stor = d.newStorage(t, slices.Clone(data), len(data))
	d.mu.Unlock()
	return t
}

func checkShape(fn string, shape []int) {
	if len(shape) > 4 {
		panic(fmt.Sprintf("core.%s: shape %v has %d dimensions, at most 4 are supported", fn, shape, len(shape)))
	}
	for _, s := range shape {
		if s < 1 {
			panic(fmt.Sprintf("core.%s: shape %v has a dimension < 1", fn, shape))
		}
	}
}

// record appends a pending node computing op over ins. fn names the public
// function for error messages.
func (d *Device) record(fn string, op backend.Op, shape []int, attr backend.Node, ins ...*Tensor) *Tensor {
	var t0 time.Time
	if profiling() {
		t0 = time.Now()
	}
	grad := false
	for i, in := range ins {
		if in.dev != d {
			panic(fmt.Sprintf("core.%s: input %d is on device %s, not %s", fn, i, in.dev.name, d.name))
		}
		in.check(fn, i)
		grad = grad || in.requiresGrad
	}
	t := &Tensor{dev: d, shape: shape, st: statePending, op: op, attr: attr}
	t.inputs = ins
	d.mu.Lock()
	defer d.mu.Unlock()
	t.requiresGrad = grad && d.noGrad == 0
	t.pass = d.pass
	t.seq = len(d.pending)
	d.pending = append(d.pending, t)
	if !t0.IsZero() {
		dt := time.Since(t0)
		d.created += dt
		profile.Op(t.pass, op.String(), dt)
	}
	if d.eager {
		t.keep = true
		if err := d.syncLocked(nil, "eager"); err != nil {
			panic(fmt.Sprintf("core.%s: eager run failed: %v", fn, err))
		}
	}
	return t
}

// Sync runs all pending work on the device as one program and keeps the
// values of ts (and of tensors marked with Keep). It is the explicit sync
// point; Data, Item and buffer reads call it.
func (d *Device) Sync(ts ...*Tensor) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncLocked(ts, "Sync")
}

// syncLocked lowers the pending nodes to one backend graph, runs it (from the
// program cache when its structure was seen before) and realizes the kept
// values. On failure nothing is lost: the pending work stays pending.
func (d *Device) syncLocked(want []*Tensor, site string) error {
	if d.guard != "" {
		return fmt.Errorf("core: %s: %w: a sync point (a download or a run) during %s would not be repeated by a replay", site, ErrCapture, d.guard)
	}
	t0 := time.Now()
	d.drainFrees()
	for _, t := range want {
		if t.dev != d {
			return fmt.Errorf("core: %s: a tensor of device %s synced on %s", site, t.dev.name, d.name)
		}
		if err := t.readable(site); err != nil && t.st != statePending {
			return err
		}
		t.keep = t.keep || t.st == statePending
	}
	if len(d.pending) == 0 {
		return nil
	}
	if err := d.ensureOpen(); err != nil {
		return err
	}
	prof := profiling()
	var rec profile.Run
	lw, err := d.lower()
	if err != nil {
		lw.free(d)
		return fmt.Errorf("core: %s: %w", site, err)
	}
	key := lw.g.Key()
	prog, ok := d.progs[key]
	t1 := time.Now()
	if ok {
		d.stats.CacheHits++
	} else if prog, err = d.compile(key, &lw.g); err != nil {
		lw.free(d)
		return fmt.Errorf("core: %s: %w", site, err)
	}
	t2 := time.Now()
	var info backend.RunInfo
	var nodeTimes []time.Duration
	if nt, ok := prog.(backend.NodeTimer); ok && prof {
		nodeTimes = make([]time.Duration, len(lw.g.Nodes))
		info, err = nt.RunTimed(lw.args, nodeTimes)
	} else {
		info, err = prog.Run(lw.args)
	}
	if err != nil {
		lw.free(d)
		return fmt.Errorf("core: %s: running %d nodes on %s: %w", site, len(lw.g.Nodes), d.caps.Name, err)
	}
	profile.Launch(site, info.Launches)
	t3 := time.Now()
	var nodes []profile.NodeTime
	if prof {
		// arg nodes read bound memory and do no work: they are left out
		nodes = make([]profile.NodeTime, 0, len(d.pending))
		for _, t := range d.pending {
			n := profile.NodeTime{Op: t.op.String(), Pass: t.pass}
			if nodeTimes != nil {
				n.Dur = nodeTimes[lw.nodeOf[t]]
			}
			nodes = append(nodes, n)
		}
	}
	d.realize(lw)
	if prof {
		// The stages tile the sync's wall time (see doc.go for the mapping).
		rec = profile.Run{Site: site, Start: t0, Upload: lw.upload,
			Ctx:     t1.Sub(t0) - lw.lowerTime(),
			Graph:   lw.lowerTime() - lw.flush - lw.upload + t2.Sub(t1),
			Flush:   lw.flush + time.Since(t3),
			Compute: t3.Sub(t2)}
		d.useDeviceTime(&rec, info)
		rec.Nodes = nodes
		d.lastRun = &rec
	}
	d.synced += time.Since(t0)
	if prof && !d.holdRun {
		profile.RecordRun(&rec)
		d.lastRun = nil
	}
	return nil
}

// compile compiles g and caches the program under key. Called with d.mu held.
func (d *Device) compile(key string, g *backend.Graph) (backend.Program, error) {
	prog, err := d.be.Compile(g)
	if err != nil {
		return nil, fmt.Errorf("compiling %d nodes on %s: %w", len(g.Nodes), d.caps.Name, err)
	}
	d.progs[key] = prog
	d.stats.Compiles++
	return prog, nil
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
// recipe no backward needs let go of their inputs. Called with d.mu held.
func (d *Device) realize(lw *lowering) {
	d.stats.Runs++
	for _, t := range d.pending {
		if b, ok := lw.out[t]; ok {
			t.st = stateRealized
			t.stor = d.newStorage(t, nil, t.Len())
			t.stor.buf = b
		} else {
			t.st = stateSpent
		}
		if !t.requiresGrad || t.backwarded {
			t.inputs = nil // let the ancestors go
		}
	}
	d.pending = d.pending[:0]
}

// lowering is one sync's translation of pending tensors to a backend graph.
type lowering struct {
	start  time.Time
	flush  time.Duration // allocating kept values' memory
	upload time.Duration // host values crossing to the device
	end    time.Time
	g      backend.Graph
	args   []backend.Buffer
	argOf  map[*storage]int // arg node index per realized value
	nodeOf map[*Tensor]int
	out    map[*Tensor]backend.Buffer // kept values and their new buffers
}

func (lw *lowering) lowerTime() time.Duration { return lw.end.Sub(lw.start) }

func (lw *lowering) free(d *Device) {
	for _, b := range lw.out {
		d.putBuf(b)
	}
}

// lower translates d.pending into lw.g. It decides which values outlive the
// run: results (values no other pending node consumes), values marked Keep or
// asked for, and values a Backward still to come needs (nodes that require
// grad and their inputs). Every other value is an intermediate whose memory
// the backend plans.
func (d *Device) lower() (*lowering, error) {
	lw := &lowering{
		argOf:  map[*storage]int{},
		nodeOf: make(map[*Tensor]int, len(d.pending)),
		out:    map[*Tensor]backend.Buffer{},
		start:  time.Now(),
	}
	defer func() { lw.end = time.Now() }()
	consumed := make(map[*Tensor]bool, len(d.pending))
	keep := make(map[*Tensor]bool)
	for _, t := range d.pending {
		for _, in := range t.inputs {
			consumed[in] = true
		}
		if t.requiresGrad && !t.backwarded {
			keep[t] = true
			for _, in := range t.inputs {
				if in.st == statePending {
					keep[in] = true
				}
			}
		}
	}
	for _, t := range d.pending {
		if t.keep || !consumed[t] && !t.op.InPlace() {
			keep[t] = true
		}
	}
	lw.g.Nodes = make([]backend.Node, 0, len(d.pending)+8)
	for _, t := range d.pending {
		n := t.attr
		n.Op = t.op
		n.Shape = t.shape
		n.In = make([]int, len(t.inputs))
		for i, in := range t.inputs {
			idx, err := lw.input(d, in)
			if err != nil {
				return lw, err
			}
			n.In[i] = idx
		}
		lw.nodeOf[t] = len(lw.g.Nodes)
		lw.g.Nodes = append(lw.g.Nodes, n)
		if keep[t] {
			f0 := time.Now()
			b, err := d.getBuf(t.Len())
			lw.flush += time.Since(f0)
			if err != nil {
				return lw, fmt.Errorf("allocating %d floats for %v: %w", t.Len(), t, err)
			}
			lw.out[t] = b
			lw.g.Outputs = append(lw.g.Outputs, backend.Output{Node: lw.nodeOf[t], Arg: len(lw.args)})
			lw.args = append(lw.args, b)
		}
	}
	lw.g.NumArgs = len(lw.args)
	return lw, nil
}

// input returns the node index for an op input: a pending node of this
// lowering, or an arg node over a realized value (uploaded if on the host).
func (lw *lowering) input(d *Device, in *Tensor) (int, error) {
	if in.st == statePending {
		idx, ok := lw.nodeOf[in]
		if !ok {
			return 0, fmt.Errorf("internal: %v is pending but was not recorded before its consumer", in)
		}
		return idx, nil
	}
	if err := in.readable("an op input"); err != nil {
		return 0, err
	}
	if idx, ok := lw.argOf[in.stor]; ok {
		return idx, nil
	}
	u0 := time.Now()
	err := d.onDevice(in.stor)
	lw.upload += time.Since(u0)
	if err != nil {
		return 0, err
	}
	idx := len(lw.g.Nodes)
	lw.g.Nodes = append(lw.g.Nodes, backend.Node{Op: backend.OpArg, Shape: in.shape, Arg: len(lw.args)})
	lw.args = append(lw.args, in.stor.buf)
	lw.argOf[in.stor] = idx
	return idx, nil
}
