package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Ops are package functions on tensors, like gonum's. Each checks shapes and
// panics with the op and the shapes on a mistake (a programming error), then
// records one node of the backend IR on the tensors' device. Nothing runs
// until a sync point (Data, Item, Device.Sync).

func unary(fn string, op backend.Op, x *Tensor, a, b float32) *Tensor {
	needTensors(fn, x)
	// shapes never change once made, so the result shares its input's
	return x.dev.record(fn, op, x.shape, attrs{A: a, B: b}, x)
}

func binary(fn string, op backend.Op, a, b *Tensor) *Tensor {
	needTensors(fn, a, b)
	if slices.Equal(a.shape, b.shape) {
		return a.dev.record(fn, op, a.shape, attrs{}, a, b) // shared, as in unary
	}
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s, err := backend.AppendBroadcastShape(buf[:0], a.shape, b.shape)
	if err != nil {
		panic(fmt.Sprintf("core.%s: %v", fn, err))
	}
	return a.dev.recordShaped(fn, op, s, attrs{}, a, b)
}

// Add returns a+b with numpy broadcasting.
func Add(a, b *Tensor) *Tensor { return binary("Add", backend.OpAdd, a, b) }

// Sub returns a-b with numpy broadcasting.
func Sub(a, b *Tensor) *Tensor { return binary("Sub", backend.OpSub, a, b) }

// Mul returns a*b elementwise with numpy broadcasting.
func Mul(a, b *Tensor) *Tensor { return binary("Mul", backend.OpMul, a, b) }

// Div returns a/b elementwise with numpy broadcasting.
func Div(a, b *Tensor) *Tensor { return binary("Div", backend.OpDiv, a, b) }

// Maximum returns the elementwise larger of a and b with numpy
// broadcasting: NaN where either is, a where they are equal. Its gradient
// goes to the larger input, half to each on ties, as PyTorch's; where a-b
// is NaN (a NaN, or equal infinities) the gradient is NaN.
func Maximum(a, b *Tensor) *Tensor { return binary("Maximum", backend.OpMaximum, a, b) }

// Minimum returns the elementwise smaller of a and b, -Maximum(-a, -b): NaN
// where either is, a where they are equal, its gradient as Maximum's.
func Minimum(a, b *Tensor) *Tensor {
	needTensors("Minimum", a, b)
	defer a.dev.composite("Minimum")()
	return Neg(Maximum(Neg(a), Neg(b)))
}

// Neg returns -x.
func Neg(x *Tensor) *Tensor { return unary("Neg", backend.OpNeg, x, 0, 0) }

// Exp returns e^x.
func Exp(x *Tensor) *Tensor { return unary("Exp", backend.OpExp, x, 0, 0) }

// Expm1 returns e^x - 1, accurate near 0, where Exp(x) - 1 keeps only
// the absolute precision of e^x near 1 (a primitive, torch.expm1). Its
// gradient is e^x. On ggml it is exp(x) - 1 (absolute error about 1e-7).
func Expm1(x *Tensor) *Tensor { return unary("Expm1", backend.OpExpm1, x, 0, 0) }

// Log returns the natural logarithm of x.
func Log(x *Tensor) *Tensor { return unary("Log", backend.OpLog, x, 0, 0) }

// Sqrt returns the square root of x.
func Sqrt(x *Tensor) *Tensor { return unary("Sqrt", backend.OpSqrt, x, 0, 0) }

// ReLU returns max(x, 0).
func ReLU(x *Tensor) *Tensor { return unary("ReLU", backend.OpReLU, x, 0, 0) }

// Sigmoid returns 1/(1+e^-x).
func Sigmoid(x *Tensor) *Tensor { return unary("Sigmoid", backend.OpSigmoid, x, 0, 0) }

// Tanh returns tanh(x).
func Tanh(x *Tensor) *Tensor { return unary("Tanh", backend.OpTanh, x, 0, 0) }

// Abs returns |x| (a primitive: one kernel). Its gradient is sign(x): 0 at
// 0 and NaN at NaN, as PyTorch's.
func Abs(x *Tensor) *Tensor { return unary("Abs", backend.OpAbs, x, 0, 0) }

// Sin returns sin(x) (radians; a primitive). Its gradient is cos(x).
func Sin(x *Tensor) *Tensor { return unary("Sin", backend.OpSin, x, 0, 0) }

// Cos returns cos(x) (radians; a primitive). Its gradient is -sin(x).
func Cos(x *Tensor) *Tensor { return unary("Cos", backend.OpCos, x, 0, 0) }

// RoundF16 rounds x to the nearest f16 (IEEE binary16) value, ties to
// even, as f32: what storing x in f16 keeps (magnitudes from 65520 become
// ±Inf). Its gradient passes straight through, as a cast's does in
// PyTorch's autocast. Every backend computes it bit for bit alike.
func RoundF16(x *Tensor) *Tensor { return unary("RoundF16", backend.OpRoundF16, x, 0, 0) }

// RoundBF16 rounds x to the nearest bfloat16 value, ties to even, as f32,
// with a straight-through gradient like RoundF16. ggml-vulkan cannot
// convert bf16 back to f32: there a run with it fails, naming the op.
func RoundBF16(x *Tensor) *Tensor { return unary("RoundBF16", backend.OpRoundBF16, x, 0, 0) }

// Sign returns -1, 0 or 1 by the sign of x (NaN for NaN, ±1 for ±Inf). A
// composite: x scaled by 2^127 is at least 2^-22 in magnitude for every
// nonzero x (subnormals included), so clamping it to ±2^-22 and scaling by
// 2^22 gives exactly ±1, 0 at 0 and NaN at NaN. It carries no gradient (its
// derivative is 0 wherever it is defined), as PyTorch's.
func Sign(x *Tensor) *Tensor {
	needTensors("Sign", x)
	defer x.dev.composite("Sign")()
	return Scale(Clamp(Scale(detach("Sign", x), 0x1p127), -0x1p-22, 0x1p-22), 0x1p22)
}

// detach is x as a value without gradient (a reshape to its own shape: a
// view, no kernel): the ops a composite builds on it carry none.
func detach(fn string, x *Tensor) *Tensor {
	return x.dev.recordGrad(fn, backend.OpReshape, slices.Clone(x.shape), attrs{}, false, x)
}

// SiLU returns x*sigmoid(x) (swish), a composite: its gradient comes from
// Mul's and Sigmoid's.
func SiLU(x *Tensor) *Tensor {
	needTensors("SiLU", x)
	defer x.dev.composite("SiLU")()
	return Mul(x, Sigmoid(x))
}

// Scale returns s*x.
func Scale(x *Tensor, s float32) *Tensor { return unary("Scale", backend.OpAffine, x, s, 0) }

// AddScalar returns x+c.
func AddScalar(x *Tensor, c float32) *Tensor { return unary("AddScalar", backend.OpAffine, x, 1, c) }

// Affine returns a*x + b.
func Affine(x *Tensor, a, b float32) *Tensor { return unary("Affine", backend.OpAffine, x, a, b) }

// Pow returns x^p for a constant finite p, with C's powf at zeros, infinities
// and NaN (x^0 = 1 for every x; x<0 with a non-integer p gives NaN; see
// backend.Op). A non-finite p panics.
func Pow(x *Tensor, p float32) *Tensor {
	if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
		panic(fmt.Sprintf("core.Pow: exponent %g is not finite", p))
	}
	return unary("Pow", backend.OpPowConst, x, p, 0)
}

// Clamp limits x to [lo, hi]. Its gradient passes straight through inside
// the range, the bounds included (1 at x == lo and x == hi, also when lo ==
// hi), and is zero outside, as PyTorch's clamp: a value sitting exactly on a
// bound (an activation clamped at 0 of a zero-initialized layer) still
// learns. It is NaN where x is NaN.
func Clamp(x *Tensor, lo, hi float32) *Tensor {
	if !(lo <= hi) {
		panic(fmt.Sprintf("core.Clamp: lo %g > hi %g (or NaN)", lo, hi))
	}
	return unary("Clamp", backend.OpClamp, x, lo, hi)
}

// inside is the 0/1 mask lo < x < hi (no gradient).
func inside(x *Tensor, lo, hi float32) *Tensor {
	return unary("inside", backend.OpInside, x, lo, hi)
}

// Softmax normalizes along the last axis.
func Softmax(x *Tensor) *Tensor {
	needRank("Softmax", x, 1)
	return x.dev.record("Softmax", backend.OpSoftmax, slices.Clone(x.shape), attrs{}, x)
}

// LogSoftmax is log(Softmax(x)) along the last axis, computed stably.
func LogSoftmax(x *Tensor) *Tensor {
	needRank("LogSoftmax", x, 1)
	return x.dev.record("LogSoftmax", backend.OpLogSoftmax, slices.Clone(x.shape), attrs{}, x)
}

func needRank(fn string, x *Tensor, min int) {
	needTensors(fn, x)
	if x.Rank() < min {
		panic(fmt.Sprintf("core.%s: input of shape %v needs at least %d dimensions", fn, x.shape, min))
	}
}

func normAxis(fn string, x *Tensor, axis int) int {
	needTensors(fn, x)
	r, given := x.Rank(), axis
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		panic(fmt.Sprintf("core.%s: axis %d out of range for shape %v", fn, given, x.shape))
	}
	return axis
}

// sumKeep sums along axis keeping the rank (the IR's OpSum).
func sumKeep(fn string, x *Tensor, axis int) *Tensor {
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s := append(buf[:0], x.shape...)
	s[axis] = 1
	return x.dev.recordShaped(fn, backend.OpSum, s, attrs{Axis: int32(axis)}, x)
}

// Sum adds all elements into a scalar (shape []).
func Sum(x *Tensor) *Tensor {
	needTensors("Sum", x)
	if x.Rank() == 0 {
		return x
	}
	defer x.dev.composite("Sum")()
	flat := x
	if x.Rank() != 1 {
		flat = Reshape(x, x.Len())
	}
	return Reshape(sumKeep("Sum", flat, 0))
}

// SumAxis sums along axis (negative counts from the end); keepDim keeps
// the axis with size 1.
func SumAxis(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = normAxis("SumAxis", x, axis)
	defer x.dev.composite("SumAxis")()
	y := sumKeep("SumAxis", x, axis)
	if keepDim {
		return y
	}
	return Reshape(y, slices.Delete(slices.Clone(x.shape), axis, axis+1)...)
}

// Mean averages all elements into a scalar.
func Mean(x *Tensor) *Tensor {
	needTensors("Mean", x)
	defer x.dev.composite("Mean")()
	return Scale(Sum(x), 1/float32(x.Len()))
}

// MeanAxis averages along axis; keepDim keeps the axis with size 1.
func MeanAxis(x *Tensor, axis int, keepDim bool) *Tensor {
	axis = normAxis("MeanAxis", x, axis)
	defer x.dev.composite("MeanAxis")()
	return Scale(SumAxis(x, axis, keepDim), 1/float32(x.shape[axis]))
}

// Reshape views x with a new shape of the same size; one dimension may be -1.
func Reshape(x *Tensor, shape ...int) *Tensor {
	needTensors("Reshape", x)
	var buf [backend.MaxRank]int // scratch: recordShaped copies it (messages print copies)
	shape = append(buf[:0], shape...)
	if len(shape) > backend.MaxRank {
		panic(fmt.Sprintf("core.Reshape: %v cannot become %v: %d dimensions, more than backend.MaxRank = %d", x.shape, slices.Clone(shape), len(shape), backend.MaxRank))
	}
	infer, known := -1, 1
	for i, s := range shape {
		switch {
		case s == -1 && infer < 0:
			infer = i
		case s < 1 || known > x.Len()/s: // also keeps the product from overflowing
			panic(fmt.Sprintf("core.Reshape: %v (%d elements) cannot become %v", x.shape, x.Len(), slices.Clone(shape)))
		default:
			known *= s
		}
	}
	if infer >= 0 && x.Len()%known == 0 {
		shape[infer] = x.Len() / known
	}
	if err := backend.CheckShape(shape); err != nil {
		panic(fmt.Sprintf("core.Reshape: %v cannot become %v: %v", x.shape, slices.Clone(shape), err))
	}
	if backend.NumElems(shape) != x.Len() {
		panic(fmt.Sprintf("core.Reshape: %v (%d elements) cannot become %v", x.shape, x.Len(), slices.Clone(shape)))
	}
	if slices.Equal(shape, x.shape) {
		return x
	}
	return x.dev.recordShaped("Reshape", backend.OpReshape, shape, attrs{}, x)
}

// Permute reorders axes: output axis i is input axis perm[i].
func Permute(x *Tensor, perm ...int) *Tensor {
	needTensors("Permute", x)
	if len(perm) != x.Rank() {
		panic(fmt.Sprintf("core.Permute: perm %v for shape %v", perm, x.shape))
	}
	s := make([]int, len(perm))
	seen := make([]bool, len(perm))
	for i, p := range perm {
		if p < 0 || p >= len(perm) || seen[p] {
			panic(fmt.Sprintf("core.Permute: perm %v is not a permutation of %d axes", perm, len(perm)))
		}
		seen[p] = true
		s[i] = x.shape[p]
	}
	return x.dev.record("Permute", backend.OpPermute, s, attrs{Perm: slices.Clone(perm)}, x)
}

// Transpose swaps the last two axes.
func Transpose(x *Tensor) *Tensor {
	needRank("Transpose", x, 2)
	r := x.Rank()
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[r-2], perm[r-1] = r-1, r-2
	return Permute(x, perm...)
}

// Expand broadcasts x to shape (numpy rules).
func Expand(x *Tensor, shape ...int) *Tensor {
	needTensors("Expand", x)
	checkShape("Expand", shape)
	s, err := backend.BroadcastShape(x.shape, shape)
	if err != nil || !slices.Equal(s, shape) {
		panic(fmt.Sprintf("core.Expand: shape %v does not broadcast to %v", x.shape, shape))
	}
	if slices.Equal(x.shape, shape) {
		return x
	}
	return x.dev.recordShaped("Expand", backend.OpExpand, shape, attrs{}, x)
}

// SliceRows takes n rows of x starting at row from (along axis 0).
func SliceRows(x *Tensor, from, n int) *Tensor {
	needRank("SliceRows", x, 1)
	if n < 1 || !backend.InRange(from, n, x.shape[0]) {
		panic(fmt.Sprintf("core.SliceRows: rows %d..%d of shape %v", from, from+n-1, x.shape))
	}
	s := slices.Clone(x.shape)
	s[0] = n
	return x.dev.record("SliceRows", backend.OpSliceRows, s, attrs{Start: from}, x)
}

// ConcatRows joins a and b along axis 0.
func ConcatRows(a, b *Tensor) *Tensor {
	needTensors("ConcatRows", a, b)
	needRank("ConcatRows", a, 1)
	if a.Rank() != b.Rank() || !slices.Equal(a.shape[1:], b.shape[1:]) {
		panic(fmt.Sprintf("core.ConcatRows: shapes %v and %v differ beyond axis 0", a.shape, b.shape))
	}
	s := slices.Clone(a.shape)
	s[0] += b.shape[0]
	checkShape("ConcatRows", s)
	return a.dev.record("ConcatRows", backend.OpConcatRows, s, attrs{}, a, b)
}

// Gather selects rows of x by the indices idx (a 1-D tensor of whole numbers,
// no gradient): the result has shape [len(idx), x.shape[1:]...]. Indices out
// of range are clamped on the device, so they never read outside x.
func Gather(x, idx *Tensor) *Tensor {
	needTensors("Gather", x, idx)
	needRank("Gather", x, 1)
	if idx.Rank() != 1 {
		panic(fmt.Sprintf("core.Gather: indices of shape %v, want 1-D", idx.shape))
	}
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s := append(buf[:0], x.shape...)
	s[0] = idx.shape[0]
	return x.dev.recordShaped("Gather", backend.OpGetRows, s, attrs{}, x, idx)
}

// scatterAddRows is Gather's adjoint: rows of src added into a zero [rows, ...].
func scatterAddRows(src, idx *Tensor, rows int) *Tensor {
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s := append(buf[:0], src.shape...)
	s[0] = rows
	return src.dev.recordShaped("scatterAddRows", backend.OpScatterAddRows, s, attrs{}, src, idx)
}

// OneHot turns 1-D class indices into [n, classes] rows with a 1 at each
// index (no gradient). More than backend.MaxClasses classes (2^24: f32
// indices name no more exactly) fail the sync that runs it, naming the
// count. Indices given as host data (Device.Tensor) are
// checked at the sync that uploads them: a label that is not a whole number
// in 0..classes-1 fails that sync with an error naming it. Indices computed
// on the device are rounded and clamped there, like every device-side index.
func OneHot(idx *Tensor, classes int) *Tensor {
	needTensors("OneHot", idx)
	if idx.Rank() != 1 || classes < 1 {
		panic(fmt.Sprintf("core.OneHot: indices of shape %v, %d classes", idx.shape, classes))
	}
	s := []int{idx.shape[0], classes}
	checkShape("OneHot", s)
	return idx.dev.recordGrad("OneHot", backend.OpOneHot, s, attrs{}, false, idx)
}

// Full makes a tensor of the given shape with every element v (recorded
// lazily, so it costs no upload).
func (d *Device) Full(v float32, shape ...int) *Tensor {
	if d == nil {
		panic("core.Full: nil device")
	}
	checkShape("Full", shape)
	return d.recordShaped("Full", backend.OpFill, shape, attrs{A: v})
}

// MatMul is numpy's matmul: [..., M, K] x [..., K, N] -> [..., M, N], the
// batch dimensions broadcast (numpy rules), a 1-D a is a row vector [K] and
// a 1-D b a column vector [K] whose unit dimension the result drops (so a
// matrix times a vector is a vector).
func MatMul(a, b *Tensor) *Tensor { return MatMulT(a, b, false, false) }

// MatMulT multiplies op(a) by op(b), where op transposes the last two
// dimensions when the flag is set, without materializing the transpose.
// Shapes follow MatMul (a flag on a 1-D operand is ignored). A product
// whose b is a matrix is one matrix product over all the rows of a (no copy
// of b per batch); other broadcast batch dimensions are expanded, and the
// gradient sums over them.
func MatMulT(a, b *Tensor, transA, transB bool) *Tensor {
	needTensors("MatMul", a, b)
	if a.Rank() == 0 || b.Rank() == 0 {
		panic(fmt.Sprintf("core.MatMul: shapes %v and %v (scalars do not multiply as matrices)", a.shape, b.shape))
	}
	if a.Rank() == b.Rank() && a.Rank() >= 2 && slices.Equal(a.shape[:a.Rank()-2], b.shape[:b.Rank()-2]) {
		return matmul(a, b, transA, transB)
	}
	defer a.dev.composite("MatMul")()
	vecA, vecB := a.Rank() == 1, b.Rank() == 1
	if vecA {
		a, transA = Reshape(a, 1, a.shape[0]), false
	}
	if vecB {
		b, transB = Reshape(b, b.shape[0], 1), false
	}
	ra, rb := a.Rank(), b.Rank()
	var y *Tensor
	switch {
	case rb == 2 && ra > 2 && !transA:
		// [..., M, K] x [K, N]: one product over every row of a, with no
		// reshapes (composite_linear.go).
		y = linear(a, b, transB)
	default:
		batch, err := backend.BroadcastShape(a.shape[:ra-2], b.shape[:rb-2])
		if err != nil {
			panic(fmt.Sprintf("core.MatMul: shapes %v and %v: batch dimensions: %v", a.shape, b.shape, err))
		}
		a = Expand(a, append(slices.Clone(batch), a.shape[ra-2:]...)...)
		b = Expand(b, append(slices.Clone(batch), b.shape[rb-2:]...)...)
		y = matmul(a, b, transA, transB)
	}
	s := y.shape
	switch {
	case vecA && vecB:
		s = s[:len(s)-2]
	case vecA:
		s = append(slices.Clone(s[:len(s)-2]), s[len(s)-1])
	case vecB:
		s = s[:len(s)-1]
	}
	if len(s) != y.Rank() {
		y = Reshape(y, s...)
	}
	return y
}

// matmul records the primitive: equal ranks >= 2 and equal batch
// dimensions, the operands rounded to the device's matmul precision.
func matmul(a, b *Tensor, transA, transB bool) *Tensor {
	a, b = roundOperands(a, b)
	r := a.Rank()
	m, k := a.shape[r-2], a.shape[r-1]
	if transA {
		m, k = k, m
	}
	k2, n := b.shape[r-2], b.shape[r-1]
	if transB {
		k2, n = n, k2
	}
	if k != k2 {
		panic(fmt.Sprintf("core.MatMul: inner dimensions differ: %v (trans %t) x %v (trans %t)", a.shape, transA, b.shape, transB))
	}
	var buf [backend.MaxRank]int // scratch: recordShaped copies it
	s := append(buf[:0], a.shape...)
	s[r-2], s[r-1] = m, n
	return a.dev.recordShaped("MatMul", backend.OpMatMul, s, attrs{TransA: transA, TransB: transB}, a, b)
}

// roundOperands returns a product's operands rounded to the device's
// matmul precision (SetMatMulPrecision).
func roundOperands(a, b *Tensor) (*Tensor, *Tensor) {
	if op := a.dev.matMulRound(); op != backend.OpInvalid {
		a, b = roundedTo(a, op), roundedTo(b, op)
	}
	return a, b
}

// roundedTo rounds x with op (OpRoundF16, OpRoundBF16) unless it is that
// rounding already (a gradient's matmul reuses a forward operand), or x has
// a rounding still to run: the q, k and v projections of one input and a
// gradient's two products read one round, where each made a copy (a
// kernel) of its own. Only a pending x: its value is fixed until it runs,
// while a realized one may be a parameter an update changes in between.
func roundedTo(x *Tensor, op backend.Op) *Tensor {
	if x.op == op {
		return x
	}
	d := x.dev
	shared := x.state() == statePending && !x.op.InPlace()
	if shared {
		d.lock()
		r := d.rounds[roundKey{x, op}]
		d.mu.Unlock()
		if r != nil && r.state() == statePending {
			return r
		}
	}
	end := d.composite("MatMul")
	r := unary(op.String(), op, x, 0, 0)
	end()
	if shared {
		d.lock()
		if d.rounds == nil {
			d.rounds = map[roundKey]*Tensor{}
		}
		d.rounds[roundKey{x, op}] = r
		d.mu.Unlock()
	}
	return r
}

// roundKey names a pending rounding: of value x by op (see roundedTo).
type roundKey struct {
	x  *Tensor
	op backend.Op
}

// inf is +Inf as f32, for masks without an upper bound.
var inf = float32(math.Inf(1))

// Gradients. Each op of the IR has its vector-Jacobian product here, next
// to the function that records it, so that an op is added in one file.

// vjp returns the gradient of input k of n given the gradient g of n (nil
// where none flows), expressed in the same IR ops.
func vjp(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
	if n.op.IsComposite() {
		return compositeOf(n.op).grad(n, in, g, k)
	}
	x := in[k]
	switch n.op {
	case backend.OpAdd:
		return unbroadcast(g, x.shape)
	case backend.OpSub:
		if k == 1 {
			g = Neg(g)
		}
		return unbroadcast(g, x.shape)
	case backend.OpMul:
		return unbroadcast(Mul(g, in[1-k]), x.shape)
	case backend.OpDiv:
		if k == 0 {
			return unbroadcast(Div(g, in[1]), x.shape)
		}
		return unbroadcast(Neg(Div(Mul(g, n), in[1])), x.shape)
	case backend.OpMaximum:
		// d/da = (1 + sign(a-b))/2: 1 where a is larger, 0 where b is, 1/2
		// on ties; d/db the other half.
		s := Sign(Sub(in[0], in[1]))
		if k == 1 {
			s = Neg(s)
		}
		return unbroadcast(Mul(g, Affine(s, 0.5, 0.5)), x.shape)
	case backend.OpKeep:
		if k == 0 {
			return nil // the mask
		}
		return unbroadcast(keep(in[0], g), x.shape) // only where the value was kept
	case backend.OpNeg:
		return Neg(g)
	case backend.OpAbs:
		return Mul(g, Sign(x))
	case backend.OpRoundF16, backend.OpRoundBF16:
		return g // straight through, as a cast
	case backend.OpSin:
		return Mul(g, Cos(x))
	case backend.OpCos:
		return Mul(g, Neg(Sin(x)))
	case backend.OpExp:
		return Mul(g, n)
	case backend.OpExpm1:
		return Mul(g, AddScalar(n, 1)) // e^x from the output, as Exp's
	case backend.OpLog:
		return Div(g, x)
	case backend.OpSqrt:
		return Div(g, Scale(n, 2))
	case backend.OpReLU:
		return Mul(g, reluMask(n)) // n > 0 where x > 0, NaN where x is: x itself need not stay
	case backend.OpSigmoid:
		return Mul(g, Mul(n, Affine(n, -1, 1)))
	case backend.OpTanh:
		return Mul(g, Affine(Mul(n, n), -1, 1))
	case backend.OpAffine:
		return Scale(g, n.attr.A)
	case backend.OpPowConst:
		p := n.attr.A
		if p == 0 {
			// x^0 is 1 everywhere, so its derivative is 0 everywhere, as
			// PyTorch gives: 0*x^-1 would be NaN at x = 0 and x = NaN.
			return g.dev.Full(0, x.shape...)
		}
		return Mul(g, Scale(Pow(x, p-1), p)) // at 0: p*0^(p-1), +Inf for p = 0.5
	case backend.OpClamp:
		return Mul(g, passMask(x, n, n.attr.A, n.attr.B))
	case backend.OpSum:
		return Expand(g, x.shape...)
	case backend.OpSoftmax:
		gy := Mul(g, n)
		return Sub(gy, Mul(n, sumKeep("SoftmaxGrad", gy, n.Rank()-1)))
	case backend.OpLogSoftmax:
		return Sub(g, Mul(Exp(n), sumKeep("LogSoftmaxGrad", g, n.Rank()-1)))
	case backend.OpReshape:
		return Reshape(g, x.shape...)
	case backend.OpPermute:
		inv := make([]int, len(n.attr.Perm))
		for i, p := range n.attr.Perm {
			inv[p] = i
		}
		return Permute(g, inv...)
	case backend.OpExpand:
		return unbroadcast(g, x.shape)
	case backend.OpSliceRows:
		from, rows := n.attr.Start, n.shape[0]
		out := g
		if from > 0 {
			out = ConcatRows(g.dev.Full(0, withRows(x.shape, from)...), out)
		}
		if rest := x.shape[0] - from - rows; rest > 0 {
			out = ConcatRows(out, g.dev.Full(0, withRows(x.shape, rest)...))
		}
		return out
	case backend.OpConcatRows:
		if k == 0 {
			return SliceRows(g, 0, x.shape[0])
		}
		return SliceRows(g, in[0].shape[0], x.shape[0])
	case backend.OpGetRows:
		if k == 0 {
			if inv := inverseOf(in[1], x.shape[0]); inv != nil {
				return inv.gather(g)
			}
			return scatterAddRows(g, in[1], x.shape[0])
		}
		return nil // the indices
	case backend.OpScatterAddRows:
		if k == 0 {
			return Gather(g, in[1])
		}
		return nil
	case backend.OpMatMul:
		a, b := in[0], in[1]
		ta, tb := n.attr.TransA, n.attr.TransB
		switch {
		case k == 0 && !ta:
			return MatMulT(g, b, false, !tb)
		case k == 0:
			return MatMulT(b, g, tb, true)
		case !tb:
			return MatMulT(a, g, !ta, false)
		default:
			return MatMulT(g, a, true, ta)
		}
	case backend.OpAttention:
		needs := make([]bool, len(in))
		needs[k] = true
		return attentionVJP(n, in, g, needs)[k] // (Backward asks for all at once)
	case backend.OpMax, backend.OpOneHot, backend.OpFill, backend.OpInside, backend.OpArg, backend.OpAdamW, backend.OpSGD, backend.OpRandUniform:
		return nil // no gradient flows through a selection, a mask, a constant, an update or a random draw
	default:
		backend.Unknown("core.vjp", n.op)
	}
	return nil
}

// The gradient masks of ReLU and Clamp are NaN where x is NaN, so that a
// NaN input gives a NaN gradient rather than a zero one (inside alone is a
// comparison mask, 0 at NaN).

// passMask is Clamp's gradient mask, as PyTorch's clamp_backward (which
// takes the subgradient 1 at the bounds): 1 where lo <= x <= hi, 0
// elsewhere, NaN at NaN. n is Clamp(x, lo, hi). With finite bounds x -
// clamp(x) is exactly 0 inside and nonzero outside (a difference of two
// distinct f32 values is never 0, and Sign sees its subnormals); an
// infinite bound is compared on its own, since Inf - Inf is NaN.
func passMask(x, n *Tensor, lo, hi float32) *Tensor {
	// 0, or NaN where x is: added to the mask; detached, or a gradient
	// differentiated again (Grad's CreateGraph) got Clamp's 1 at x = 0
	nan := Clamp(detach("Clamp", x), 0, 0)
	loInf, hiInf := math.IsInf(float64(lo), 0), math.IsInf(float64(hi), 0)
	var m *Tensor
	switch {
	case !loInf && !hiInf:
		m = inside(Sign(Sub(x, n)), -0.5, 0.5)
	case lo == hi: // both +Inf or both -Inf: the mask is x == lo
		inf := Sign(Sub(x, Clamp(x, -maxF32, maxF32))) // ±1 at ±Inf, 0 elsewhere
		if lo > 0 {
			m = inside(inf, 0.5, 2)
		} else {
			m = inside(inf, -2, -0.5)
		}
	case !loInf: // hi is +Inf: x >= lo
		m = inside(Sign(AddScalar(x, -lo)), -0.5, 2)
	case !hiInf: // lo is -Inf: x <= hi
		m = inside(Sign(AddScalar(x, -hi)), -2, 0.5)
	default: // (-Inf, +Inf): every number passes
		return AddScalar(nan, 1)
	}
	return Add(m, nan)
}

func withRows(shape []int, rows int) []int {
	s := slices.Clone(shape)
	s[0] = rows
	return s
}

// unbroadcast sums g (of a broadcast shape) back down to shape.
func unbroadcast(g *Tensor, shape []int) *Tensor {
	if slices.Equal(g.shape, shape) {
		return g
	}
	off := g.Rank() - len(shape)
	var axes [backend.MaxRank]int
	n := 0
	for ax := 0; ax < g.Rank(); ax++ {
		if ax < off || shape[ax-off] == 1 && g.shape[ax] != 1 {
			axes[n] = ax
			n++
		}
	}
	if n > 1 || n == 1 && axes[0] == 0 && g.Rank() > 1 {
		// Several axes, or the leading one that is not the last (a bias
		// [B, T, C] -> [C] or [1, T, C]): one sum_to, which ggml reduces
		// in one kernel where a sum along a leading axis is a permuted
		// copy and a row sum.
		return SumTo(g, shape...)
	}
	if n == 1 {
		g = sumKeep("unbroadcast", g, axes[0])
	}
	return Reshape(g, shape...)
}
