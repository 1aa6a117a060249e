package webgpu

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// maxCachedGroups bounds the bind groups a step keeps per set of bound arg
// buffers; training usually alternates a handful.
const maxCachedGroups = 16

// Run executes the program: one command encoder, one compute pass with every
// dispatch, the output copies, one submit, one wait.
func (p *program) Run(args []backend.Buffer) (backend.RunInfo, error) {
	info, _, err := p.run(args, nil, nil)
	return info, err
}

// RunRead is Run followed by the Backend's Read of src, the read's copy
// recorded after the run's in its submission where the device folds reads
// (natively: one wait for both; in the browser a plain run is not waited
// for, so a run and a read are one round trip already).
func (p *program) RunRead(args []backend.Buffer, src backend.Buffer, off int, dst []float32) (backend.RunInfo, error) {
	info, folded, err := p.run(args, nil, &readReq{src: src, off: off, dst: dst})
	if err != nil || folded {
		return info, err
	}
	return info, p.b.Read(src, off, dst)
}

// readReq is RunRead's read, before its buffer is checked.
type readReq struct {
	src backend.Buffer
	off int
	dst []float32
}

// RunTimed runs the program and reports each node's time by the shared
// scheme (backend.NodeClock). A calibration run (runPerNode) times each
// kernel on the device (TimeMeasured; a kernel that computes several nodes
// - fusion, optimizer groups - has its time split among them by
// backend.CostShares, TimeSplit). Without timestamp queries each kernel is
// submitted and waited for on its own and timed by the host clock (which
// then includes the submission cost).
//
// A pass per kernel costs time of its own (a barrier and two timestamps
// each: about 5 us a kernel on an H200, 60 us on lavapipe), which would
// make a profiled step of small kernels 1.5x an unprofiled one. So the
// other runs are plain - one pass, timed as a whole - and share their
// measured time among the nodes as the last calibration did
// (TimeEstimated), calibrating as often as timingBudget allows
// (backend.Calibration.Budget).
func (p *program) RunTimed(args []backend.Buffer, t *backend.NodeTimes) (backend.RunInfo, error) {
	if err := t.Check("webgpu.RunTimed", p.nodes); err != nil {
		return backend.RunInfo{}, err
	}
	info, _, err := p.run(args, t, nil)
	return info, err
}

// run runs the program once: timed per node when nodeTimes is given, else
// with rr's read folded into the submission where the device folds reads
// (folded reports it).
func (p *program) run(args []backend.Buffer, nodeTimes *backend.NodeTimes, rr *readReq) (info backend.RunInfo, folded bool, err error) {
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case p.released:
		return backend.RunInfo{}, false, errors.New("webgpu.Run: program released")
	case b.closed:
		return backend.RunInfo{}, false, errors.New("webgpu.Run: backend closed")
	case len(args) != p.numArgs:
		return backend.RunInfo{}, false, fmt.Errorf("webgpu.Run: %d args, program wants %d", len(args), p.numArgs)
	}
	bufs := make([]*buffer, len(args))
	for i, a := range args {
		wb, err := b.own("Run", a)
		if err != nil {
			return backend.RunInfo{}, false, fmt.Errorf("arg %d: %w", i, err)
		}
		if wb.n < p.argNeed[i] {
			return backend.RunInfo{}, false, fmt.Errorf("webgpu.Run: arg %d holds %d elements, the graph needs %d", i, wb.n, p.argNeed[i])
		}
		bufs[i] = wb
	}
	var rb *gpu.ReadBack
	if rr != nil {
		wb, err := b.span("RunRead", rr.src, rr.off, len(rr.dst))
		if err != nil {
			return backend.RunInfo{}, false, err
		}
		if len(rr.dst) > 0 && b.d.FoldsRead(4*len(rr.dst)) {
			rb = &gpu.ReadBack{Src: wb.g, Off: 4 * uint64(rr.off), Dst: gpu.BytesOf(rr.dst)}
		}
	}
	if nodeTimes != nil {
		// a timed run's host time is its own, not that of runs deferred
		// before it
		b.d.DrainDeferred()
		ds, copies, err := p.dispatches(bufs)
		if err != nil {
			return backend.RunInfo{}, false, err
		}
		info, err := p.clock.Run(nodeTimes, &timedRun{p: p, ds: ds, copies: copies}, args)
		return info, false, err
	}
	d := b.d
	// A plain run is not waited for (RunInfo.Pending; the next read waits):
	// in the browser a wait is a round trip, natively the host builds the
	// next step meanwhile (AG_WEBGPU_DEFER=off waits, reporting the run's
	// device time).
	build := func() ([]gpu.Dispatch, []gpu.CopyOp, error) { return p.dispatches(bufs) }
	key := runKey{prog: p, bufs: bufs}
	if rb == nil && d.DefersRuns() {
		ahead, err := d.DeferRun(key, build)
		if err != nil {
			return backend.RunInfo{}, false, err
		}
		return backend.RunInfo{Launches: 1, Pending: true, Ahead: ahead}, false, nil
	}
	start := time.Now()
	ticks, ahead, err := d.RunRepeatable(key, build, p.b.info.Timestamps, rb)
	host := time.Since(start)
	if err != nil {
		if rb != nil {
			return backend.RunInfo{}, false, fmt.Errorf("webgpu.RunRead: %w", err)
		}
		return backend.RunInfo{}, false, fmt.Errorf("webgpu.Run: %w", err)
	}
	info = backend.TickedRun(ticks, host)
	info.Ahead = ahead
	return info, rb != nil, nil
}

// timedRun is a profiled run's dispatches, bound (backend.Kernels).
type timedRun struct {
	p      *program
	ds     []gpu.Dispatch
	copies []gpu.CopyOp
}

// TimeKernels is a calibration run (runPerNode).
func (r *timedRun) TimeKernels(_ []backend.Buffer, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	return r.p.runPerNode(r.ds, r.copies, ks)
}

// RunWhole is a plain run, timed whole.
func (r *timedRun) RunWhole([]backend.Buffer) (backend.RunInfo, error) {
	info, _, err := r.p.runWhole(r.ds, r.copies, nil)
	if err != nil {
		return info, fmt.Errorf("webgpu.RunTimed: %w", err)
	}
	return info, nil
}

// dispatches binds the program's steps and output copies to the args.
func (p *program) dispatches(bufs []*buffer) ([]gpu.Dispatch, []gpu.CopyOp, error) {
	ds := make([]gpu.Dispatch, 0, len(p.steps))
	add := func(s *step) error {
		bg, err := p.bindGroup(s, bufs)
		if err != nil {
			return fmt.Errorf("webgpu.Run: node %d: %w", s.node, err)
		}
		ds = append(ds, gpu.Dispatch{Pipe: s.pipe, Bind: bg, X: s.x, Y: s.y, Z: s.z, Node: s.node})
		return nil
	}
	for i := range p.steps {
		s := &p.steps[i]
		if s.alt == nil || !p.aliased(s, bufs) {
			if err := add(s); err != nil {
				return nil, nil, err
			}
			continue
		}
		for k := range s.alt {
			if err := add(&s.alt[k]); err != nil {
				return nil, nil, err
			}
		}
	}
	copies := make([]gpu.CopyOp, 0, len(p.copies))
	for _, c := range p.copies {
		src := p.slotOrArg(c.src, bufs)
		copies = append(copies, gpu.CopyOp{Src: src, Dst: bufs[c.dst].g, Size: c.bytes})
	}
	return ds, copies, nil
}

// runWhole runs every dispatch in one pass and one submission and waits,
// timed by timestamps around it where the device has them, else by the host
// clock (which it also returns).
func (p *program) runWhole(ds []gpu.Dispatch, copies []gpu.CopyOp, rb *gpu.ReadBack) (backend.RunInfo, time.Duration, error) {
	d := p.b.d
	start := time.Now()
	ticks, err := d.RunRead([][]gpu.Dispatch{ds}, copies, p.b.info.Timestamps, rb)
	host := time.Since(start)
	if err != nil {
		return backend.RunInfo{}, host, err
	}
	return backend.TickedRun(ticks, host), host, nil
}

// runPerNode is a calibration run: each kernel timed (the consecutive
// dispatches of one node are its kernel), by timestamps between the
// dispatches of one pass where the device has them, else between passes,
// one a kernel, else by the host clock around each kernel submitted and
// waited for alone.
func (p *program) runPerNode(ds []gpu.Dispatch, copies []gpu.CopyOp, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	var passes [][]gpu.Dispatch
	var owners []int
	for _, d := range ds {
		if len(owners) == 0 || owners[len(owners)-1] != d.Node {
			passes = append(passes, nil)
			owners = append(owners, d.Node)
		}
		passes[len(passes)-1] = append(passes[len(passes)-1], d)
	}
	d := p.b.d
	if p.b.info.InsideTS && len(ds)+1 <= 4096 {
		start := time.Now()
		ticks, err := d.RunInside(ds, copies)
		host := time.Since(start)
		if err != nil {
			return nil, backend.RunInfo{}, fmt.Errorf("webgpu.RunTimed: %w", err)
		}
		nodes := make([]int, len(ds))
		for k, x := range ds {
			nodes[k] = x.Node
		}
		if ks, total, ok := backend.TickedDispatches(ks, nodes, ticks, host); ok {
			return ks, backend.RunInfo{DeviceTime: total, Launches: 1}, nil
		}
		// Timestamps unusable: fall through.
	}
	// A timestamp query set holds at most 4096 queries. An empty pass goes
	// first, whose cost backend.TickedPasses takes off every kernel's.
	if p.b.info.Timestamps && len(passes)+2 <= 4096 {
		start := time.Now()
		ticks, err := d.Run(append([][]gpu.Dispatch{nil}, passes...), copies, true)
		host := time.Since(start)
		if err != nil {
			return nil, backend.RunInfo{}, fmt.Errorf("webgpu.RunTimed: %w", err)
		}
		if ks, total, ok := backend.TickedPasses(ks, owners, ticks, host); ok {
			return ks, backend.RunInfo{DeviceTime: total, Launches: 1}, nil
		}
		// Timestamps unusable: fall through to host timing.
	}
	var total time.Duration
	for k, pass := range passes {
		var cs []gpu.CopyOp
		if k == len(passes)-1 {
			cs = copies
		}
		start := time.Now()
		if _, err := d.Run([][]gpu.Dispatch{pass}, cs, false); err != nil {
			return nil, backend.RunInfo{}, fmt.Errorf("webgpu.RunTimed: node %d: %w", owners[k], err)
		}
		dt := time.Since(start)
		ks = append(ks, backend.KernelTime{Node: owners[k], Dur: dt})
		total += dt
	}
	if len(passes) == 0 && len(copies) > 0 {
		start := time.Now()
		if _, err := d.Run(nil, copies, false); err != nil {
			return nil, backend.RunInfo{}, fmt.Errorf("webgpu.RunTimed: %w", err)
		}
		total += time.Since(start)
	}
	return ks, backend.RunInfo{DeviceTime: total, Launches: max(len(passes), 1)}, nil
}

func (p *program) slotOrArg(l loc, bufs []*buffer) *gpu.Buffer {
	if l.kind == refArg {
		return bufs[l.idx].g
	}
	return p.slots[l.idx]
}

// aliased reports whether two bindings of s that refer to args get the
// same buffer while one of them is written (a fused in-place group over
// args that alias must run member by member).
func (p *program) aliased(s *step, bufs []*buffer) bool {
	for i, r := range s.binds {
		if r.kind != refArg {
			continue
		}
		for j := i + 1; j < len(s.binds); j++ {
			q := s.binds[j]
			if q.kind == refArg && bufs[q.idx] == bufs[r.idx] && (!s.k.readOnly[i] || !s.k.readOnly[j]) {
				return true
			}
		}
	}
	return false
}

// groupKey folds the ids of the arg buffers a step binds into a map key;
// the cached entry keeps the exact ids to check a hit.
func groupKey(s *step, bufs []*buffer, ids []uint64) (argKey, []uint64) {
	var key argKey
	ids = ids[:0]
	for _, r := range s.binds {
		if r.kind == refArg {
			id := bufs[r.idx].id
			k := len(ids) % len(key)
			key[k] = key[k]*0x9e3779b97f4a7c15 + id
			ids = append(ids, id)
		}
	}
	return key, ids
}

// bindGroup returns the step's bind group for these args: the one made at
// Compile, or one cached by the identity of the arg buffers it binds.
func (p *program) bindGroup(s *step, bufs []*buffer) (*gpu.BindGroup, error) {
	if s.fixed != nil {
		return s.fixed, nil
	}
	key, ids := groupKey(s, bufs, p.keyBuf)
	p.keyBuf = ids
	if c, ok := s.groups[key]; ok && slices.Equal(c.ids, ids) {
		return c.bg, nil
	}
	if s.groups == nil || len(s.groups) >= maxCachedGroups {
		for _, c := range s.groups {
			p.b.d.ReleaseBindGroup(c.bg)
		}
		s.groups = map[argKey]cachedGroup{}
	}
	if c, ok := s.groups[key]; ok {
		p.b.d.ReleaseBindGroup(c.bg)
	}
	bg, err := p.b.d.NewBindGroup(s.pipe, p.entries(s, bufs))
	if err != nil {
		return nil, err
	}
	s.groups[key] = cachedGroup{bg: bg, ids: slices.Clone(ids)}
	return bg, nil
}

// Release frees the program's bind groups, intermediates and parameters.
func (p *program) Release() {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.release()
}

func (p *program) release() {
	if p.released || p.b.closed {
		p.released = true
		return
	}
	p.released = true
	delete(p.b.liveProgs, p)
	p.b.d.DropAhead()
	for _, s := range p.allSteps() {
		if s.fixed != nil {
			p.b.d.ReleaseBindGroup(s.fixed)
		}
		for _, c := range s.groups {
			p.b.d.ReleaseBindGroup(c.bg)
		}
	}
	for _, s := range p.slots {
		p.b.destroy(s)
	}
	if p.params != nil {
		p.b.destroy(p.params)
	}
	if p.scratch != nil {
		p.b.destroy(p.scratch)
	}
	if p.scratchT != nil {
		p.b.destroy(p.scratchT)
	}
	p.steps, p.slots, p.params, p.scratch, p.scratchT = nil, nil, nil, nil, nil
}

// timingBudget is the average part of a profiled run that per-kernel
// timing may add: calibration runs come as often as it allows
// (backend.Calibration.Budget).
const timingBudget = 0.05

// runKey identifies a run (gpu.RunKey): its program and its bound buffers.
type runKey struct {
	prog *program
	bufs []*buffer
}

// Same reports whether o is the key of a run of the same program over the
// same buffers.
func (k runKey) Same(o gpu.RunKey) bool {
	ok, is := o.(runKey)
	return is && k.prog != nil && k.prog == ok.prog && slices.Equal(k.bufs, ok.bufs)
}

// Clone copies the buffer list, which the caller's run owns.
func (k runKey) Clone() gpu.RunKey {
	k.bufs = slices.Clone(k.bufs)
	return k
}
