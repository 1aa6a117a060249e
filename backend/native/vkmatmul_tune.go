//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Which of ggml's mul_mat and patch 0019's kernel runs an f32 product
// faster depends on the GPU, its driver and the product's shape (ggml's
// wants both operands contiguous along K, ag's reads them as a forward
// pass stores them; their tiles fill a GPU's SMs differently), so on a GPU
// each product is timed on both, once per shape and device, and runs on
// the faster: the choice is measured where it is made, as cuBLASLt's
// heuristics and tinygrad's BEAM search are, not a constant tuned on one
// card. Both kernels are exact against float64 on the probe's values, so
// the pick changes speed and the order of f32 sums, nothing else; a
// process that must repeat another's sums bit for bit sets
// AG_GGML_MATMUL=ggml or ag. A stored [M, K] is timed both as read where
// it is, each tile transposed into shared memory, and as a transposed copy
// first; a product of few tiles also with K split into twice the parts.

// mmKey is one f32 product as matMul meets it: M x N outputs over K,
// batches b2 x b3 (ggml dims 2 and 3), A and B stored transposed or not.
type mmKey struct {
	M, N, K, b2, b3 int
	transA, transB  bool
}

func (k mmKey) work() int64 {
	return int64(k.M) * int64(k.N) * int64(k.K) * int64(k.b2) * int64(k.b3)
}

func (k mmKey) String() string {
	a, b := "[M, K]", "[K, N]"
	if k.transA {
		a = "[K, M]"
	}
	if k.transB {
		b = "[N, K]"
	}
	s := fmt.Sprintf("%dx%dx%d (M x N x K, A stored %s, B %s", k.M, k.N, k.K, a, b)
	if n := k.b2 * k.b3; n > 1 {
		s += fmt.Sprintf(", %d batches", n)
	}
	return s + ")"
}

// mmChoice is tunedMatmul's measurement of one product: each candidate
// kernel's fastest of tuneRuns runs (by plan; none where nothing was
// timed, and why) and the pick.
type mmChoice struct {
	pick  mmPlan
	cands []mmPlan // in the order timed
	t     map[mmPlan]time.Duration
	why   string
}

const (
	// tuneWork is about how many multiply-adds one timed graph computes
	// (the product repeated up to tuneMaxReps times): ~4 GFLOP, 0.1-0.2
	// ms on an H100, so that a graph compute's own cost (recording,
	// submitting, waiting: tens of microseconds, the same for all)
	// weighs little.
	tuneWork    = 1 << 31
	tuneMaxReps = 16
	// tuneMaxBytes bounds the device memory the candidates' graphs take
	// together (freed after); a product too large for one of each stays
	// on ggml's mul_mat.
	tuneMaxBytes = 1 << 30
	// tuneRuns is how many timed runs of each graph count, taken in
	// turns after one untimed run of each (ggml-vulkan compiles a
	// pipeline at its first use).
	tuneRuns = 3
	// tuneMargin: ag's kernel is picked only when it takes at most this
	// share of ggml's time, so that two kernels within the noise do not
	// change places from one process to the next.
	tuneMargin = 0.95
	// tuneSplitTiles: products of fewer tiles (times vkMatmulSplits'
	// parts) are also timed with K in twice as many parts: up to about
	// four waves on a GPU of 132 SMs, where the last wave's share idles.
	tuneSplitTiles = 4 * vkMatmulTarget
	// tuneSlow: a candidate's first run longer than this leaves one timed
	// run of each (a GPU runs a graph of tuneWork in well under 10 ms).
	tuneSlow = 50 * time.Millisecond
	// tuneNodesPerRep bounds the ggml tensors one repetition of one
	// kernel's product makes (copies, views, splits of K and their sums).
	tuneNodesPerRep = 32
)

// tunedMatmul is the plan of product k: the fastest in tuneMatmul's
// timing, made once per product (Compile holds d.mu).
func (d *device) tunedMatmul(k mmKey) mmPlan {
	if c, ok := d.mmTuned[k]; ok {
		return c.pick
	}
	c := d.tuneMatmul(k)
	if d.mmTuned == nil {
		d.mmTuned = map[mmKey]mmChoice{}
	}
	d.mmTuned[k] = c
	if l := os.Getenv(LogEnv); l == "debug" || l == "info" {
		if c.why != "" {
			fmt.Fprintf(os.Stderr, "native: %s: f32 product %v: %s: %v\n", d.name, k, c.why, c.pick)
		} else {
			var times []string
			for _, p := range c.cands {
				times = append(times, fmt.Sprintf("%v %v", p, c.t[p]))
			}
			fmt.Fprintf(os.Stderr, "native: %s: f32 product %v: %s: %v\n", d.name, k, strings.Join(times, ", "), c.pick)
		}
	}
	return c.pick
}

// tuneCandidates are the plans tuneMatmul times for product k: ggml's
// mul_mat; ag's kernel (on a transposed copy of A too, where A is stored
// [M, K] with K a multiple of 4); and, where vkMatmulSplits leaves fewer
// than tuneSplitTiles tiles, each with K in twice as many parts (more
// workgroups to fill a GPU whose tiles would run in a wave and a part).
func tuneCandidates(k mmKey) []mmPlan {
	kerns := []mmKernel{mmAG}
	if !k.transA && k.K%4 == 0 {
		kerns = append(kerns, mmAGCopy)
	}
	batches := k.b2 * k.b3
	parts := vkMatmulSplits(k.M, k.N, k.K, batches)
	tiles := ceilDiv(k.M, vkMatmulTile) * ceilDiv(k.N, vkMatmulTile) * batches
	s := 2 * parts
	split := tiles*parts < tuneSplitTiles && s <= vkMatmulMaxSplit && k.K/s >= vkMatmulMinK/2 &&
		int64(batches)*int64(s)*int64(k.M)*int64(k.N) < 1<<31
	plans := []mmPlan{{kern: mmGGML}}
	for _, kern := range kerns {
		plans = append(plans, mmPlan{kern: kern})
		if split {
			plans = append(plans, mmPlan{kern: kern, split: s})
		}
	}
	return plans
}

// tuneMatmul times product k on each candidate kernel: operands of its
// shape (zeros: no kernel's time depends on the values), the product
// lowered as matMul lowers it (transposed copies and splits of K
// included) with the kernel forced, repeated to about tuneWork
// multiply-adds per graph, each graph's fastest of tuneRuns host-clocked
// computes, the graphs in turns.
func (d *device) tuneMatmul(k mmKey) mmChoice {
	cands := tuneCandidates(k)
	batches := k.b2 * k.b3
	parts := 2 * vkMatmulSplits(k.M, k.N, k.K, batches) // a split candidate's at most
	in := 4 * int64(batches) * (int64(k.M)*int64(k.K) + int64(k.K)*int64(k.N))
	// per repetition and kernel, at most: transposed copies of both
	// operands, the partial products and the result
	per := in + 4*int64(batches)*int64(parts+1)*int64(k.M)*int64(k.N)
	bytes := func(reps int) int64 { return in + int64(len(cands)*reps)*per }
	reps := int(min(tuneMaxReps, max(1, tuneWork/max(k.work(), 1))))
	if d.software {
		reps = 1 // tuned only when asked (tests): a CPU's seconds per graph say nothing of a GPU's
	}
	for reps > 1 && bytes(reps) > tuneMaxBytes {
		reps--
	}
	if bytes(reps) > tuneMaxBytes {
		return mmChoice{pick: mmPlan{kern: mmGGML}, why: fmt.Sprintf("not timed: the candidates' graphs would take %d bytes, more than %d", bytes(reps), tuneMaxBytes)}
	}
	nodes := 2 + len(cands)*reps*tuneNodesPerRep
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(nodes)*C.ggml_tensor_overhead() + C.size_t(len(cands))*C.ggml_graph_overhead(), no_alloc: true})
	if ctx == nil {
		return mmChoice{pick: mmPlan{kern: mmGGML}, why: "not timed: ggml_init failed"}
	}
	defer C.ggml_free(ctx)
	ne := func(rows, cols int) tensor { // a row-major [rows, cols] per batch
		return C.ggml_new_tensor_4d(ctx, C.GGML_TYPE_F32, C.int64_t(cols), C.int64_t(rows), C.int64_t(k.b2), C.int64_t(k.b3))
	}
	a, b := ne(k.M, k.K), ne(k.K, k.N)
	if k.transA {
		a = ne(k.K, k.M)
	}
	if k.transB {
		b = ne(k.N, k.K)
	}
	l := &lowering{d: d, ctx: ctx, cctx: ctx}
	graphs := make([]*C.struct_ggml_cgraph, len(cands))
	for c, plan := range cands {
		l.mm = plan
		gf := C.ggml_new_graph(ctx)
		for range reps {
			l.tmemo = nil // each repetition makes its own copies, as a step's products do
			C.ggml_build_forward_expand(gf, l.matMul(a, b, k.transA, k.transB, false))
		}
		for i := range int(C.ggml_graph_n_nodes(gf)) {
			if !C.ggml_backend_supports_op(d.be, C.ggml_graph_node(gf, C.int(i))) {
				return mmChoice{pick: mmPlan{kern: mmGGML}, why: fmt.Sprintf("not timed: the device refuses a node of %v's graph", plan)}
			}
		}
		graphs[c] = gf
	}
	buf := C.ggml_backend_alloc_ctx_tensors(ctx, d.be)
	if buf == nil {
		return mmChoice{pick: mmPlan{kern: mmGGML}, why: fmt.Sprintf("not timed: allocating about %d bytes on the device failed", bytes(reps))}
	}
	defer d.freeProbe(buf)
	C.ggml_backend_buffer_clear(buf, 0)
	c := mmChoice{pick: mmPlan{kern: mmGGML}, cands: cands, t: map[mmPlan]time.Duration{}}
	runs := tuneRuns
	for run := 0; run <= runs; run++ {
		for i, gf := range graphs {
			t0 := time.Now()
			st := C.ggml_backend_graph_compute(d.be, gf) // returns when the device is done
			el := time.Since(t0)
			if st != C.GGML_STATUS_SUCCESS {
				return mmChoice{pick: mmPlan{kern: mmGGML}, why: fmt.Sprintf("not timed: %v's graph compute failed (status %d)", cands[i], int(st))}
			}
			// the first run compiles pipelines and warms caches
			if t, ok := c.t[cands[i]]; run > 0 && (!ok || el < t) {
				c.t[cands[i]] = el
			}
			if run == 0 && el > tuneSlow {
				runs = 1 // a device this slow is not a GPU worth three runs
			}
		}
	}
	ggml := mmPlan{kern: mmGGML}
	best := c.t[ggml]
	for _, p := range cands[1:] {
		if t := c.t[p]; float64(t) <= tuneMargin*float64(c.t[ggml]) && t < best {
			c.pick, best = p, t
		}
	}
	return c
}
