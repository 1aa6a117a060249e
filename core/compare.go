package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Comparisons, selection and arg-reductions. The comparisons and ArgMax
// are composites of exact ops; Where and the gradients of MaxAxis and
// MinAxis rest on one primitive, keep (backend.OpKeep: b where a is
// nonzero, else -0), because a mask applied by multiplication is not
// exact: 0*Inf is NaN.

// keep is b where a is nonzero or NaN, -0 elsewhere, with numpy
// broadcasting; its gradient goes to b only where b was kept.
func keep(a, b *Tensor) *Tensor { return binary("keep", backend.OpKeep, a, b) }

// maxF32 is the largest finite f32.
const maxF32 = math.MaxFloat32

// cmpSign is a tensor of a's and b's broadcast shape whose sign is the
// sign of a - b, exactly: positive where a > b, negative where a < b, 0
// where a == b (±0 equal, each infinity equal to itself), NaN where either
// is NaN. a - b alone is not enough: Inf - Inf is NaN, and where a and b
// are normal but close to 2^-126 their difference is subnormal, which
// devices may flush to 0. So three terms, each 0 or of the true sign, are
// added: the sign of the infinities (Sign(x - clamp(x)) is ±1 at ±Inf, 0
// elsewhere), the difference of the values clamped to the finite range
// (which may overflow to an infinity of the right sign), and the
// difference of the clamped values times 2^64 (normal wherever the first
// difference is subnormal). Its inputs are taken without gradient.
func cmpSign(fn string, a, b *Tensor) *Tensor {
	needTensors(fn, a, b)
	if _, err := backend.BroadcastShape(a.shape, b.shape); err != nil {
		panic(fmt.Sprintf("core.%s: %v", fn, err))
	}
	a, b = detach(fn, a), detach(fn, b)
	ca, cb := Clamp(a, -maxF32, maxF32), Clamp(b, -maxF32, maxF32)
	infs := Sub(Sign(Sub(a, ca)), Sign(Sub(b, cb)))
	fa := Clamp(Scale(a, 0x1p64), -maxF32, maxF32)
	fb := Clamp(Scale(b, 0x1p64), -maxF32, maxF32)
	return Add(infs, Sign(Add(Sub(ca, cb), Sub(fa, fb))))
}

// compare is the 0/1 mask lo < cmpSign(a, b) < hi (cmpSign is a whole
// number in -3..3 or NaN).
func compare(fn string, a, b *Tensor, lo, hi float32) *Tensor {
	needTensors(fn, a, b)
	defer a.dev.composite(fn)()
	return inside(cmpSign(fn, a, b), lo, hi)
}

// Greater returns the mask a > b: 1 where it holds, 0 elsewhere, with
// numpy broadcasting, as PyTorch's gt. The comparisons follow IEEE 754
// exactly, whatever the magnitudes (Greater(3e38, -3e38) is 1, though
// their difference overflows): a NaN on either side makes every
// comparison false except NotEqual, which is true; ±0 are equal; each
// infinity equals itself and is beyond every finite value. Subnormal
// inputs count as zeros of their sign on devices that flush them (WGSL
// allows it; see backend.Op). No gradient flows through a comparison.
func Greater(a, b *Tensor) *Tensor { return compare("Greater", a, b, 0.5, 4) }

// GreaterEqual returns the mask a >= b (0 at NaN); see Greater.
func GreaterEqual(a, b *Tensor) *Tensor { return compare("GreaterEqual", a, b, -0.5, 4) }

// Less returns the mask a < b (0 at NaN); see Greater.
func Less(a, b *Tensor) *Tensor { return compare("Less", a, b, -4, -0.5) }

// LessEqual returns the mask a <= b (0 at NaN); see Greater.
func LessEqual(a, b *Tensor) *Tensor { return compare("LessEqual", a, b, -4, 0.5) }

// Equal returns the mask a == b: 0 where either is NaN, 1 for -0 == +0
// and for +Inf == +Inf; see Greater.
func Equal(a, b *Tensor) *Tensor { return compare("Equal", a, b, -0.5, 0.5) }

// NotEqual returns the mask a != b, 1 where either is NaN (the negation
// of Equal, as IEEE's and PyTorch's ne); see Greater.
func NotEqual(a, b *Tensor) *Tensor {
	needTensors("NotEqual", a, b)
	defer a.dev.composite("NotEqual")()
	return Affine(inside(cmpSign("NotEqual", a, b), -0.5, 0.5), -1, 1)
}

// scalarOf is c as a scalar (rank 0) tensor on x's device, for the scalar
// comparisons.
func scalarOf(fn string, x *Tensor, c float32) *Tensor {
	needTensors(fn, x)
	return x.dev.Full(c)
}

// GreaterScalar returns the mask x > c; see Greater (c may be ±Inf or NaN).
func GreaterScalar(x *Tensor, c float32) *Tensor {
	return compare("GreaterScalar", x, scalarOf("GreaterScalar", x, c), 0.5, 4)
}

// GreaterEqualScalar returns the mask x >= c; see Greater.
func GreaterEqualScalar(x *Tensor, c float32) *Tensor {
	return compare("GreaterEqualScalar", x, scalarOf("GreaterEqualScalar", x, c), -0.5, 4)
}

// LessScalar returns the mask x < c; see Greater.
func LessScalar(x *Tensor, c float32) *Tensor {
	return compare("LessScalar", x, scalarOf("LessScalar", x, c), -4, -0.5)
}

// LessEqualScalar returns the mask x <= c; see Greater.
func LessEqualScalar(x *Tensor, c float32) *Tensor {
	return compare("LessEqualScalar", x, scalarOf("LessEqualScalar", x, c), -4, 0.5)
}

// EqualScalar returns the mask x == c; see Greater.
func EqualScalar(x *Tensor, c float32) *Tensor {
	return compare("EqualScalar", x, scalarOf("EqualScalar", x, c), -0.5, 0.5)
}

// NotEqualScalar returns the mask x != c (1 at NaN); see Greater.
func NotEqualScalar(x *Tensor, c float32) *Tensor {
	needTensors("NotEqualScalar", x)
	defer x.dev.composite("NotEqualScalar")()
	return Affine(inside(cmpSign("NotEqualScalar", x, scalarOf("NotEqualScalar", x, c)), -0.5, 0.5), -1, 1)
}

// isNaN is the 0/1 mask of NaN elements (no gradient): every other value,
// clamped to the finite range, lies strictly inside (-Inf, +Inf).
func isNaN(x *Tensor) *Tensor {
	return Affine(inside(Clamp(x, -maxF32, maxF32), float32(math.Inf(-1)), inf), -1, 1)
}

// Where returns a where cond is nonzero and b where it is zero,
// elementwise with numpy broadcasting of the three, as PyTorch's
// where(cond.bool(), a, b): a NaN in cond counts as nonzero (true). The
// selection is exact whatever the other side holds (an infinity or a NaN
// in b does not reach an output that takes a, as it would through
// cond*a + (1-cond)*b, where 0*Inf is NaN), and -0 stays -0 (on devices
// that keep the sign of a zero; see backend.Op). The
// gradient goes to a where a was taken and to b where b was, zero
// elsewhere (also where the upstream gradient is NaN or infinite); cond
// gets none.
//
// It is keep(s, a) + keep(1-s, b), with s the 0/1 mask cond != 0 and keep
// the primitive backend.OpKeep (b where a is nonzero, else -0): x + -0 is
// x exactly, +0 and -0 included. Subnormal conds count as zero on devices
// that flush subnormals (see Greater).
func Where(cond, a, b *Tensor) *Tensor {
	needTensors("Where", cond, a, b)
	s, err := backend.BroadcastShape(cond.shape, a.shape)
	if err == nil {
		s, err = backend.BroadcastShape(s, b.shape)
	}
	if err != nil {
		panic(fmt.Sprintf("core.Where: cond %v, a %v and b %v do not broadcast together", cond.shape, a.shape, b.shape))
	}
	defer cond.dev.composite("Where")()
	c := detach("Where", cond)
	zero := inside(Sign(c), -0.5, 0.5) // 1 where cond is ±0 (0 at NaN)
	return Add(keep(Affine(zero, -1, 1), a), keep(zero, b))
}

// argAxis checks the axis of an arg-reduction and returns it normalized.
func argAxis(fn string, x *Tensor, axis int) int {
	axis = normAxis(fn, x, axis)
	if n := x.shape[axis]; n >= 1<<24 {
		panic(fmt.Sprintf("core.%s: %d elements along axis %d of %v: indices from 2^24 on are not exact in f32", fn, n, axis, x.shape))
	}
	return axis
}

// countdown is n, n-1, ..., 1 along axis of a tensor of x's rank (size 1
// on every other axis), a Constant (so ArgMax works inside a Capture) made
// once per device and shape.
func countdown(x *Tensor, axis int) *Tensor {
	n := x.shape[axis]
	s := make([]int, x.Rank())
	for i := range s {
		s[i] = 1
	}
	s[axis] = n
	return x.dev.constant(fmt.Sprintf("countdown %v", s), func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(n - i)
		}
		return v
	}, s...)
}

// firstMax returns, along axis (normalized), the maximum m of x (OpMax:
// NaN if the axis holds one), n - i for the index i of its first
// occurrence (the first NaN where there is one), and the countdown it
// was found with; all keep the rank and carry no gradient.
func firstMax(fn string, x *Tensor, axis int) (m, v, down *Tensor) {
	x = detach(fn, x)
	s := slices.Clone(x.shape)
	s[axis] = 1
	m = x.dev.recordGrad(fn, backend.OpMax, s, attrs{Axis: int32(axis)}, false, x)
	hit := Maximum(inside(cmpSign(fn, x, m), -0.5, 0.5), isNaN(x))
	down = countdown(x, axis)
	v = x.dev.recordGrad(fn, backend.OpMax, s, attrs{Axis: int32(axis)}, false, Mul(hit, down))
	return m, v, down
}

func dropAxis(y *Tensor, axis int, keepDim bool) *Tensor {
	if keepDim {
		return y
	}
	return Reshape(y, slices.Delete(slices.Clone(y.shape), axis, axis+1)...)
}

// ArgMax returns the index of the first maximum along axis (negative
// counts from the end) as f32 whole numbers, as PyTorch's argmax: a NaN
// counts as the maximum, so an axis holding NaN gives the index of its
// first NaN; ±0 tie (the first wins). keepDim keeps the axis with size 1.
// No gradient flows through it. The axis must be shorter than 2^24 (f32
// holds every whole number below that).
func ArgMax(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = argAxis("ArgMax", x, axis)
	defer x.dev.composite("ArgMax")()
	_, v, _ := firstMax("ArgMax", x, axis)
	return dropAxis(Affine(v, -1, float32(x.shape[axis])), axis, keepDim)
}

// ArgMin returns the index of the first minimum along axis, as ArgMax
// (a NaN counts as the minimum).
func ArgMin(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = argAxis("ArgMin", x, axis)
	defer x.dev.composite("ArgMin")()
	_, v, _ := firstMax("ArgMin", Neg(detach("ArgMin", x)), axis)
	return dropAxis(Affine(v, -1, float32(x.shape[axis])), axis, keepDim)
}

// MaxAxis takes the maximum along axis (negative counts from the end):
// NaN if the axis holds one, -Inf for an axis of -Inf. keepDim keeps the
// axis with size 1. Its gradient is PyTorch's max(dim)'s: the whole
// upstream gradient goes to the first maximum (the ArgMax: the first NaN
// where there is one), zero to the others, ties included. With a
// gradient to carry, the axis must be shorter than 2^24 (see ArgMax).
//
// Without a gradient to carry it is the backend's max; with one it is the
// sum along the axis of keep(onehot(ArgMax), x), exactly the same value
// (the other terms are -0), whose gradient is keep(onehot, g).
func MaxAxis(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = normAxis("MaxAxis", x, axis)
	defer x.dev.composite("MaxAxis")()
	s := slices.Clone(x.shape)
	s[axis] = 1
	switch {
	case x.shape[axis] == 1:
		return dropAxis(Reshape(x, s...), axis, keepDim) // x is its own maximum
	case !x.requiresGrad:
		return dropAxis(x.dev.recordGrad("MaxAxis", backend.OpMax, s, attrs{Axis: int32(axis)}, false, x), axis, keepDim)
	}
	argAxis("MaxAxis", x, axis)
	_, v, down := firstMax("MaxAxis", x, axis)
	first := inside(Sub(down, v), -0.5, 0.5)
	return dropAxis(sumKeep("MaxAxis", keep(first, x), axis), axis, keepDim)
}

// MinAxis takes the minimum along axis, -MaxAxis(-x): NaN if the axis
// holds one, its gradient to the first minimum (the ArgMin), as MaxAxis.
func MinAxis(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = normAxis("MinAxis", x, axis)
	defer x.dev.composite("MinAxis")()
	return Neg(MaxAxis(Neg(x), axis, keepDim))
}
