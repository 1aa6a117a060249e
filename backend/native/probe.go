//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/ag-go/ag/backend"
)

// probeGetRowsBack asks the device whether it runs GGML_OP_GET_ROWS_BACK.
func (d *device) probeGetRowsBack() bool {
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: 8 * C.ggml_tensor_overhead(), no_alloc: true})
	if ctx == nil {
		return false
	}
	defer C.ggml_free(ctx)
	src := C.ggml_new_tensor_2d(ctx, C.GGML_TYPE_F32, 3, 2)
	idx := C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_I32, 2)
	shape := C.ggml_new_tensor_2d(ctx, C.GGML_TYPE_F32, 3, 4)
	return bool(C.ggml_backend_supports_op(d.be, C.ggml_get_rows_back(ctx, src, idx, shape)))
}

// probeUnsupported lowers a sample graph of every op (no device memory, no
// compute) and lists the ops the device cannot run. A composite it cannot
// lower natively leaves Caps.Composites instead: its decomposition runs.
func (d *device) probeUnsupported() []backend.Op {
	var out []backend.Op
	for _, op := range backend.Ops() {
		if op.IsComposite() {
			if !d.caps.Native(op) {
				continue
			}
			if l, err := d.lower(backend.SampleGraph(op)); err == nil {
				l.free()
			} else {
				d.caps.Composites = slices.DeleteFunc(d.caps.Composites, func(o backend.Op) bool { return o == op })
			}
			continue
		}
		g := backend.SampleGraph(op)
		if g == nil {
			out = append(out, op)
			continue
		}
		l, err := d.lower(g)
		if err != nil {
			out = append(out, op)
			continue
		}
		l.free()
	}
	return out
}

// probeClamp reports whether the device's GGML_OP_CLAMP gives what ir.go
// defines: x clamped, NaN staying NaN. ggml's Vulkan shader (patched by
// build.sh's 0004 patch) tests the bits for NaN; this runs it once on the
// device, so a driver that drops the NaN anyway, or a ggml built without
// the patch, makes the lowering keep its NaN flag (see lowering.clamp)
// instead of giving a wrong number.
func (d *device) probeClamp() bool {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	in := []float32{nan, -inf, -1, 0, 0.25, 2, inf, 1, -nan}
	cases := []struct {
		lo, hi float32
		want   []float32
	}{
		{0, 1, []float32{nan, 0, 0, 0, 0.25, 1, 1, 1, nan}},
		{0, inf, []float32{nan, 0, 0, 0, 0.25, 2, inf, 1, nan}},
		{-inf, 0.5, []float32{nan, -inf, -1, 0, 0.25, 0.5, 0.5, 0.5, nan}},
	}
	ops := make([]func(*C.struct_ggml_context, tensor) tensor, len(cases))
	wants := make([][]float32, len(cases))
	for i, c := range cases {
		ops[i] = func(ctx *C.struct_ggml_context, x tensor) tensor {
			return C.ag_clamp_to(ctx, x, C.float(c.lo), C.float(c.hi))
		}
		wants[i] = c.want
	}
	return d.probeUnary(ops, in, wants)
}

// probeStep reports whether the device's step is ggml's (ggml-cpu's):
// [x > 0], 0 for NaN. ggml-vulkan's shader was x >= 0 until build.sh's
// patch 0006; where the device confirms it, [y > 0] is one node (see
// lowering.positive).
func (d *device) probeStep() bool {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	in := []float32{nan, -nan, -inf, -1, float32(math.Copysign(0, -1)), 0, 1e-30, 1, inf}
	step := func(ctx *C.struct_ggml_context, x tensor) tensor { return C.ggml_step(ctx, x) }
	return d.probeUnary([]func(*C.struct_ggml_context, tensor) tensor{step}, in, [][]float32{{0, 0, 0, 0, 0, 0, 1, 1, 1}})
}

// probeSignStep reports whether the device's clamp to an empty interval
// (min > max, which no clamp has) is the sign step of build.sh's patch
// 0007: min where x > 0 (subnormals counted), max where x <= 0, NaN
// staying NaN. Where it is, ReLU's gradient mask is one node (see
// lowering.signMask); where a driver or an unpatched ggml gives anything
// else, it stays three.
func (d *device) probeSignStep() bool {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	neg0, sub := float32(math.Copysign(0, -1)), math.Float32frombits(1)
	in := []float32{nan, -nan, -inf, -1, -sub, neg0, 0, sub, 1e-30, 1, inf}
	sign := func(ctx *C.struct_ggml_context, x tensor) tensor { return C.ag_clamp_to(ctx, x, 1, 0) }
	return d.probeUnary([]func(*C.struct_ggml_context, tensor) tensor{sign}, in, [][]float32{{nan, nan, 0, 0, 0, 0, 0, 1, 1, 1, 1}})
}

// probeUnary computes each of ops on in on the device (one small graph
// compute for all) and reports whether every value is its want's: any NaN
// for a NaN, else equal, a zero's sign included.
func (d *device) probeUnary(ops []func(*C.struct_ggml_context, tensor) tensor, in []float32, wants [][]float32) bool {
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(len(ops)+4)*C.ggml_tensor_overhead() + C.ggml_graph_overhead(), no_alloc: true})
	if ctx == nil {
		return false
	}
	defer C.ggml_free(ctx)
	x := C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_F32, C.int64_t(len(in)))
	gf := C.ggml_new_graph(ctx)
	ys := make([]tensor, len(ops))
	for i, op := range ops {
		ys[i] = op(ctx, x)
		C.ggml_build_forward_expand(gf, ys[i])
		if !C.ggml_backend_supports_op(d.be, ys[i]) {
			return false
		}
	}
	buf := C.ggml_backend_alloc_ctx_tensors(ctx, d.be)
	if buf == nil {
		return false
	}
	defer d.freeProbe(buf)
	C.ggml_backend_tensor_set(x, unsafe.Pointer(&in[0]), 0, C.size_t(4*len(in)))
	if C.ggml_backend_graph_compute(d.be, gf) != C.GGML_STATUS_SUCCESS {
		return false
	}
	got := make([]float32, len(in))
	for i, y := range ys {
		C.ggml_backend_tensor_get(y, unsafe.Pointer(&got[0]), 0, C.size_t(4*len(got)))
		for k, w := range wants[i] {
			if g := got[k]; w != w && g == g || w == w && g != w || w == 0 && math.Signbit(float64(w)) != math.Signbit(float64(g)) {
				return false
			}
		}
	}
	return true
}

// probeDraw reports whether the device draws rand_uniform as the reference
// does (backend.RandUniformFill) through ag_philox_op, build.sh's patch
// 0010: a counter whose low word carries into the high one, an offset, and
// more blocks than one workgroup makes. Where it does, dropout's draws are
// made on the device; elsewhere they are filled on the host (randLeaf).
func (d *device) probeDraw() bool {
	const n, start = 4103, 3 // 1,026 blocks: two rows of workgroups, a partial last block
	key, counter := uint64(0x0123456789abcdef), uint64(1)<<32-2
	got, ok := d.probeRun([][]float32{backend.RandState(key, counter)}, func(ctx *C.struct_ggml_context, in []tensor) tensor {
		return C.ag_philox_op(ctx, in[0], n, 1, 1, 1, start)
	})
	want := make([]float32, n)
	backend.RandUniformFill(want, key, counter, start, 0)
	return ok && slices.Equal(got, want)
}

// probeRun computes one f32 node that build makes from 1-D f32 inputs
// holding ins (with up to probeViews views of them), on the device, and
// returns its values; ok is false where the device refuses the node or
// the compute fails.
func (d *device) probeRun(ins [][]float32, build func(*C.struct_ggml_context, []tensor) tensor) (out []float32, ok bool) {
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(len(ins)+probeViews+2)*C.ggml_tensor_overhead() + C.ggml_graph_overhead(), no_alloc: true})
	if ctx == nil {
		return nil, false
	}
	defer C.ggml_free(ctx)
	ts := make([]tensor, len(ins))
	for i, v := range ins {
		ts[i] = C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_F32, C.int64_t(len(v)))
	}
	y := build(ctx, ts)
	if !C.ggml_backend_supports_op(d.be, y) {
		return nil, false
	}
	gf := C.ggml_new_graph(ctx)
	C.ggml_build_forward_expand(gf, y)
	buf := C.ggml_backend_alloc_ctx_tensors(ctx, d.be)
	if buf == nil {
		return nil, false
	}
	defer d.freeProbe(buf)
	for i, v := range ins {
		C.ggml_backend_tensor_set(ts[i], unsafe.Pointer(&v[0]), 0, C.size_t(4*len(v)))
	}
	if C.ggml_backend_graph_compute(d.be, gf) != C.GGML_STATUS_SUCCESS {
		return nil, false
	}
	out = make([]float32, C.ggml_nelements(y))
	C.ggml_backend_tensor_get(y, unsafe.Pointer(&out[0]), 0, C.size_t(4*len(out)))
	return out, true
}

// probeOp runs build over ins (probeRun) and compares its result with
// op's composite (probeMatches; in the inputs' shapes, shape the
// output's). A device that does not run the nodes says so (probeFailed).
func (d *device) probeOp(probe string, op backend.Op, ins [][]float32, in [][]int, shape []int, build func(*C.struct_ggml_context, []tensor) tensor) bool {
	got, ok := d.probeRun(ins, build)
	if !ok {
		d.probeFailed(probe, "%v: not run (supports_op or the compute failed)", op)
		return false
	}
	return d.probeMatches(probe, op, got, ins, in, shape)
}

// probeViews is how many reshapes a probeRun builder may make.
const probeViews = 4

// probeGeluBack reports whether the device computes gelu_back as one
// silu_back node in the GELU mode of build.sh's patch 0012
// (ag_gelu_back_vk): the composite's numbers within its tolerance, NaN
// where the definition's is (±Inf, NaN), on values past where the gate
// saturates. A driver or a ggml without the patch (whose silu_back is
// SiLU's gradient) keeps the 13-node form.
func (d *device) probeGeluBack() bool {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	xs := []float32{nan, -inf, -1e20, -1e4, -30, -8, -3, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 8, 30, 1e4, 1e20, inf}
	dys := []float32{1, -2.5, 0.75}
	var x, dy []float32
	for _, g := range dys {
		x, dy = append(x, xs...), append(dy, slices.Repeat([]float32{g}, len(xs))...)
	}
	return d.probeOp("probeGeluBack", backend.OpGELUBack, [][]float32{x, dy}, [][]int{{len(x)}}, []int{len(x)}, func(ctx *C.struct_ggml_context, in []tensor) tensor {
		return C.ag_gelu_back_vk(ctx, in[0], in[1])
	})
}

// probeNorm reports whether the device's ggml_norm takes the variance of
// the centred row, as build.sh's patch 0013 makes ggml-vulkan's (and
// ggml-cpu's is): on rows far from 0 for their spread, where E[x^2] -
// E[x]^2 cancels, its numbers are layer norm's within the composite's
// tolerance, and a row holding an infinity or NaN is NaN.
func (d *device) probeNorm() bool {
	x, rows := normProbeRows()
	return d.probeOp("probeNorm", backend.OpLayerNorm, [][]float32{x}, [][]int{{rows, normProbeCols}}, []int{rows, normProbeCols}, func(ctx *C.struct_ggml_context, in []tensor) tensor {
		return C.ggml_norm(ctx, C.ggml_reshape_2d(ctx, in[0], normProbeCols, C.int64_t(rows)), 1e-5)
	})
}

// probeLayerNormBack reports whether the device computes layer norm's
// gradient as one rms_norm_back node in the layer-norm mode of build.sh's
// patch 0013 (ag_layer_norm_back_vk): the composite's numbers within its
// tolerance on the rows of probeNorm, NaN where the definition's is.
func (d *device) probeLayerNormBack() bool {
	x, rows := normProbeRows()
	dy := make([]float32, len(x))
	for i := range dy {
		dy[i] = float32(math.Sin(float64(i)*0.7)) * 3
	}
	dy[normProbeCols+2] = float32(math.Inf(1)) // row 1: NaN
	return d.probeOp("probeLayerNormBack", backend.OpLayerNormBack, [][]float32{x, dy}, [][]int{{rows, normProbeCols}}, []int{rows, normProbeCols}, func(ctx *C.struct_ggml_context, in []tensor) tensor {
		shape := func(t tensor) tensor { return C.ggml_reshape_2d(ctx, t, normProbeCols, C.int64_t(rows)) }
		return C.ag_layer_norm_back_vk(ctx, shape(in[0]), shape(in[1]), 1e-5)
	})
}

// normProbeCols is the row length of the norm probes: longer than a
// workgroup of ggml-vulkan's norm (512), so each lane sums several values.
const normProbeCols = 1000

// normProbeRows are the norm probes' rows: mean 30 and spread 0.5 (the
// one-pass variance is ~1e-4 off, the normalized values ~4e-4: past the
// tolerance), mean 0 and spread 1e3, mean -3 and a NaN, mean 7 and an
// infinity; returned flat with their count.
func normProbeRows() ([]float32, int) {
	params := [][2]float64{{30, 0.5}, {0, 1e3}, {-3, 2}, {7, 1}}
	x := make([]float32, 0, len(params)*normProbeCols)
	for r, p := range params {
		for i := range normProbeCols {
			x = append(x, float32(p[0]+p[1]*math.Cos(float64(i*(r+3))*0.37)))
		}
	}
	x[2*normProbeCols+5] = float32(math.NaN())
	x[3*normProbeCols+9] = float32(math.Inf(-1))
	return x, len(params)
}

// probeMatches reports whether got holds op's values (A = 1e-5) over ins,
// of shapes in (one shape: every input's), within the composite's
// tolerance and NaN where the definition's is; probeFailed says where it
// does not.
func (d *device) probeMatches(probe string, op backend.Op, got []float32, ins [][]float32, in [][]int, shape []int) bool {
	c := backend.CompositeOf(op)
	vals, shapes := make([][]float64, len(ins)), make([][]int, len(ins))
	for k, v := range ins {
		vals[k], shapes[k] = make([]float64, len(v)), in[min(k, len(in)-1)]
		for i, e := range v {
			vals[k][i] = float64(e)
		}
	}
	want := make([]float64, backend.NumElems(shape))
	if len(got) != len(want) {
		d.probeFailed(probe, "%v: %d values, want %d", op, len(got), len(want))
		return false
	}
	n := backend.Node{Op: op, Shape: shape, A: 1e-5}
	c.Eval(&n, vals, shapes, want)
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && g != w && !(math.Abs(g-w) <= c.Tol[0]+c.Tol[1]*math.Abs(w)) { // g == w: infinities
			d.probeFailed(probe, "%v [%d]: got %g, want %g", op, i, g, w)
			return false
		}
	}
	return true
}

// probeMaxPoolBack reports whether the device's ggml_pool_2d_back (a max
// pool's input gradient: build.sh's patch 0014 on ggml-vulkan) gives
// backend.OpMaxPool2dBack's values on a padded, overlapping window over
// ties, ±0, subnormals of two sizes, infinities, NaN and a window of -Inf
// whose first place is padding (its share dropped). The gradients are
// small whole numbers, so every sum is exact; a NaN or infinite gradient
// reaches its element alone.
func (d *device) probeMaxPoolBack() bool {
	w := backend.Window{KH: 3, KW: 2, SH: 2, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1}
	xs := []int{1, 2, 5, 6}
	oh, ow := w.Out(xs[2], xs[3])
	gs := []int{1, 2, oh, ow}
	x := make([]float32, backend.NumElems(xs))
	for i := range x {
		x[i] = float32((i*7)%5 - 2) // ties in most windows
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x[0], x[6] = -inf, -inf // rows 0 and 1 of column 0: window (0, 0) holds only -Inf
	x[9], x[10] = float32(math.Copysign(0, -1)), 0
	x[21], x[22] = math.Float32frombits(1), math.Float32frombits(2)
	x[30+14], x[30+15] = nan, 3
	x[30+26] = inf
	g := make([]float32, backend.NumElems(gs))
	for i := range g {
		g[i] = float32(i%7 - 3)
	}
	g[5], g[oh*ow+8] = inf, nan
	got, ok := d.probeRun([][]float32{x, g}, func(ctx *C.struct_ggml_context, in []tensor) tensor {
		xt := C.ggml_reshape_4d(ctx, in[0], C.int64_t(xs[3]), C.int64_t(xs[2]), C.int64_t(xs[1]), C.int64_t(xs[0]))
		gt := C.ggml_reshape_4d(ctx, in[1], C.int64_t(ow), C.int64_t(oh), C.int64_t(gs[1]), C.int64_t(gs[0]))
		return C.ggml_pool_2d_back(ctx, gt, xt, C.GGML_OP_POOL_MAX, C.int(w.KW), C.int(w.KH), C.int(w.SW), C.int(w.SH), C.float(w.PW), C.float(w.PH))
	})
	if !ok || len(got) != len(x) {
		return false
	}
	want := make([]float64, len(x))
	in := [][]float64{make([]float64, len(x)), make([]float64, len(g))}
	for i, v := range x {
		in[0][i] = float64(v)
	}
	for i, v := range g {
		in[1][i] = float64(v)
	}
	n := backend.Node{Op: backend.OpMaxPool2dBack, Shape: xs, Perm: w.Attr()}
	backend.CompositeOf(backend.OpMaxPool2dBack).Eval(&n, in, [][]int{xs, gs, {oh * ow * w.KH * w.KW}}, want)
	for i, v := range want {
		if gv := float64(got[i]); v != gv && !(math.IsNaN(v) && math.IsNaN(gv)) {
			return false
		}
	}
	return true
}

// probeBatchNorm reports whether the device computes batch_norm,
// batch_norm_back and batch_norm_stats as ag_vk_batch_norm's nodes
// (ggml-vulkan with build.sh's patch 0015) within the composites'
// tolerances: channels of random values, of values far from 0 for their
// spread (where a variance as E[x^2] - E[x]^2 cancels), of one value
// (output 0), and of NaN (x) and an infinity (dy), which make their
// channel NaN, over chunks of uneven sizes. A driver or a ggml without the
// patch keeps the composition.
func (d *device) probeBatchNorm() bool {
	const nn, c, l, splits = 3, 4, 37, 4
	shape := []int{nn, c, l}
	x, dy := make([]float32, nn*c*l), make([]float32, nn*c*l)
	for i := range x {
		ch, k := (i/l)%c, float32((i*37)%101)/101
		// channel 1 as the conformance cases' row far from 0 (100 +- 1):
		// a GPU's division (2.5 ulp in Vulkan) makes a mean a few ulp
		// off, which a spread much narrower than that would magnify
		// past the tolerance in any f32 batch norm
		x[i] = [c]float32{8*k - 4, 100 + (8*k-4)/4, 2.5, 1000 * (k - 0.3)}[ch]
		dy[i] = float32((i*13)%29)/7 - 2
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x[3*l+5], dy[(c+1)*l+7] = nan, inf // channel 3's x in batch 0, channel 1's dy in batch 1
	for _, op := range []backend.Op{backend.OpBatchNorm, backend.OpBatchNormBack, backend.OpBatchNormStats} {
		back := op == backend.OpBatchNormBack
		ins, out := [][]float32{x}, shape
		if back {
			ins = append(ins, dy)
		}
		if op == backend.OpBatchNormStats {
			out = []int{2, c}
		}
		ok := d.probeOp("probeBatchNorm", op, ins, [][]int{shape}, out, func(ctx *C.struct_ggml_context, ts []tensor) tensor {
			xt := C.ggml_reshape_3d(ctx, ts[0], l, c, nn)
			var dt tensor
			if back {
				dt = C.ggml_reshape_3d(ctx, ts[1], l, c, nn)
			}
			sums := C.ag_vk_batch_norm_sums(ctx, xt, dt, 1, splits)
			if op == backend.OpBatchNormStats {
				return C.ag_vk_batch_norm_stats(ctx, xt, sums, 1, splits)
			}
			return C.ag_vk_batch_norm(ctx, xt, dt, sums, 1e-5, 1, splits)
		})
		if !ok {
			return false
		}
	}
	return true
}

// probeCrossEntropy reports whether the device computes cross_entropy and
// cross_entropy_back as ag_vk_cross_entropy's nodes (ggml-vulkan with
// build.sh's patch 0016) within the composites' tolerances: rows longer
// than a workgroup, a row far above 0 (exp overflows unless shifted by the
// maximum), labels rounded half away from 0 and at the last class, and for
// the gradient a NaN and an infinity in x and labels outside the classes
// (clamped); the loss once more with a label past the last class (NaN).
// A driver or a ggml without the patch keeps the composition.
func (d *device) probeCrossEntropy() bool {
	const b, c = 5, 300
	x := make([]float32, b*c)
	for i := range x {
		x[i] = float32((i*37)%101)/101*8 - 4
	}
	for j := range c {
		x[3*c+j] += 80
	}
	lab := []float32{3, 2.5, 298.6, 0, 1.4}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	xs := append([]float32(nil), x...)
	xs[1*c+7], xs[4*c+100] = nan, inf
	labs := []float32{-3, nan, 300, 299, 1.5}
	type run struct {
		op     backend.Op
		x, lab []float32
	}
	for _, r := range []run{{backend.OpCrossEntropy, x, lab}, {backend.OpCrossEntropy, x, []float32{0, 1, 2, 3, 300}},
		{backend.OpCrossEntropyBack, x, lab}, {backend.OpCrossEntropyBack, xs, labs}} {
		back := r.op == backend.OpCrossEntropyBack
		ins, shapes, out := [][]float32{r.x, r.lab}, [][]int{{b, c}, {b}}, []int{}
		if back {
			ins, shapes, out = append(ins, []float32{1.5}), append(shapes, []int{}), []int{b, c}
		}
		ok := d.probeOp("probeCrossEntropy", r.op, ins, shapes, out, func(ctx *C.struct_ggml_context, ts []tensor) tensor {
			var g tensor
			if back {
				g = ts[2]
			}
			return vkCrossEntropy(ctx, d.be, C.ggml_reshape_2d(ctx, ts[0], c, b), ts[1], g)
		})
		if !ok {
			return false
		}
	}
	return true
}

// probeColSums reports whether the device sums columns as ag_vk_col_sums's
// two nodes (ggml-vulkan with build.sh's patch 0017): sum_to's values over
// rows split into chunks of uneven sizes, columns past a whole workgroup's
// 64, a NaN and an infinity (each its column's sum), values in eighths so
// that every f32 partial sum is exact. A driver or a ggml without the
// patch keeps the pools.
func (d *device) probeColSums() bool {
	const r, k = 1001, 70
	x := make([]float32, r*k)
	for i := range x {
		x[i] = float32((i*37)%101)/8 - 6
	}
	x[5*k+3], x[700*k+69] = float32(math.NaN()), float32(math.Inf(-1))
	return d.probeOp("probeColSums", backend.OpSumTo, [][]float32{x}, [][]int{{r, k}}, []int{k}, func(ctx *C.struct_ggml_context, ts []tensor) tensor {
		return C.ag_vk_col_sums(ctx, ts[0], r, k, C.int(colSumSplits(r, k)))
	})
}

// probeSumSquares reports whether the device computes sum_squares as
// sumSquaresKernels's nodes (ggml-vulkan with build.sh's patch 0018): four
// inputs of different lengths (two groups, the second chained to the
// first's sum), chunks of uneven sizes, values in eighths so that every f32
// partial sum is exact; then an infinity (+Inf) and a NaN (NaN). A driver
// or a ggml without the patch keeps the composition.
func (d *device) probeSumSquares() bool {
	lens := []int{5003, 37, 1, 2100}
	ins := make([][]float32, len(lens))
	for k, n := range lens {
		ins[k] = make([]float32, n)
		for i := range ins[k] {
			ins[k][i] = float32((i*37+k)%65)/8 - 4
		}
	}
	special := [][]float32{{1, 2, float32(math.Inf(-1))}, {3}, {4, 5}, {6}}
	nan := [][]float32{{1, 2}, {3, float32(math.NaN())}, {4}, {float32(math.Inf(1))}}
	for _, in := range [][][]float32{ins, special, nan} {
		sh := make([][]int, len(in))
		for k, v := range in {
			sh[k] = []int{len(v)}
		}
		if !d.probeOp("probeSumSquares", backend.OpSumSquares, in, sh, []int{1}, func(ctx *C.struct_ggml_context, ts []tensor) tensor {
			return vkSumSquares(ctx, ts, nil)
		}) {
			return false
		}
	}
	return true
}

// probeFailed says, with AG_GGML_LOG=debug or info, why a probe kept a
// composition (a kernel of a patch that gives other numbers on this
// device, or a ggml without the patch).
func (d *device) probeFailed(probe, format string, args ...any) {
	if l := os.Getenv(LogEnv); l == "debug" || l == "info" {
		fmt.Fprintf(os.Stderr, "native: %s: %s: "+format+"\n", append([]any{d.name, probe}, args...)...)
	}
}

// probeMatmul reports whether the device computes f32 products as patch
// 0019's kernel (ag_vk_matmul): two batches of 132 x 136 outputs over K =
// 100 (edge tiles along M, N and K), A stored [K, M] and [M, K], whole and
// with K in three parts (the last empty), values in eighths so that every
// f32 sum is exact, a NaN (its row NaN) and an infinity (its column ±Inf,
// NaN where it meets 0). A driver or a ggml without the patch keeps ggml's
// mul_mat.
func (d *device) probeMatmul() bool {
	const m, n, k, batches = 132, 136, 100, 2
	a, b := make([]float32, batches*k*m), make([]float32, batches*k*n)
	for i := range a {
		a[i] = float32((i*37)%17-8) / 8
	}
	for i := range b {
		b[i] = float32((i*29)%13-6) / 8
	}
	a[3*m+5] = float32(math.NaN())
	b[k*n+7*n+9] = float32(math.Inf(1))
	want := make([]float64, batches*m*n)
	for z := 0; z < batches; z++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				for q := 0; q < k; q++ {
					s += float64(a[(z*k+q)*m+i]) * float64(b[(z*k+q)*n+j])
				}
				want[(z*m+i)*n+j] = s
			}
		}
	}
	// A stored [K, M], then the same values stored [M, K]
	at := make([]float32, len(a))
	for z := 0; z < batches; z++ {
		for q := 0; q < k; q++ {
			for i := 0; i < m; i++ {
				at[(z*m+i)*k+q] = a[(z*k+q)*m+i]
			}
		}
	}
	for _, run := range []struct{ rows, splits int }{{0, 1}, {0, 3}, {1, 1}, {1, 3}} {
		in := a
		if run.rows == 1 {
			in = at
		}
		got, ok := d.probeRun([][]float32{in, b}, func(ctx *C.struct_ggml_context, ts []tensor) tensor {
			a3 := C.ggml_reshape_3d(ctx, ts[0], C.int64_t(m+run.rows*(k-m)), C.int64_t(k+run.rows*(m-k)), batches) // [K, M] or [M, K]
			b3 := C.ggml_reshape_3d(ctx, ts[1], n, k, batches)
			return C.ag_vk_matmul(ctx, a3, b3, C.int(run.rows), C.int(run.splits))
		})
		if !ok {
			d.probeFailed("probeMatmul", "not run (supports_op or the compute failed)")
			return false
		}
		for i, w := range want {
			if g := float64(got[i]); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				d.probeFailed("probeMatmul", "A stored [M, K] %d, %d parts: [%d]: got %g, want %g", run.rows, run.splits, i, g, w)
				return false
			}
		}
	}
	return true
}
