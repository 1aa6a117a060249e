package core

import (
	"fmt"
	"math"
	"slices"
)

// Composite ops built only from the ops of ops.go: each gets its gradient
// from its parts and runs on every backend as it is (see backend/doc.go,
// "Adding an op"). Each labels its nodes with its own name in profiles.

// LeakyReLU returns x for x > 0 and slope*x otherwise, as slope*x +
// (1-slope)*relu(x): exact for x <= 0, within an ulp for x > 0, and its
// gradient is 1 for x > 0 and slope for x <= 0 (slope at 0, as PyTorch's).
func LeakyReLU(x *Tensor, slope float32) *Tensor {
	needTensors("LeakyReLU", x)
	if math.IsNaN(float64(slope)) || math.IsInf(float64(slope), 0) {
		panic(fmt.Sprintf("core.LeakyReLU: slope %g is not finite", slope))
	}
	defer x.dev.composite("LeakyReLU")()
	return Add(Scale(x, slope), Scale(ReLU(x), 1-slope))
}

// ELU returns x for x > 0 and alpha*(e^x - 1) otherwise, as relu(x) +
// alpha*(exp(min(x, 0)) - 1). e^x - 1 is computed as it reads (there is no
// expm1), so for -1e-3 < x < 0 its absolute error is about 6e-8 (the
// rounding of e^x near 1) rather than a few ulps of the result. Its
// gradient is 1 for x > 0 and alpha*e^x for x <= 0: alpha at exactly 0, as
// PyTorch's elu_backward (min(x, 0) is a Clamp, whose gradient passes at
// its bound; through -relu(-x) it was 0 there, freezing exact zeros).
func ELU(x *Tensor, alpha float32) *Tensor {
	needTensors("ELU", x)
	if math.IsNaN(float64(alpha)) || math.IsInf(float64(alpha), 0) {
		panic(fmt.Sprintf("core.ELU: alpha %g is not finite", alpha))
	}
	defer x.dev.composite("ELU")()
	return Add(ReLU(x), Scale(AddScalar(Exp(Clamp(x, float32(math.Inf(-1)), 0)), -1), alpha))
}

// softplusThreshold is where Softplus becomes x itself, PyTorch's default:
// log(1+e^20) - 20 = 2e-9, below f32's resolution at 20.
const softplusThreshold = 20

// Softplus returns log(1 + e^x), stably: log(1 + exp(min(x, 20))) +
// relu(x - 20), so exp never overflows, and the gradient is sigmoid(x) for
// x <= 20 and 1 above, as PyTorch's softplus_backward (beta 1, threshold
// 20): 0.5 at 0, and at exactly 20 sigmoid(20), 1 in f32 (the clamp's
// gradient passes at its bound). (The form relu(x) + log(1+exp(-|x|)) is
// as stable but its gradient at exactly 0 is 0, which would freeze a
// zero-initialized parameter.) Precision: the absolute error is about 6e-8
// (the rounding of 1 + e^x) plus the device log's error near 1 (up to
// 2^-21 by WGSL's rules, 1.3e-7 measured on NVIDIA); for x < -16 the
// result is 0 where the true value is e^x < 1.2e-7.
func Softplus(x *Tensor) *Tensor {
	needTensors("Softplus", x)
	defer x.dev.composite("Softplus")()
	low := Log(AddScalar(Exp(Clamp(x, float32(math.Inf(-1)), softplusThreshold)), 1))
	return Add(low, ReLU(AddScalar(x, -softplusThreshold)))
}

// Log1p returns log(1 + x) as that composite: its absolute error is the
// rounding of 1 + x, at most 6e-8 (2^-24), plus the device log's own error
// near 1 (WGSL allows 2^-21 absolute; NVIDIA gave 8e-8), so its relative error grows
// as |x| shrinks below 1e-3 (for |x| < 6e-8 it returns 0). Its gradient
// is 1/(1 + x). Use it where 1 + x is the natural quantity (log(1 + p)
// of a probability); it is not a precise log1p for tiny x.
func Log1p(x *Tensor) *Tensor {
	needTensors("Log1p", x)
	defer x.dev.composite("Log1p")()
	return Log(AddScalar(x, 1))
}

// Abramowitz and Stegun 7.1.26: erfc(x) ~= t(a1 + t(a2 + t(a3 + t(a4 +
// t a5)))) e^(-x^2), t = 1/(1 + p x), for x >= 0, with absolute error at
// most 1.5e-7 in exact arithmetic.
const (
	asP  = 0.3275911
	asA1 = 0.254829592
	asA2 = -0.284496736
	asA3 = 1.421413741
	asA4 = -1.453152027
	asA5 = 1.061405429
)

// erfcAbs is erfc(|x|) by A&S 7.1.26 (see the constants).
func erfcAbs(x *Tensor) *Tensor {
	ax := Abs(x)
	t := Div(x.dev.Full(1, x.shape...), Affine(ax, asP, 1))
	poly := AddScalar(Scale(t, asA5), asA4)
	for _, a := range []float32{asA3, asA2, asA1} {
		poly = AddScalar(Mul(poly, t), a)
	}
	poly = Mul(poly, t)
	return Mul(poly, Exp(Neg(Mul(x, x))))
}

// Erf returns the error function by Abramowitz and Stegun 7.1.26, a
// rational polynomial times e^(-x^2) with absolute error at most 1.5e-7
// (about 2.5e-7 after f32 rounding, 2.9e-7 with NVIDIA's exp; the test
// allows 4e-7). Its gradient is the derivative of that approximation,
// within 1e-5 of 2/sqrt(pi)e^(-x^2) away from 0, and exactly 2/sqrt(pi)
// at 0, as PyTorch's.
//
// The approximation goes through |x|, whose sign times the sign of the
// result makes its own gradient sign(x)^2, 0 at 0; so a term
// keep(x == 0, 2/sqrt(pi)*x) is added: ±0 in value everywhere (the sum is
// the approximation exactly, -0 kept), it carries the slope at 0 alone.
func Erf(x *Tensor) *Tensor {
	needTensors("Erf", x)
	defer x.dev.composite("Erf")()
	s := Sign(x)
	e := Mul(s, Sub(x.dev.Full(1, x.shape...), erfcAbs(x)))
	atZero := inside(s, -0.5, 0.5) // 1 at ±0, 0 elsewhere and at NaN
	return Add(e, keep(atZero, Scale(x, 2/math.SqrtPi)))
}

// GELUErf returns the exact (erf) form of the Gaussian error linear unit,
// 0.5*x*(1 + erf(x/sqrt(2))), as PyTorch's gelu(approximate="none"), with
// erf by Abramowitz and Stegun 7.1.26 (absolute error of erf at most
// 1.5e-7, so of GELUErf at most 7.5e-8*|x|). For x < 0 the factor 1 +
// erf is computed as erfc(|x|) directly, so GELUErf(-5) is -1.4e-6, not 0.
// Its gradient at 0 is 0.5, as it should be.
func GELUErf(x *Tensor) *Tensor {
	needTensors("GELUErf", x)
	defer x.dev.composite("GELUErf")()
	z := Scale(x, 1/math.Sqrt2)
	s := Sign(z)
	q := erfcAbs(z)
	// 1 + erf(z) = (1 + s) - s*q: q exactly for z < 0, 2 - q for z > 0.
	onePlusErf := Sub(AddScalar(s, 1), Mul(s, q))
	return Mul(Scale(x, 0.5), onePlusErf)
}

// Var returns the variance of x along axis, sum((x - mean)^2)/(n -
// correction) with n = x's size along the axis: correction 0 is the
// population variance (LayerNorm's), 1 the unbiased sample variance
// (PyTorch's default). It is computed in two passes (the mean first, then
// the squared deviations), which does not lose the variance to
// cancellation when the mean is large, as E[x^2] - E[x]^2 does.
func Var(x *Tensor, axis, correction int, keepDim bool) *Tensor {
	axis = normAxis("Var", x, axis)
	n := x.shape[axis]
	if correction < 0 || n-correction < 1 {
		panic(fmt.Sprintf("core.Var: correction %d for %d elements along axis %d of %v (need 0 <= correction < n)", correction, n, axis, x.shape))
	}
	defer x.dev.composite("Var")()
	d := Sub(x, MeanAxis(x, axis, true))
	v := Scale(SumAxis(Mul(d, d), axis, keepDim), 1/float32(n-correction))
	return v
}

// Std returns the standard deviation along axis, sqrt(Var(x, axis,
// correction, keepDim)). Its gradient is infinite (NaN) where the
// deviation is 0, as sqrt's; add an eps to Var for a normalization.
func Std(x *Tensor, axis, correction int, keepDim bool) *Tensor {
	axis = normAxis("Std", x, axis)
	defer x.dev.composite("Std")()
	return Sqrt(Var(x, axis, correction, keepDim))
}

// toLast is the permutation moving axis to the end, and its inverse.
func toLast(rank, axis int) (perm, inv []int) {
	for i := range rank {
		if i != axis {
			perm = append(perm, i)
		}
	}
	perm = append(perm, axis)
	inv = make([]int, rank)
	for i, p := range perm {
		inv[p] = i
	}
	return perm, inv
}

// alongLast applies f (an op along the last axis) along axis: a permute
// there and back when axis is not already last.
func alongLast(x *Tensor, axis int, f func(*Tensor) *Tensor) *Tensor {
	if axis == x.Rank()-1 {
		return f(x)
	}
	perm, inv := toLast(x.Rank(), axis)
	return Permute(f(Permute(x, perm...)), inv...)
}

// SoftmaxAxis normalizes along axis (negative counts from the end):
// Softmax itself for the last axis, otherwise a permute of axis to the
// end and back around it (two copies).
func SoftmaxAxis(x *Tensor, axis int) *Tensor {
	axis = normAxis("SoftmaxAxis", x, axis)
	defer x.dev.composite("SoftmaxAxis")()
	return alongLast(x, axis, Softmax)
}

// LogSoftmaxAxis is log(SoftmaxAxis(x, axis)), computed stably, as
// SoftmaxAxis is.
func LogSoftmaxAxis(x *Tensor, axis int) *Tensor {
	axis = normAxis("LogSoftmaxAxis", x, axis)
	defer x.dev.composite("LogSoftmaxAxis")()
	return alongLast(x, axis, LogSoftmax)
}

// Cumsum returns the inclusive cumulative sum along axis. It is a matmul
// by an n x n upper-triangular matrix of ones (n = x's size along the
// axis), a Constant made once per device and size (so it may be used in a
// Capture): O(n^2) work and memory per row instead of
// O(n), fine for sequence lengths of a few thousand, not beyond. Each
// output is a dot product, so it is summed as the backend's matmul sums
// (not sequentially), and its gradient is the reverse cumulative sum.
// Infinities and NaN propagate as a sequential sum's do (a NaN, or +Inf
// and -Inf together, makes that output and every later one NaN, not the
// earlier ones through 0*Inf in the matmul); a non-finite input gets no
// gradient.
func Cumsum(x *Tensor, axis int) *Tensor {
	axis = normAxis("Cumsum", x, axis)
	n := x.shape[axis]
	if n > 1<<13 {
		panic(fmt.Sprintf("core.Cumsum: %d elements along axis %d of %v: the %dx%d triangle would be too large", n, axis, x.shape, n, n))
	}
	defer x.dev.composite("Cumsum")()
	u := x.dev.constant(fmt.Sprintf("upper %d", n), func() []float32 {
		tri := make([]float32, n*n)
		for i := range n {
			for j := i; j < n; j++ {
				tri[i*n+j] = 1
			}
		}
		return tri
	}, n, n)
	return alongLast(x, axis, func(y *Tensor) *Tensor {
		flat := Reshape(y, -1, n)
		// the finite values summed by the matmul, the non-finite ones counted
		// by a second (0/1 masks: no 0*Inf) and added as their IEEE sum
		pinf, ninf, nan := EqualScalar(flat, inf), EqualScalar(flat, -inf), isNaN(flat)
		negZero := x.dev.Full(float32(math.Copysign(0, -1))) // x + -0 is x exactly
		sum := MatMul(Where(Add(Add(pinf, ninf), nan), negZero, flat), u)
		rows := flat.shape[0]
		counts := MatMul(ConcatRows(ConcatRows(pinf, ninf), nan), u)
		cp, cn, cnan := SliceRows(counts, 0, rows), SliceRows(counts, rows, rows), SliceRows(counts, 2*rows, rows)
		hasNaN := Add(cnan, Mul(cp, cn)) // a NaN, or both infinities, so far
		special := Where(hasNaN, x.dev.Full(float32(math.NaN())),
			Where(cp, x.dev.Full(inf), Where(cn, x.dev.Full(-inf), negZero)))
		return Reshape(Add(sum, special), y.shape...)
	})
}

// Concat joins tensors along axis (negative counts from the end); they
// must agree on every other dimension. Axis 0 is ConcatRows; another axis
// is a permute of it to the front, ConcatRows and a permute back.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("core.Concat: no tensors")
	}
	needTensors("Concat", ts...)
	axis = normAxis("Concat", ts[0], axis)
	for i, t := range ts[1:] {
		if t.Rank() != ts[0].Rank() {
			panic(fmt.Sprintf("core.Concat: tensor %d of shape %v and tensor 0 of shape %v differ in rank", i+1, t.shape, ts[0].shape))
		}
		for a := range t.shape {
			if a != axis && t.shape[a] != ts[0].shape[a] {
				panic(fmt.Sprintf("core.Concat: tensor %d of shape %v and tensor 0 of shape %v differ on axis %d (joining along %d)", i+1, t.shape, ts[0].shape, a, axis))
			}
		}
	}
	if len(ts) == 1 {
		return ts[0]
	}
	defer ts[0].dev.composite("Concat")()
	var perm []int
	if axis != 0 {
		perm = make([]int, ts[0].Rank())
		perm[0] = axis
		for i, k := 1, 0; i < len(perm); k++ {
			if k != axis {
				perm[i] = k
				i++
			}
		}
	}
	front := func(t *Tensor) *Tensor {
		if perm == nil {
			return t
		}
		return Permute(t, perm...)
	}
	out := front(ts[0])
	for _, t := range ts[1:] {
		out = ConcatRows(out, front(t))
	}
	if perm == nil {
		return out
	}
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return Permute(out, inv...)
}

// Stack joins tensors of one shape along a new axis (0..rank; negative
// counts from the end of the result's axes), so the result has rank + 1
// dimensions (at most backend.MaxRank, 6).
func Stack(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("core.Stack: no tensors")
	}
	needTensors("Stack", ts...)
	r := ts[0].Rank()
	if axis < 0 {
		axis += r + 1
	}
	if axis < 0 || axis > r {
		panic(fmt.Sprintf("core.Stack: axis %d out of range for stacking tensors of shape %v", axis, ts[0].shape))
	}
	for i, t := range ts[1:] {
		if !slices.Equal(t.shape, ts[0].shape) {
			panic(fmt.Sprintf("core.Stack: tensor %d of shape %v and tensor 0 of shape %v differ", i+1, t.shape, ts[0].shape))
		}
	}
	s := slices.Insert(slices.Clone(ts[0].shape), axis, 1)
	checkShape("Stack", s)
	defer ts[0].dev.composite("Stack")()
	us := make([]*Tensor, len(ts))
	for i, t := range ts {
		us[i] = Reshape(t, s...)
	}
	return Concat(axis, us...)
}
