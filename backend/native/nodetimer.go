//go:build ggml

package native

/*
#include <stdlib.h>
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/ag-go/ag/backend"
)

var _ backend.NodeTimer = (*program)(nil)

// segment is one ggml node that does work, as a sub-graph of its own for
// RunTimed, and the IR node that produced it.
type segment struct {
	gf    *C.struct_ggml_cgraph
	owner int    // IR node index
	op    string // ggml op (for the profile)
}

// segments splits the graph into one sub-graph per ggml node that does
// work, made once (the first RunTimed) in a context of their own. Output
// copies belong to the IR node whose value they copy.
func (p *program) segments() ([]segment, error) {
	if p.segs != nil {
		return p.segs, nil
	}
	l := p.l
	nn := int(C.ggml_graph_n_nodes(l.gf))
	if p.sctx == nil {
		mem := C.size_t(nn+1) * C.ggml_graph_overhead_custom(1, false)
		p.sctx = C.ggml_init(C.struct_ggml_init_params{mem_size: mem, no_alloc: true})
		if p.sctx == nil {
			return nil, fmt.Errorf("ggml_init of %d bytes for %d sub-graphs failed", mem, nn)
		}
	}
	owner := func(k int) int {
		for i, end := range l.nodeEnd {
			if k < end {
				return i
			}
		}
		for _, c := range l.copies {
			if k < c.end {
				return c.node
			}
		}
		return len(l.g.Nodes) - 1
	}
	var segs []segment
	for k := 0; k < nn; k++ {
		t := C.ggml_graph_node(l.gf, C.int(k))
		if noOp(t) {
			continue // computes nothing on either device
		}
		gf := C.ggml_new_graph_custom(p.sctx, 1, false)
		C.ggml_graph_add_node(gf, t)
		segs = append(segs, segment{gf: gf, owner: owner(k), op: opLabel(t)})
	}
	p.segs = segs
	return segs, nil
}

// noOp reports whether a ggml node only describes memory (no compute).
func noOp(t tensor) bool {
	switch t.op {
	case C.GGML_OP_NONE, C.GGML_OP_VIEW, C.GGML_OP_RESHAPE, C.GGML_OP_PERMUTE, C.GGML_OP_TRANSPOSE:
		return true
	}
	return false
}

// calibrateEvery is how often (in RunTimed calls of a program) RunTimed
// measures each kernel again, in calibrateRuns consecutive runs whose
// fastest time of each kernel counts: one run alone can catch a kernel
// cold or descheduled.
const (
	calibrateEvery = 128
	calibrateRuns  = 3
)

// RunTimed times the IR nodes by the shared scheme (backend.NodeClock).
// On ggml-cpu every run is timed kernel by kernel inside the real graph
// compute (runClocked). Elsewhere (Vulkan) a run is as Run - one graph
// compute, the real launch count, so a profiled step costs what an
// unprofiled one does - its time shared among the IR nodes by costs
// measured per kernel (TimeEstimated). The costs come from calibration
// runs (the second RunTimed of a program, after first use, and every
// calibrateEvery-th after it), which compute the graph one ggml node at a
// time, each timed by the host clock alone (calibrate; backend.Calibration's
// Lone says how such times are read).
func (p *program) RunTimed(args []backend.Buffer, t *backend.NodeTimes) (backend.RunInfo, error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if err := t.Check("native."+p.d.name+".RunTimed", len(p.l.g.Nodes)); err != nil {
		return backend.RunInfo{}, err
	}
	if p.clock == nil {
		cal := backend.EveryRun
		var planned []int
		if !p.d.isCPU {
			cal = backend.Calibration{Every: calibrateEvery, Runs: calibrateRuns, WarmUp: true, Lone: true}
			for _, s := range p.segsOrNil() {
				planned = append(planned, s.owner)
			}
		}
		p.clock = backend.NewNodeClock(p.l.g, cal, planned, nil)
	}
	return p.clock.Run(t, p, args)
}

// TimeKernels is a calibration run (backend.Kernels): runClocked on
// ggml-cpu, else calibrate. Called with the device's lock held.
func (p *program) TimeKernels(args []backend.Buffer, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	if p.d.isCPU {
		return p.runClocked(args, ks)
	}
	return p.calibrate(args, ks)
}

// RunWhole is a plain run (backend.Kernels), with the device's lock held.
func (p *program) RunWhole(args []backend.Buffer) (backend.RunInfo, error) { return p.run(args) }

// segsOrNil returns the program's segments (nil if they cannot be made).
func (p *program) segsOrNil() []segment {
	segs, _ := p.segments()
	return segs
}

// calibrate computes the graph node by node, each ggml node timed alone.
func (p *program) calibrate(args []backend.Buffer, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	segs, err := p.segments()
	if err != nil {
		return nil, backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %w", p.d.name, err)
	}
	if len(segs) == 0 {
		info, err := p.run(args)
		return nil, info, err
	}
	times := make([]time.Duration, len(segs))
	info, err := p.runSegments(args, segs, times)
	if err != nil {
		return nil, info, err
	}
	for i, s := range segs {
		ks = append(ks, backend.KernelTime{Node: s.owner, Dur: times[i]})
	}
	return ks, info, nil
}

// runSegments binds args and computes segs in order, timing each.
func (p *program) runSegments(args []backend.Buffer, segs []segment, times []time.Duration) (backend.RunInfo, error) {
	overwritten, err := p.bind(args)
	if err != nil {
		return backend.RunInfo{}, err
	}
	var total time.Duration
	for i, s := range segs {
		t0 := time.Now()
		st := C.ggml_backend_graph_compute(p.d.be, s.gf)
		times[i] = time.Since(t0)
		total += times[i]
		if st != C.GGML_STATUS_SUCCESS {
			return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: ggml_backend_graph_compute of node %s failed with status %d", p.d.name, s.op, int(st))
		}
	}
	for _, b := range overwritten {
		b.dirty = false
	}
	return backend.RunInfo{DeviceTime: total, Launches: len(segs)}, nil
}

// profileEnv, when set to 1, makes every Run compute node by node (as
// RunTimed does) and print, after 8, 16, 32, ... runs of a program, the
// average time per run of each ggml op type to stderr (the first run
// left out).
const profileEnv = "AG_GGML_PROFILE"

// profiling reports whether Run should profile (see profileEnv).
var profiling = os.Getenv(profileEnv) == "1"

// opProfile accumulates a program's per-op time under profileEnv.
type opProfile struct {
	runs  int
	warm  int // runs seen, the first one not counted
	byOp  map[string]time.Duration
	count map[string]int
}

// runProfiled is Run under profileEnv.
func (p *program) runProfiled(args []backend.Buffer) (backend.RunInfo, error) {
	segs, err := p.segments()
	if err != nil {
		return backend.RunInfo{}, fmt.Errorf("native: %s Run: %w", p.d.name, err)
	}
	times := make([]time.Duration, len(segs))
	info, err := p.runSegments(args, segs, times)
	if err != nil {
		return info, err
	}
	pr := &p.prof
	if pr.warm++; pr.warm == 1 {
		return info, nil // the first run faults in the intermediates' pages
	}
	if pr.byOp == nil {
		pr.byOp, pr.count = map[string]time.Duration{}, map[string]int{}
	}
	pr.runs++
	for i, s := range segs {
		pr.byOp[s.op] += times[i]
		if pr.runs == 1 {
			pr.count[s.op]++
		}
	}
	if pr.runs >= 8 && pr.runs&(pr.runs-1) == 0 {
		fmt.Fprintf(os.Stderr, "native: %s profile of a %d-node program, mean of %d runs:\n%s", p.d.name, len(p.l.g.Nodes), pr.runs, pr.table())
	}
	return info, nil
}

// table lists the ops by total time, longest first.
func (pr *opProfile) table() string {
	ops := make([]string, 0, len(pr.byOp))
	var total time.Duration
	for op, d := range pr.byOp {
		ops = append(ops, op)
		total += d
	}
	sort.Slice(ops, func(i, j int) bool { return pr.byOp[ops[i]] > pr.byOp[ops[j]] })
	var b strings.Builder
	n := time.Duration(pr.runs)
	for _, op := range ops {
		fmt.Fprintf(&b, "  %-28s %3d nodes %9.3f ms\n", op, pr.count[op], float64(pr.byOp[op]/n)/1e6)
	}
	fmt.Fprintf(&b, "  %-28s %13s %9.3f ms\n", "total", "", float64(total/n)/1e6)
	return b.String()
}

// opLabel names a node's op for the profile, with the shapes where they
// tell nodes of one op apart: a matmul's M x N x K, a copy's size and
// whether its source is a transpose.
func opLabel(t tensor) string {
	name := C.GoString(C.ggml_op_desc(t))
	switch t.op {
	case C.GGML_OP_MUL_MAT:
		return fmt.Sprintf("%s[%dx%dx%d]", name, t.ne[1]*t.ne[2]*t.ne[3], t.ne[0], t.src[0].ne[0])
	case C.GGML_OP_CONT, C.GGML_OP_CPY, C.GGML_OP_OPT_STEP_ADAMW, C.GGML_OP_CUSTOM:
		if !bool(C.ggml_is_contiguous(t.src[0])) {
			name += "(strided)"
		}
		if t.op == C.GGML_OP_CUSTOM {
			name = "TRANSPOSE(custom)"
			if own := C.GoString(&t.name[0]); strings.HasSuffix(own, "(custom)") {
				name = own // named where it is made (ag_rand_uniform_op)
			} else if t.src[1] != nil {
				name = fmt.Sprintf("MATMUL_TN(custom)[%dx%dx%d]", t.ne[1], t.ne[0], t.src[0].ne[1])
			}
		}
		return fmt.Sprintf("%s[%d]", name, C.ggml_nelements(t))
	}
	return name
}

// runClocked is RunTimed on ggml-cpu: the real graph compute, with the
// backend's abort callback reading the clock as thread 0 ends each
// non-empty node (ag_node_clock), so every kernel is measured inside the
// run that counts - its barrier with the other threads included, one
// launch, no calibration. A node's time runs from the previous node's end
// on thread 0 to its own, so a wait at the barrier for the other threads
// goes to the node after it.
func (p *program) runClocked(args []backend.Buffer, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	segs, err := p.segments()
	if err != nil {
		return nil, backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %w", p.d.name, err)
	}
	n := len(segs) + 1
	mem := C.calloc(C.size_t(n), 8)
	clk := (*C.ag_node_clock)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ag_node_clock{}))))
	if mem == nil || clk == nil {
		C.free(mem)
		C.free(unsafe.Pointer(clk))
		return nil, backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: allocating %d clock readings failed", p.d.name, n)
	}
	defer C.free(mem)
	defer C.free(unsafe.Pointer(clk))
	clk.ts, clk.cap = (*C.int64_t)(mem), C.int(n)
	overwritten, err := p.bind(args)
	if err != nil {
		return nil, backend.RunInfo{}, err
	}
	C.ag_node_clock_start(clk)
	C.ggml_backend_cpu_set_abort_callback(p.d.be, C.ggml_abort_callback(C.ag_node_clock_cb), unsafe.Pointer(clk))
	st := C.ggml_backend_graph_compute(p.d.be, p.l.gf)
	C.ggml_backend_cpu_set_abort_callback(p.d.be, nil, nil)
	if st != C.GGML_STATUS_SUCCESS {
		return nil, backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: ggml_backend_graph_compute failed with status %d", p.d.name, int(st))
	}
	for _, b := range overwritten {
		b.dirty = false
	}
	ts := unsafe.Slice((*int64)(mem), n)
	if int(clk.n) != n {
		return nil, backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %d node clock readings for %d kernels (the graph's nodes and its kernels disagree)", p.d.name, int(clk.n)-1, len(segs))
	}
	for k, s := range segs {
		ks = append(ks, backend.KernelTime{Node: s.owner, Dur: time.Duration(ts[k+1] - ts[k])})
	}
	return ks, backend.RunInfo{DeviceTime: time.Duration(ts[n-1] - ts[0]), Launches: 1}, nil
}
