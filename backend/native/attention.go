//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"math"
	"os"

	"github.com/ag-go/ag/backend"
)

// attnEnv picks OpAttention's lowering, for experiments: unset or "auto"
// (see lowerAttention), "flash" (ggml's flash attention wherever the
// device runs it, ggml-cpu included, whose special values then differ
// from ir.go's: see ag_attention) or "composite" (two matmuls around a
// masked softmax, the Tq x Tk weights stored).
const attnEnv = "AG_GGML_ATTN"

// attnGeom is an attention node's sizes and how its operands are laid out
// for ggml: q [D, Tq, a2, a3] in ggml's order (the IR's leading dims are
// a3, a2), with a2 and a3 swapped (swap) when a3 is 1 < a2, so that the
// batch is ggml_flash_attn_ext's ne3 and its result, which is [Dv, ne2,
// Tq, ne3], needs no permute.
type attnGeom struct {
	d, dv, tq, tk int
	a2, a3        int
	swap          bool
}

// maskKey identifies a mask built from a keep value (the IR node's tensor),
// made once per keep, target shape and kind: a transformer's layers share
// one.
type maskKey struct {
	t     tensor
	ne    [4]C.int64_t
	flash bool
}

// lowerAttention lowers OpAttention. ggml-cpu runs ag_attention, exact to
// ir.go's special values and reading only the attended keys (ggml's flash
// attention skips masked keys too, but a lone +Inf score comes out finite
// there). ggml-vulkan runs ggml_flash_attn_ext where the device can
// (subgroup shuffle and vote), else the composite of matmuls and a masked
// softmax. Its kernel is ggml's scalar one, f32 throughout, in the coopmat
// build too (patches/*.coopmat.patch keep f32 flash attention off the
// cooperative-matrix kernels, which would round q and k to f16). Head sizes
// are padded with zeros to a multiple of 8, and a single query to two,
// so that ggml does not split the keys among workgroups: that merge
// clamps Inf, and on NVIDIA NaN, to finite values.
func (l *lowering) lowerAttention(i int, n *backend.Node) tensor {
	mode := os.Getenv(attnEnv)
	if l.d.isCPU && mode != "flash" && mode != "composite" {
		q, k, v, keep := l.unitStride(l.in(n, 0)), l.unitStride(l.in(n, 1)), l.unitStride(l.in(n, 2)), l.in(n, 3)
		return C.ag_attention_op(l.ctx, q, k, v, keep, C.float(n.A))
	}
	if mode != "composite" {
		if t := l.flashAttention(i, n); t != nil {
			return t
		}
	}
	return l.compositeAttention(i, n)
}

// unitStride is t with contiguous rows (ne0 of stride its element size).
func (l *lowering) unitStride(t tensor) tensor {
	if t.nb[0] != C.ggml_type_size(t._type) {
		return C.ggml_cont(l.ctx, t)
	}
	return t
}

// attnOperands returns the geometry and q, k, v and keep viewed as it
// says (rows contiguous; keep contiguous, as the ops building masks want);
// with half, k and v are f16 (halfKV).
func (l *lowering) attnOperands(n *backend.Node, half bool) (g attnGeom, q, k, v, keep tensor) {
	q, k, v = l.unitStride(l.in(n, 0)), l.unitStride(l.in(n, 1)), l.unitStride(l.in(n, 2))
	if half {
		k, v = l.unitStride(l.halfKV(n, 1)), l.unitStride(l.halfKV(n, 2))
	}
	keep = l.in(n, 3)
	if !bool(C.ggml_is_contiguous(keep)) {
		keep = C.ggml_cont(l.ctx, keep)
	}
	g = attnGeom{d: int(q.ne[0]), tq: int(q.ne[1]), tk: int(k.ne[1]), dv: int(v.ne[0]), a2: int(q.ne[2]), a3: int(q.ne[3])}
	g.swap = g.a3 == 1 && g.a2 > 1
	if g.swap {
		q, k, v, keep = l.swap23(q), l.swap23(k), l.swap23(v), l.swap23(keep)
	}
	return g, q, k, v, keep
}

// swap23 views t [ne0, ne1, ne2, 1] as [ne0, ne1, 1, ne2]: the same memory.
func (l *lowering) swap23(t tensor) tensor {
	return C.ggml_view_4d(l.ctx, t, t.ne[0], t.ne[1], 1, t.ne[2], t.nb[1], t.nb[2], t.nb[2], 0)
}

// attnResult views r, a result whose rows (Dv' values, padding past Dv
// included) are strided by tqNb along the queries and by hNb and bNb along
// ggml's dims 2 and 3 (the swapped ones where g.swap), as node i's [Dv,
// Tq, a2, a3]; a copy where that view is not contiguous, but for readers
// that are all permutes: a transformer merges the heads of its [B, H, T,
// Dv] result into [B, T, H, Dv], which is the order the flash kernel
// wrote, so that permute of the view is contiguous and neither copies
// (lowerPermute).
func (l *lowering) attnResult(i int, g attnGeom, r tensor, tqNb, hNb, bNb C.size_t) tensor {
	if g.swap {
		hNb, bNb = bNb, bNb*C.size_t(g.a2)
	}
	t := C.ggml_view_4d(l.ctx, r, C.int64_t(g.dv), C.int64_t(g.tq), C.int64_t(g.a2), C.int64_t(g.a3), tqNb, hNb, bNb, 0)
	if !bool(C.ggml_is_contiguous(t)) && !l.onlyRead(i, backend.OpPermute) {
		t = C.ggml_cont(l.ctx, t)
	}
	return t
}

// isZero is 1 where a is ±0 and 0 elsewhere, NaN included (ggml's relu
// turns NaN into 0 on both devices): 1 - |a|*2^149 is at most 0 for every
// nonzero a, subnormals included (see keep).
func (l *lowering) isZero(a tensor) tensor {
	mag := l.scaleBias(l.scaleBias(C.ggml_abs(l.ctx, a), 0x1p127, 0), -0x1p22, 1)
	return C.ggml_relu(l.ctx, mag)
}

// infScale is x*s*Inf for x in {-1, 0, 1} and s = ±1: x*s*FLT_MAX*2, so
// that 0 stays 0 (0*Inf would be NaN).
func (l *lowering) infScale(x tensor, s float32) tensor {
	return l.scaleBias(l.scaleBias(x, s*math.MaxFloat32, 0), 2, 0)
}

// halfKV is input j (k or v) of an f16-precision attention (B = 1) as an
// f16 tensor: its round's own f16 cast (halfSource: the one copy the
// backward's f16 products read too), else a cast of its values, which B
// = 1 says are f16 values already.
func (l *lowering) halfKV(n *backend.Node, j int) tensor {
	if t, ok := l.halfSource(n.In[j]); ok {
		return t
	}
	return C.ggml_cast(l.ctx, l.in(n, j), C.GGML_TYPE_F16)
}

// flashAttention lowers n to ggml_flash_attn_ext, or returns nil where the
// device cannot run it. At f16 precision (n.B = 1) on a GPU, k and v are
// f16: ggml-vulkan then runs its tensor-core kernels where the device has
// them (the f32 ones are kept off them: patches/*.coopmat.patch), which
// round q and the weights to f16 too (ir.go's latitude for B = 1) and
// accumulate in f32 (GGML_PREC_F32). Head sizes that need padding keep
// f32 k and v (the pad is an f32 op). The mask is an f16 bias, -Inf where a query does
// not attend (ggml's kernels skip those keys: ggml-vulkan whole blocks of
// 32 or 64 keys by the queries of a workgroup, whose other keys it reads)
// and -0 where it does; a query attending no key sums no weight, which
// both kernels turn into 0.
func (l *lowering) flashAttention(i int, n *backend.Node) tensor {
	ctx := l.ctx
	d, dv, tq := l.inShape(n, 0)[len(n.Shape)-1], n.Shape[len(n.Shape)-1], n.Shape[len(n.Shape)-2]
	dp, dvp, tqp := d, dv, tq
	if !l.d.isCPU {
		// ggml-vulkan takes head sizes that are multiples of 8; zeros
		// added to q and k leave the scores, to v leave columns to drop.
		// A single query would split the keys among workgroups, whose
		// merge clamps the result to finite values.
		dp, dvp, tqp = roundUp(d, 8), roundUp(dv, 8), max(tq, 2)
	}
	half := n.B == 1 && !l.d.isCPU && dp == d && dvp == dv && l.d.flashHalf(dp, dvp)
	if !half && !l.d.flashSupported(dp, dvp, C.GGML_TYPE_F32) {
		return nil
	}
	g, q, k, v, keep := l.attnOperands(n, half)
	pad := func(t tensor, p0, p1 int) tensor {
		if p0 == 0 && p1 == 0 {
			return t
		}
		return C.ggml_pad(ctx, t, C.int(p0), C.int(p1), 0, 0)
	}
	q = pad(q, dp-d, tqp-tq)
	k = pad(k, dp-d, 0)
	v = pad(v, dvp-dv, 0)
	// The mask is [Tk, Tq', ...]: a keep broadcast along the queries
	// repeats, so the padding query masks what the real one does and
	// makes ggml read no other block.
	want := [4]C.int64_t{C.int64_t(g.tk), C.int64_t(tqp), keep.ne[2], keep.ne[3]}
	key := maskKey{l.in(n, 3), want, true}
	mask, ok := l.maskmemo[key]
	if !ok {
		bias := l.infScale(l.isZero(keep), -1)
		mask[0] = C.ggml_cast(ctx, C.ggml_repeat_4d(ctx, bias, want[0], want[1], want[2], want[3]), C.GGML_TYPE_F16)
		l.memoMask(key, mask)
	}
	fa := C.ggml_flash_attn_ext(ctx, q, k, v, mask[0], C.float(n.A), 0, 0)
	C.ggml_flash_attn_ext_set_prec(fa, C.GGML_PREC_F32)
	return l.attnResult(i, g, fa, fa.nb[2], fa.nb[1], fa.nb[3]) // fa is [Dv', h, Tq', b]
}

func (l *lowering) memoMask(key maskKey, m [2]tensor) {
	if l.maskmemo == nil {
		l.maskmemo = map[maskKey][2]tensor{}
	}
	l.maskmemo[key] = m
}

// flashHalf is flashSupported with f16 k and v.
func (d *device) flashHalf(dk, dv int) bool { return d.flashSupported(dk, dv, C.GGML_TYPE_F16) }

func roundUp(x, m int) int { return ceilDiv(x, m) * m }

// flashSupported asks the device whether it runs ggml_flash_attn_ext with
// f32 q, k and v of type kv, an f16 mask and these head sizes (ggml-vulkan
// needs multiples of 8 and subgroup shuffle and vote). The answer is kept
// per device (d.flash; Compile holds d.mu): a GPT's compile asked it once
// per layer, each time building a ggml context.
func (d *device) flashSupported(dk, dv int, kv C.enum_ggml_type) bool {
	key := flashKey{dk, dv, kv}
	if ok, known := d.flash[key]; known {
		return ok
	}
	ok := d.askFlash(dk, dv, kv)
	if d.flash == nil {
		d.flash = map[flashKey]bool{}
	}
	d.flash[key] = ok
	return ok
}

// flashKey is one question of flashSupported.
type flashKey struct {
	dk, dv int
	kv     C.enum_ggml_type
}

// askFlash is flashSupported's question put to ggml.
func (d *device) askFlash(dk, dv int, kv C.enum_ggml_type) bool {
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: 8 * C.ggml_tensor_overhead(), no_alloc: true})
	if ctx == nil {
		return false
	}
	defer C.ggml_free(ctx)
	q := C.ggml_new_tensor_4d(ctx, C.GGML_TYPE_F32, C.int64_t(dk), 2, 1, 1)
	k := C.ggml_new_tensor_4d(ctx, kv, C.int64_t(dk), 3, 1, 1)
	v := C.ggml_new_tensor_4d(ctx, kv, C.int64_t(dv), 3, 1, 1)
	m := C.ggml_new_tensor_4d(ctx, C.GGML_TYPE_F16, 3, 2, 1, 1)
	fa := C.ggml_flash_attn_ext(ctx, q, k, v, m, 1, 0, 0)
	C.ggml_flash_attn_ext_set_prec(fa, C.GGML_PREC_F32)
	return bool(C.ggml_backend_supports_op(d.be, fa))
}

// compositeAttention is softmax(scale*q k^T + bias) v with the scores
// stored. A softmax of a row of -Inf is NaN, so the bias is -Inf only in
// rows that attend some key (keep01 - any is -1 exactly there), 0 in a
// row that attends none, whose result anyKey (0) then zeroes. Unlike the
// flash kernels this reads every key: a NaN or Inf in k or v at a masked
// key reaches the queries of its batch.
func (l *lowering) compositeAttention(i int, n *backend.Node) tensor {
	ctx := l.ctx
	g, q, k, v, keep := l.attnOperands(n, false)
	want := [4]C.int64_t{C.int64_t(g.tk), C.int64_t(g.tq), keep.ne[2], keep.ne[3]}
	key := maskKey{l.in(n, 3), want, false}
	m, ok := l.maskmemo[key]
	if !ok {
		keep01 := l.scaleBias(l.isZero(keep), -1, 1)
		anyKey := l.rowMax(keep01) // [1, Tq or 1, ...]
		bias := l.infScale(C.ggml_sub(ctx, keep01, anyKey), 1)
		m = [2]tensor{C.ggml_repeat_4d(ctx, bias, want[0], want[1], want[2], want[3]), anyKey}
		l.memoMask(key, m)
	}
	w := C.ggml_soft_max_ext(ctx, C.ggml_mul_mat(ctx, k, q), m[0], C.float(n.A), 0) // [Tk, Tq, ...]
	out := C.ggml_mul(ctx, l.mulMat(l.transposed(v), w), m[1])                      // [Dv, Tq, ...]
	return l.attnResult(i, g, out, out.nb[1], out.nb[2], out.nb[3])
}
