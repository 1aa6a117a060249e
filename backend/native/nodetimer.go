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
	"slices"
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
// cold or descheduled (on a 16-core ggml-cpu a lone product once took
// twice its time and 92% of the run where it has 45%).
const (
	calibrateEvery = 128
	calibrateRuns  = 3
)

// RunTimed runs the graph as Run does - one graph compute, the real launch
// count, so a profiled step costs what an unprofiled one does - and splits
// its measured time among the IR nodes by costs measured per kernel
// (TimeEstimated). The costs come from a calibration run: the first
// RunTimed of a program, and every calibrateEvery-th after it, computes the
// graph one ggml node at a time, each timed by the host clock, and reports
// those times (TimeMeasured). A kernel timed alone carries the fixed cost
// of a graph compute (a submit and wait on Vulkan), which the cheapest
// kernel's time stands for and which is taken off each; a kernel inside a
// graph has a smaller cost of its own (a barrier, a launch), which every
// later run estimates from its measured total: what the kernels' work does
// not explain, spread evenly over the kernels.
func (p *program) RunTimed(args []backend.Buffer, t *backend.NodeTimes) (backend.RunInfo, error) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if err := t.Check("native."+p.d.name+".RunTimed", len(p.l.g.Nodes)); err != nil {
		return backend.RunInfo{}, err
	}
	if p.d.isCPU {
		return p.runClocked(args, t)
	}
	runs := p.timedRuns
	p.timedRuns++
	if k := runs % calibrateEvery; k >= 1 && k <= calibrateRuns {
		return p.calibrate(args, t, k == 1)
	}
	info, err := p.run(args)
	if err != nil {
		return info, err
	}
	if p.work == nil {
		// The first run of a program pays for first use (pipelines, page
		// faults), so calibration waits for the second; until then the
		// nodes' shares come from their costs.
		p.work = make([]float64, len(p.l.g.Nodes))
		p.kernels = make([]int, len(p.l.g.Nodes))
		for _, s := range p.segsOrNil() {
			p.work[s.owner] += backend.NodeCost(p.l.g, s.owner)
			p.kernels[s.owner]++
		}
		defer func() { p.work = nil }()
	}
	var work float64
	kernels := 0
	for i, w := range p.work {
		work += w
		kernels += p.kernels[i]
	}
	whole := float64(info.DeviceTime)
	// A kernel's own cost inside the graph, from the quickest run since the
	// calibration: a run slowed by something else (another process, a
	// page fault) must not make every small kernel look slow.
	if p.minWhole == 0 || whole < p.minWhole {
		p.minWhole = whole
	}
	each := max(p.minWhole-work, 0) / float64(max(kernels, 1))
	total := work + each*float64(kernels)
	if total <= 0 {
		return info, nil
	}
	for i, w := range p.work {
		if p.kernels[i] > 0 {
			t.Dur[i] = time.Duration(whole * (w + each*float64(p.kernels[i])) / total)
			t.How[i] = backend.TimeEstimated
		}
	}
	return info, nil
}

// segsOrNil returns the program's segments (nil if they cannot be made).
func (p *program) segsOrNil() []segment {
	segs, _ := p.segments()
	return segs
}

// calibrate computes the graph node by node, reports each IR node's time
// as measured, and keeps each one's work (see segWork; from its kernels'
// fastest times over the calibration's runs, first starting them) for the
// runs after it.
func (p *program) calibrate(args []backend.Buffer, t *backend.NodeTimes, first bool) (backend.RunInfo, error) {
	segs, err := p.segments()
	if err != nil {
		return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %w", p.d.name, err)
	}
	if len(segs) == 0 {
		return p.run(args)
	}
	times := make([]time.Duration, len(segs))
	info, err := p.runSegments(args, segs, times)
	if err != nil {
		return info, err
	}
	if first || len(p.segBest) != len(times) {
		p.segBest = slices.Clone(times)
	}
	for i, d := range times {
		p.segBest[i] = min(p.segBest[i], d)
	}
	p.work = make([]float64, len(p.l.g.Nodes))
	p.kernels = make([]int, len(p.l.g.Nodes))
	p.minWhole = 0
	now, nowTimed := p.segWork(segs, times)
	best, _ := p.segWork(segs, p.segBest)
	for i, s := range segs {
		t.Dur[s.owner] += time.Duration(now[i]) + 1 // 1 ns: a kernel that ran has a time
		if nowTimed[i] && t.How[s.owner] != backend.TimeEstimated {
			t.How[s.owner] = backend.TimeMeasured
		} else {
			t.How[s.owner] = backend.TimeEstimated
		}
		p.work[s.owner] += best[i]
		p.kernels[s.owner]++
	}
	return info, nil
}

// segWork is each segment's work (ns) from its time computed alone: the
// time less the fixed cost of a lone graph compute, which the cheapest
// kernel stands for (a thread-pool wake on ggml-cpu, a submit and wait on
// Vulkan; inside the real graph a kernel does not pay it). A kernel whose
// time exceeds that fixed cost by less than the fixed cost itself, or on
// ggml-cpu by less than cpuJitter, is too small to time this way (on
// ggml-cpu the wake alone varies by tens of microseconds, and 24 tiny adds
// came out as a third of a 2 ms product): its work is its backend.NodeCost
// at the rate the timed kernels ran, and timed reports false for it.
// cpuJitter is how much the cost of a lone ggml-cpu graph compute varies
// from one compute to the next (a thread-pool wake): kernels that take less
// beyond it are not timed alone (see segWork).
const cpuJitter = 50 * time.Microsecond

func (p *program) segWork(segs []segment, times []time.Duration) (work []float64, timed []bool) {
	fixed := slices.Min(times)
	perOwner := map[int]int{}
	for _, s := range segs {
		perOwner[s.owner]++
	}
	cost := func(s segment) float64 {
		return backend.NodeCost(p.l.g, s.owner) / float64(perOwner[s.owner])
	}
	var bigWork, bigCost float64
	timed = make([]bool, len(segs))
	for i, s := range segs {
		if over := times[i] - fixed; fixed > 0 && over >= fixed && (!p.d.isCPU || over >= cpuJitter) {
			timed[i] = true
			bigWork += float64(times[i] - fixed)
			bigCost += cost(s)
		}
	}
	work = make([]float64, len(segs))
	for i, s := range segs {
		switch {
		case timed[i] || bigCost == 0:
			work[i] = float64(times[i] - fixed)
		default:
			work[i] = cost(s) * bigWork / bigCost
		}
	}
	return work, timed
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
func (p *program) runClocked(args []backend.Buffer, t *backend.NodeTimes) (backend.RunInfo, error) {
	segs, err := p.segments()
	if err != nil {
		return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %w", p.d.name, err)
	}
	n := len(segs) + 1
	mem := C.calloc(C.size_t(n), 8)
	clk := (*C.ag_node_clock)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ag_node_clock{}))))
	if mem == nil || clk == nil {
		C.free(mem)
		C.free(unsafe.Pointer(clk))
		return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: allocating %d clock readings failed", p.d.name, n)
	}
	defer C.free(mem)
	defer C.free(unsafe.Pointer(clk))
	clk.ts, clk.cap = (*C.int64_t)(mem), C.int(n)
	overwritten, err := p.bind(args)
	if err != nil {
		return backend.RunInfo{}, err
	}
	C.ag_node_clock_start(clk)
	C.ggml_backend_cpu_set_abort_callback(p.d.be, C.ggml_abort_callback(C.ag_node_clock_cb), unsafe.Pointer(clk))
	st := C.ggml_backend_graph_compute(p.d.be, p.l.gf)
	C.ggml_backend_cpu_set_abort_callback(p.d.be, nil, nil)
	if st != C.GGML_STATUS_SUCCESS {
		return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: ggml_backend_graph_compute failed with status %d", p.d.name, int(st))
	}
	for _, b := range overwritten {
		b.dirty = false
	}
	ts := unsafe.Slice((*int64)(mem), n)
	if int(clk.n) != n {
		return backend.RunInfo{}, fmt.Errorf("native: %s RunTimed: %d node clock readings for %d kernels (the graph's nodes and its kernels disagree)", p.d.name, int(clk.n)-1, len(segs))
	}
	for k, s := range segs {
		t.Dur[s.owner] += time.Duration(ts[k+1] - ts[k])
		t.How[s.owner] = backend.TimeMeasured
	}
	return backend.RunInfo{DeviceTime: time.Duration(ts[n-1] - ts[0]), Launches: 1}, nil
}
