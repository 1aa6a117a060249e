//go:build ggml

package native

/*
#include <stdlib.h>
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// program is one compiled graph: a ggml graph whose intermediates were
// planned once by ggml's graph allocator and whose arg leaves Run points at
// the bound buffers.
type program struct {
	d      *device
	l      *lowering
	galloc C.ggml_gallocr_t
	cbuf   C.ggml_backend_buffer_t // constants
	// C arrays for ag_bind: leaves[i] takes srcs[i]'s memory; views follow.
	leaves, srcs, views **C.struct_ggml_tensor
	nviews              int
	numArgs             int
	released            bool
	// readArg[a]: some node reads args[a] (else the graph only writes it).
	readArg []bool
	// randBuf is fillRands' host scratch, reused run after run (a
	// transformer's dropout masks are tens of MB a step).
	randBuf []float32
	// RunTimed's one-node sub-graphs (see nodetimer.go), made on first use
	// in sctx; prof accumulates them under AG_GGML_PROFILE=1.
	sctx *C.struct_ggml_context
	segs []segment
	prof opProfile
	// clock times RunTimed's nodes (made on its first call).
	clock *backend.NodeClock
}

// lower validates g and builds its ggml graph, checking every node against
// the device; it allocates no device memory. The shared planner (package
// plan) validates the graph, finds the nodes no output needs, and checks
// its intermediates' peak, as planned for the IR graph, against the
// device's free memory before ggml's allocator takes any (its own plan of
// the ggml graph is close to it: a few more nodes, the same liveness).
func (d *device) lower(g *backend.Graph) (*lowering, error) {
	pl, err := plan.Make(g, plan.Options{SliceViews: true, Composites: d.caps.Composites})
	if err != nil {
		return nil, err
	}
	// The memory query costs a driver call (and ggml-vulkan logs it):
	// only a large program asks.
	if pl.SlotBytes > memCheckBytes {
		var f, t C.size_t
		var msg [512]C.char
		if C.ag_dev_memory(C.ggml_backend_get_device(d.be), &f, &t, &msg[0], C.size_t(len(msg))) == 0 && pl.SlotBytes > uint64(f) {
			return nil, fmt.Errorf("the program's intermediates need %d bytes at their peak, more than the %d bytes free on %s", pl.SlotBytes, uint64(f), d.name)
		}
	}
	l, err := newLowering(d, g)
	if err != nil {
		return nil, err
	}
	l.needed, l.loc = pl.Needed, pl.Loc
	if err := l.build(); err != nil {
		l.free()
		return nil, err
	}
	if err := l.checkSupported(); err != nil {
		l.free()
		return nil, err
	}
	var msg [1024]C.char
	if C.ag_check_extents(l.gf, &msg[0], C.size_t(len(msg))) != 0 {
		l.free()
		return nil, fmt.Errorf("a view past its memory (a bug in package native): %s", C.GoString(&msg[0]))
	}
	return l, nil
}

func (d *device) Compile(g *backend.Graph) (backend.Program, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("native: %s Compile: device closed", d.name)
	}
	stats.compiles.Add(1)
	defer since(&stats.compileNs, time.Now())
	l, err := d.lower(g)
	if err != nil {
		return nil, fmt.Errorf("native: %s Compile: %w", d.name, err)
	}
	dumpGraph(d.name, l)
	p := &program{d: d, l: l, numArgs: g.NumArgs, readArg: make([]bool, g.NumArgs)}
	for _, a := range l.args {
		p.readArg[a.arg] = p.readArg[a.arg] || !a.write
	}
	if err := p.allocate(); err != nil {
		p.release()
		return nil, fmt.Errorf("native: %s Compile: %w", d.name, err)
	}
	return p, nil
}

// memCheckBytes is the plan's peak above which Compile asks the device
// for its free memory first.
const memCheckBytes = 64 << 20

func carray(n int) **C.struct_ggml_tensor {
	return (**C.struct_ggml_tensor)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(uintptr(0)))))
}

func cslice(p **C.struct_ggml_tensor, n int) []tensor {
	return unsafe.Slice((*tensor)(unsafe.Pointer(p)), max(n, 1))[:n]
}

// allocate sets the constants, plans the intermediates and lists the views
// that Run must re-point.
func (p *program) allocate() error {
	l := p.l
	if len(l.fills) > 0 || len(l.rands) > 0 {
		p.cbuf = C.ggml_backend_alloc_ctx_tensors(l.cctx, p.d.be)
		if p.cbuf == nil {
			var bytes uint64
			for _, f := range l.fills {
				bytes += uint64(C.ggml_nbytes(f.t))
			}
			return fmt.Errorf("out of device memory for %d constants of %d bytes", len(l.fills), bytes)
		}
		for _, f := range l.fills {
			n := int(C.ggml_nelements(f.t))
			vals := make([]float32, n)
			for i := range vals {
				vals[i] = f.value
			}
			C.ggml_backend_tensor_set(f.t, unsafe.Pointer(&vals[0]), 0, C.size_t(4*n))
		}
	}
	n := len(l.args)
	p.leaves, p.srcs = carray(n), carray(n)
	leaves := cslice(p.leaves, n)
	isArg := make(map[tensor]bool, n)
	for i, a := range l.args {
		leaves[i] = a.t
		isArg[a.t] = true
	}
	// Args get placeholder addresses so that the allocator plans only the
	// intermediates; Run binds the real buffers.
	C.ag_mark_bound(p.leaves, C.int(n), p.d.dummy)
	p.galloc = C.ggml_gallocr_new(C.ggml_backend_get_default_buffer_type(p.d.be))
	if !C.ggml_gallocr_alloc_graph(p.galloc, l.gf) {
		return fmt.Errorf("out of device memory for intermediates (%d bytes wanted)", uint64(C.ggml_gallocr_get_attempted_buffer_size(p.galloc, 0)))
	}
	var views []tensor
	nn := int(C.ggml_graph_n_nodes(l.gf))
	for k := 0; k < nn; k++ {
		t := C.ggml_graph_node(l.gf, C.int(k))
		if t.view_src != nil && isArg[t.view_src] {
			views = append(views, t)
		}
	}
	p.nviews = len(views)
	p.views = carray(len(views))
	copy(cslice(p.views, len(views)), views)
	return nil
}

// bind checks the args and points the graph's leaves at them. A dirty
// small buffer (see buffer.dirty) is zeroed first unless the run overwrites
// all of it; those are returned, to be marked clean after the run.
func (p *program) bind(args []backend.Buffer) ([]*buffer, error) {
	if p.released {
		return nil, fmt.Errorf("native: %s Run: program released", p.d.name)
	}
	if len(args) != p.numArgs {
		return nil, fmt.Errorf("native: %s Run: %d args, want %d", p.d.name, len(args), p.numArgs)
	}
	srcs := cslice(p.srcs, len(p.l.args))
	var dirty map[*buffer]bool // buffer -> the run overwrites it whole
	for i, a := range p.l.args {
		b, err := p.d.own("Run", args[a.arg])
		if err != nil {
			return nil, fmt.Errorf("%w (arg %d)", err, a.arg)
		}
		if b.n < a.elems {
			return nil, fmt.Errorf("native: %s Run: arg %d holds %d values, the graph uses %d", p.d.name, a.arg, b.n, a.elems)
		}
		srcs[i] = b.t
		if b.dirty {
			if dirty == nil {
				dirty = map[*buffer]bool{}
			}
			whole := !p.readArg[a.arg] && a.elems == b.n
			if prev, seen := dirty[b]; seen {
				whole = whole && prev
			}
			dirty[b] = whole
		}
	}
	var overwritten []*buffer
	for b, whole := range dirty {
		if whole {
			overwritten = append(overwritten, b)
		} else {
			b.clean()
		}
	}
	C.ag_bind(p.leaves, p.srcs, C.int(len(p.l.args)), p.views, C.int(p.nviews))
	if err := p.fillRands(args); err != nil {
		return nil, err
	}
	return overwritten, nil
}

// Run is one ggml graph compute; it returns when the results are in the
// output buffers. DeviceTime is the host time of the compute.
func (p *program) Run(args []backend.Buffer) (backend.RunInfo, error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if profiling {
		return p.runProfiled(args)
	}
	return p.run(args)
}

// run is Run with the device lock held.
func (p *program) run(args []backend.Buffer) (backend.RunInfo, error) {
	t0 := time.Now()
	overwritten, err := p.bind(args)
	if err != nil {
		return backend.RunInfo{}, err
	}
	start := time.Now()
	st := C.ggml_backend_graph_compute(p.d.be, p.l.gf)
	el := time.Since(start)
	stats.runs.Add(1)
	stats.bindNs.Add(int64(start.Sub(t0)))
	stats.computeNs.Add(int64(el))
	if st != C.GGML_STATUS_SUCCESS {
		return backend.RunInfo{}, fmt.Errorf("native: %s Run: ggml_backend_graph_compute failed with status %d", p.d.name, int(st))
	}
	for _, b := range overwritten {
		b.dirty = false
	}
	return backend.RunInfo{DeviceTime: el, Launches: 1}, nil
}

func (p *program) Release() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.release()
}

func (p *program) release() {
	if p.released {
		return
	}
	p.released = true
	if p.d.keeps() {
		return
	}
	if p.galloc != nil {
		C.ggml_gallocr_free(p.galloc)
	}
	if p.cbuf != nil {
		C.ggml_backend_buffer_free(p.cbuf)
	}
	p.l.free()
	if p.sctx != nil {
		C.ggml_free(p.sctx)
	}
	for _, a := range []**C.struct_ggml_tensor{p.leaves, p.srcs, p.views} {
		if a != nil {
			C.free(unsafe.Pointer(a))
		}
	}
}

// fillRands computes the host-filled rand_uniform values (see randLeaf)
// from their state args, before the graph runs: each state is read once,
// and each value is filled by all cores in chunks (a transformer's dropout
// masks are millions of values a step).
func (p *program) fillRands(args []backend.Buffer) error {
	states := map[int]*[backend.RandStateLen]float32{}
	for _, r := range p.l.rands {
		st := states[r.arg]
		if st == nil {
			b, err := p.d.own("Run", args[r.arg])
			if err != nil {
				return fmt.Errorf("%w (the state of a rand_uniform, arg %d)", err, r.arg)
			}
			st = new([backend.RandStateLen]float32)
			if b.n < len(st) {
				return fmt.Errorf("native: %s Run: rand_uniform state arg %d holds %d values, want %d", p.d.name, r.arg, b.n, len(st))
			}
			if !b.dirty { // a dirty buffer reads as zeros
				C.ggml_backend_tensor_get(b.t, unsafe.Pointer(&st[0]), 0, C.size_t(4*len(st)))
			}
			states[r.arg] = st
		}
		n := int(C.ggml_nelements(r.t))
		if cap(p.randBuf) < n {
			p.randBuf = make([]float32, n)
		}
		vals := p.randBuf[:n]
		fillParallel(vals, st, r.start)
		C.ggml_backend_tensor_set(r.t, unsafe.Pointer(&vals[0]), 0, C.size_t(4*n))
	}
	return nil
}

// randChunk is the least a goroutine of fillParallel fills (Philox's cost
// per value is small: below this, starting goroutines costs more).
const randChunk = 1 << 16

// fillParallel fills vals with the draw of state st at counter offset start,
// in chunks of a multiple of 4 values (one Philox block) across the cores.
func fillParallel(vals []float32, st *[backend.RandStateLen]float32, start uint64) {
	n := len(vals)
	workers := min(runtime.GOMAXPROCS(0), (n+randChunk-1)/randChunk)
	if workers <= 1 {
		C.ag_rand_uniform_fill((*C.float)(unsafe.Pointer(&vals[0])), 0, C.int64_t(n), (*C.float)(unsafe.Pointer(&st[0])), C.uint64_t(start))
		return
	}
	per := (n/workers + 3) &^ 3
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			C.ag_rand_uniform_fill((*C.float)(unsafe.Pointer(&vals[lo])), C.int64_t(lo), C.int64_t(hi), (*C.float)(unsafe.Pointer(&st[0])), C.uint64_t(start))
		}(lo, hi)
	}
	wg.Wait()
}
