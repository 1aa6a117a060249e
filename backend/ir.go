package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Op is one primitive operation of the IR. The set is small on purpose (in the
// spirit of tinygrad and ggml): everything core offers, gradients and optimizer
// updates included, lowers to these, so a backend that runs them runs training.
//
// # Special values
//
// Every op computes in IEEE 754 f32 as C and PyTorch do, identically on every
// backend, so that a NaN or an infinity is never silently turned into a
// finite number (a NaN input must give a NaN loss, not finite weights gone
// bad). backendtest's "special/..." cases feed NaN, ±Inf, ±0 and subnormals
// to every op and check this table on every backend:
//
//	add sub mul div   IEEE: NaN in -> NaN; Inf-Inf, 0*Inf, Inf/Inf, 0/0 are NaN;
//	                  x/±0 is ±Inf by the signs
//	maximum           NaN if either operand is; else the larger, a on ties
//	                  (so of -0 and +0 the first)
//	keep              b where a != 0 or a is NaN, else -0; b's value moves
//	                  unchanged whatever it is (a = 0 and b = Inf give -0)
//	neg               -x (NaN stays NaN)
//	exp               exp(-Inf) = 0, exp(+Inf) = +Inf; overflow is +Inf
//	expm1             e^x - 1: expm1(-Inf) = -1, expm1(+Inf) = +Inf, NaN -> NaN;
//	                  overflow is +Inf; expm1(±0) = ±0
//	log               log(±0) = -Inf, log(+Inf) = +Inf, log(x<0) = NaN, log(-Inf) = NaN
//	sqrt              sqrt(±0) = ±0, sqrt(+Inf) = +Inf, sqrt(x<0) = NaN, sqrt(-Inf) = NaN
//	relu              max(x, 0) with NaN -> NaN: relu(-Inf) = 0, relu(+Inf) = +Inf
//	sigmoid           sigmoid(-Inf) = 0, sigmoid(+Inf) = 1, NaN -> NaN
//	tanh              tanh(±Inf) = ±1, NaN -> NaN
//	affine            x*A + B in IEEE arithmetic (A = 0 and x = ±Inf is NaN)
//	pow               C's powf(x, A) for a finite A (Validate rejects others):
//	                  x^0 = 1 for every x, NaN included; 0^A = +Inf for A < 0
//	                  (-0^A = -Inf for odd whole A < 0); (±Inf)^A by C's rules;
//	                  NaN^A = NaN for A != 0; a negative base with a non-whole
//	                  A is NaN, and here that includes -Inf (C gives +Inf or
//	                  +0 for (-Inf)^A, a limit no backend computes cheaply)
//	clamp             min(max(x, A), B) with NaN -> NaN; ±Inf clamp to the bounds
//	abs               |x|: abs(±Inf) = +Inf, abs(NaN) = NaN
//	sin cos           sin(±Inf) = cos(±Inf) = NaN, NaN -> NaN; sin(±0) = ±0,
//	                  cos(±0) = 1; for finite |x| > 2^16 any value in
//	                  [-1, 1] (GPUs reduce the argument in f32: the exact
//	                  value needs a reduction by 2*pi to 100+ bits)
//	round_f16         ±Inf and NaN stay; finite values round to nearest even,
//	round_bf16        overflowing to ±Inf (f16: from 65520; bf16: from
//	                  3.40282357e38); f16 keeps its subnormals (2^-24 steps)
//	inside            a mask: comparisons with NaN are false, so inside(NaN) = 0;
//	                  ±Inf are outside finite bounds
//	sum               IEEE sum in any order: NaN if any term is NaN or the terms
//	                  hold both +Inf and -Inf, else ±Inf if any term is
//	max               NaN if any element of the axis is NaN, else the largest
//	                  (an axis of -Inf gives -Inf)
//	softmax           per row, exp(x - max) / sum: a row holding a NaN or a +Inf
//	log_softmax       is NaN everywhere (+Inf - +Inf), as in PyTorch; -Inf
//	                  entries give 0 (log_softmax: -Inf) when the row has a
//	                  finite maximum; a row of only -Inf is NaN
//	matmul            IEEE products and sums in any order: NaN meets a whole
//	                  row of A and column of B; Inf times 0 is NaN
//	adamw sgd         the formulas below elementwise in IEEE arithmetic: a NaN
//	                  or infinite gradient makes that element's state NaN/Inf
//	                  as the formula says (never skipped, never clipped)
//	get_rows          index rounding and clamping as documented at each op: a
//	scatter_add_rows  NaN index counts as 0, ±Inf clamp to the first and last
//	one_hot           row; values move unchanged (NaN payloads need not be
//	                  kept), but a get_rows of packed words moves each
//	                  word's 32 bits exactly (see OpUnpackF16)
//	data movement     reshape, permute, expand, slices, concat, fill: values
//	                  move unchanged
//	attention         softmax's rule per query over the attended keys' scaled
//	                  scores (a NaN or +Inf score, from q or an attended
//	                  key's k, makes the query's result NaN), then IEEE sums
//	                  of products with v (matmul's rule); a query attending
//	                  no key is 0. Keys not attended are not read: their
//	                  values never matter - on ggml-vulkan only their finite
//	                  values, since ggml's flash attention computes keys in
//	                  blocks of 32 or 64 for groups of up to 8 queries, so
//	                  there a NaN or Inf at a key some query of the group
//	                  masks, or in the q of a query attending no key, may
//	                  make the group's results NaN, and a query whose
//	                  attended scores are all -Inf gives 0
//	rand_uniform      no float input: finite values in [0, 1), bit for bit
//	                  those of RandUniformFill (philox.go)
//	pack_f16          round_f16's / round_bf16's rounding, then the 16 bits
//	pack_bf16         (F16Bits, BF16Bits); a NaN is stored as a NaN of its
//	                  sign, its payload the device's (0x7e00 / 0x7fc0 here)
//	unpack_f16        the exact f32 of each 16-bit value (F16Value,
//	unpack_bf16       BF16Value): NaN stays NaN (its sign and payload the
//	                  device's: NVIDIA's gives 0x7fffffff), f16 subnormals are values
//
// Two latitudes the checks allow, because GPUs take them: the sign of a zero
// result is unspecified (an input -0 still acts as IEEE says, so 1/-0 = -Inf
// and log(-0) = -Inf), and subnormal inputs and results may be flushed to
// zero of the same sign (WGSL allows it; lavapipe does it).
type Op uint8

// The op set. Every value is f32; index operands are f32 holding whole numbers
// (exact below 2^24). Shapes are row-major with up to MaxRank (6) dimensions
// (a backend's kernels see at most NativeRank, 4: see plan.Expand); a rank-0
// shape is a scalar. "Broadcast" means numpy rules on right-aligned shapes.
const (
	OpInvalid Op = iota

	// OpArg reads Run's args[Node.Arg]: a device buffer bound at run time
	// (a parameter, an optimizer state, a realized tensor, a device table).
	OpArg
	// OpFill is a constant tensor: every element Node.A.
	OpFill

	// Binary elementwise ops with broadcasting of both operands to Node.Shape.
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpMaximum // max(a, b): NaN if either is, a on ties
	// OpKeep is b where a is nonzero (NaN counts as nonzero, as C's bool
	// conversion), else -0: an exact mask, unlike a*b, which is NaN where
	// b is ±Inf or NaN and a is 0 (core's Where adds two of them).
	OpKeep

	// Unary elementwise ops.
	OpNeg
	OpExp
	OpLog
	OpSqrt
	OpReLU
	OpSigmoid
	OpTanh
	OpAffine   // x*A + B
	OpPowConst // x^A for a finite A, as C's powf (see Special values)
	OpClamp    // min(max(x, A), B) for A <= B; NaN stays NaN
	OpInside   // 1 where A < x < B, else 0 (NaN too: the mask of ReLU' and Clamp')
	OpAbs      // |x|
	OpSin      // sin(x), x in radians
	OpCos      // cos(x), x in radians
	// OpRoundF16 rounds x to the nearest IEEE binary16 (f16) value, ties
	// to even, kept as f32: magnitudes from 65520 up become ±Inf, below
	// 2^-25 ±0 (f16 subnormals are values too). The value an f16 tensor
	// would hold: mixed precision and its emulation on every backend.
	OpRoundF16
	// OpRoundBF16 rounds x to the nearest bfloat16 (8 significant bits,
	// f32's exponent range) value, ties to even, kept as f32.
	OpRoundBF16
	// OpExpm1 is e^x - 1, accurate near 0 (where exp(x) - 1 loses the
	// digits of x to the rounding of e^x near 1): torch.expm1.
	OpExpm1

	// OpSum sums along Node.Axis; the output keeps the rank with that axis 1.
	OpSum
	// OpMax takes the maximum along Node.Axis; the output keeps the rank. An
	// axis holding a NaN gives NaN.
	OpMax
	// OpSoftmax and OpLogSoftmax work along the last axis.
	OpSoftmax
	OpLogSoftmax

	// OpReshape reinterprets the input (same element count) as Node.Shape.
	OpReshape
	// OpPermute reorders the axes: output axis i is input axis Node.Perm[i].
	OpPermute
	// OpExpand broadcasts the input to Node.Shape (numpy rules).
	OpExpand
	// OpSliceRows takes rows Node.Start .. Start+Shape[0]-1 along axis 0.
	OpSliceRows
	// OpConcatRows joins its two inputs along axis 0.
	OpConcatRows
	// OpGetRows selects rows of In[0] (shape [R, ...]) by the indices In[1]
	// (shape [n]), giving [n, ...]. Indices are clamped to 0..R-1 so that no
	// index can read outside the table. The table may be a table of packed
	// 16-bit values (an arg of shape [R, W] words, see OpUnpackF16): such a
	// get_rows is read by unpacks of one format only, and moves each word's
	// 32 bits exactly.
	OpGetRows
	// OpScatterAddRows is the adjoint of OpGetRows: output Node.Shape [R, ...]
	// zero, then row idx[i] += In[0][i] for each i (indices clamped alike).
	OpScatterAddRows
	// OpOneHot turns indices In[0] (shape [n]) into [n, C] rows with a 1 at the
	// (clamped) index; C is Node.Shape[1].
	OpOneHot

	// OpMatMul multiplies the last two dimensions: [..., M, K] x [..., K, N].
	// Node.TransA / TransB mean the stored operand is the transpose of the
	// one multiplied. Leading (batch) dimensions are equal on both sides.
	OpMatMul

	// OpAttention is fused scaled dot-product attention. In[0] = q
	// [..., Tq, D], In[1] = k [..., Tk, D], In[2] = v [..., Tk, Dv] with
	// equal leading dimensions; In[3] = keep, of q's rank, each dimension 1
	// or the scores' [..., Tq, Tk] (broadcast): query i attends key j where
	// keep is nonzero (NaN counts as nonzero, as OpKeep). The result
	// [..., Tq, Dv] is sum_j w_ij v_j with w_i = softmax over the attended j
	// of Node.A * q_i·k_j. A key a query does not attend is not read (its k
	// and v cannot reach that query's result), and a query that attends no
	// key gives 0 (ggml-vulkan's latitude: see the table of special
	// values). The [Tq, Tk] weights are never stored (but by ggml-vulkan
	// on a device without the subgroup operations its kernel needs).
	//
	// Node.B is 0 or 1. B = 1 is attention at f16 precision (core's under
	// SetMatMulPrecision(f16), as autocast's f16 attention): q, k and v
	// hold f16 values (the graph rounded them), and a backend may round
	// each weight to f16 before the product with v (ggml-vulkan's
	// tensor-core kernels do: w unnormalized, exp(s - running max)), so a
	// result may differ from the exact one by about 2^-10 of
	// sum_j w_ij |v_j| (the weights' rounding and their sum's). A backend
	// that does not round computes the B = 0 result.
	OpAttention

	// OpAdamW updates In[0]=w, In[2]=m, In[3]=v in place (all OpArg) from the
	// gradient In[1] and the hyperparameters In[4] = [lr, beta1, beta2, eps,
	// weight decay, 1/(1-beta1^t), 1/(1-beta2^t)] (ggml's opt_step_adamw),
	// optionally followed by an 8th value s, the gradient's scale (nn's
	// clipping: one fused pass instead of a product per parameter); 7
	// values mean no scale, g used as it is:
	//   g = g*s (8 values only);  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
	//   w = w*(1 - lr*wd) - lr * (m*bc1) / (sqrt(v*bc2) + eps)
	// Its value is the updated w.
	OpAdamW
	// OpSGD updates In[0]=w and In[2]=velocity in place (both OpArg) from the
	// gradient In[1] and In[3] = [lr, momentum, weight decay]:
	//   g' = g + wd*w;  vel = momentum*vel + g';  w = w - lr*vel
	// With momentum 0 the velocity is still written (it holds g').
	// Its value is the updated w.
	OpSGD

	// OpRandUniform fills Node.Shape with uniform random numbers in [0, 1)
	// from Philox4x32-10 (see philox.go): In[0] is the generator's state
	// (RandStateLen values: the key and a base counter, see RandState) and
	// Node.Start (>= 0) the node's counter offset from that base, in blocks
	// of 4 values. The same state, Start and shape give the same bits on
	// every backend. Reading the state from a tensor, rather than holding it
	// in attributes, lets a compiled program draw new numbers on every run.
	OpRandUniform

	// OpPackF16 stores its input's n values (any shape) as f16, two to a
	// 32-bit word: Node.Shape is [PackedLen(n)], and word i holds x[2i]
	// rounded as round_f16 in its low 16 bits and x[2i+1] in its high 16
	// bits (0 past the end) - an f16 array's bytes in little-endian memory,
	// WGSL's pack2x16float layout and ggml's F16 tensors. Half the memory of
	// an f32 value that has to live long (activations saved for backward).
	// The words are bit patterns, not numbers: only the unpack ops read them
	// (and get_rows, gathering whole rows of words held by an arg) and
	// backends move them as 32-bit words (a word may be an f32 subnormal
	// or NaN, which no float operation may touch). A NaN is stored as a
	// NaN of its sign whose payload is the device's: 0x7e00 here and on
	// most devices, 0x7fff on NVIDIA's (ggml-vulkan's conversion).
	OpPackF16
	// OpUnpackF16 is OpPackF16's inverse, each value the exact f32 of its
	// f16. In[0] is a pack_f16, an arg, or a get_rows of an arg's words, in
	// one of two forms, told apart by In[0]'s rank:
	//
	//   - flat: In[0] holds [PackedLen(n)] words, Node.Shape is any shape
	//     of n values (a pack's or an arg's words);
	//   - rows: In[0] holds [R, W] words, a table of R records of w values
	//     each padded to whole words (W = PackedLen(w)), and Node.Shape is
	//     [R, w]: value c of row r is half c%2 of word r*W + c/2, and the
	//     high half of an odd w's last word is padding, never read. Whole
	//     words per record let get_rows gather records of a 16-bit table
	//     (core.HalfTable) on the device; the flat form is the rows form of
	//     one record.
	OpUnpackF16
	// OpPackBF16 and OpUnpackBF16 are the same for bfloat16 (round_bf16's
	// rounding; a NaN is stored as 0x7fc0 with its sign).
	OpPackBF16
	OpUnpackBF16

	// Composite ops (ClassComposite) follow the primitives: each is
	// declared in a file of its own (composite_*.go) by defineComposite,
	// numbered from primitiveCount in the order Go initialises them.

	primitiveCount
)

// Class groups ops by the shape of their computation: what validation,
// planning, fusion and the conformance suite need to know of an op.
type Class uint8

// The classes.
const (
	ClassNone      Class = iota // OpInvalid
	ClassLeaf                   // arg, fill: no inputs
	ClassUnary                  // elementwise of one input (scalars A, B)
	ClassBinary                 // elementwise of two broadcast inputs
	ClassReduce                 // along Node.Axis, keeping the rank
	ClassRowwise                // along the last axis, same shape
	ClassMovement               // values moved unchanged
	ClassIndex                  // rows selected or scattered by f32 indices
	ClassMatMul                 // products of the last two dimensions
	ClassAttention              // fused attention: products, softmax, products
	ClassUpdate                 // in-place optimizer updates of arg operands
	ClassRandom                 // random fills read from a state input
	ClassPack                   // values stored two to a word as 16-bit floats, and back
	ClassComposite              // defined by a decomposition into the classes above (composite.go)
)

// OpInfo is what the code every backend shares knows of an op. An op is
// declared once, here: its name, class and input count; validation, the
// planner, the reference's checks and the conformance suite's generic
// cases read this table.
type OpInfo struct {
	Name  string
	Class Class
	// Inputs is the op's input count, or Variadic: one or more.
	Inputs int
	// Exact: the result is the exact value on f32 inputs (selection, sign,
	// data movement, a single correctly rounded operation): every backend
	// must agree bit for bit.
	Exact bool
	// Domain is where the op is defined and smooth (an elementwise op's
	// inputs); the conformance suite draws inputs from it. Zero: [-4, 4].
	Domain [2]float32
	// Tol is the conformance tolerance against the reference (absolute,
	// relative) of an op that is not Exact; zero: the suite's own entry
	// for the op's name, else its bound for multi-node graphs.
	Tol [2]float64
	// Flops is the cost model's arithmetic per output element of an
	// elementwise op (a transcendental function is a few); zero: 1.
	Flops float64

	// An elementwise op (ClassUnary, ClassBinary) is defined by its row:
	// these three are all that the reference, the cpu backend's generic
	// path, the WebGPU code generator and the planner's fusion need, so
	// that a new elementwise primitive is one row here (and its ggml
	// lowering and gradient), not a case in a switch of every backend.
	// Other classes leave them nil.
	//
	// F64 is the float64 definition, the oracle every backend is checked
	// against (package reference), with the table of special values:
	// F64(x, y, a, b) of the operand x, the second operand y of a binary
	// op (0 for a unary one), and the attributes A and B of a unary op (0
	// for a binary one).
	F64 func(x, y, a, b float64) float64
	// F32 is the same in f32 (same arguments), what the cpu backend runs
	// for an op that has no specialised loop of its own; it keeps the
	// special values exactly, and an Exact op's value bit for bit.
	F32 func(x, y, a, b float32) float32
	// WGSL is a WGSL expression template of type f32 over the names x and
	// y (the operands; y for a binary op only) and a and b (the attributes
	// A and B), which the WebGPU code generator binds before inlining it
	// into a kernel or a fused chain. It may call the helpers of the
	// WebGPU prelude (backend/webgpu/kernels.go: expp, logp, isNaNBits,
	// ...), which keep the special values that WGSL's built-ins may drop.
	WGSL string
}

var opInfo = []OpInfo{
	OpInvalid: {Name: "invalid"},
	OpArg:     {Name: "arg", Class: ClassLeaf, Exact: true},
	OpFill:    {Name: "fill", Class: ClassLeaf, Exact: true},

	OpAdd: {Name: "add", Class: ClassBinary, Inputs: 2, Exact: true, Tol: [2]float64{0, 1e-6},
		F64:  func(x, y, _, _ float64) float64 { return x + y },
		F32:  func(x, y, _, _ float32) float32 { return x + y },
		WGSL: "x + y"},
	OpSub: {Name: "sub", Class: ClassBinary, Inputs: 2, Exact: true, Tol: [2]float64{0, 1e-6},
		F64:  func(x, y, _, _ float64) float64 { return x - y },
		F32:  func(x, y, _, _ float32) float32 { return x - y },
		WGSL: "x - y"},
	OpMul: {Name: "mul", Class: ClassBinary, Inputs: 2, Exact: true, Tol: [2]float64{0, 1e-6},
		F64:  func(x, y, _, _ float64) float64 { return x * y },
		F32:  func(x, y, _, _ float32) float32 { return x * y },
		WGSL: "x * y"},
	OpDiv: {Name: "div", Class: ClassBinary, Inputs: 2, Tol: [2]float64{0, 1e-6},
		F64:  func(x, y, _, _ float64) float64 { return x / y },
		F32:  func(x, y, _, _ float32) float32 { return x / y },
		WGSL: "x / y"},

	OpMaximum: {Name: "maximum", Class: ClassBinary, Inputs: 2, Exact: true,
		F64:  func(x, y, _, _ float64) float64 { return max64(x, y) },
		F32:  func(x, y, _, _ float32) float32 { return Max32(x, y) },
		WGSL: "maxab(x, y)"},
	OpKeep: {Name: "keep", Class: ClassBinary, Inputs: 2, Exact: true,
		F64:  func(x, y, _, _ float64) float64 { return keep64(x, y) },
		F32:  func(x, y, _, _ float32) float32 { return Keep32(x, y) },
		WGSL: "keepab(x, y)"},

	OpNeg: {Name: "neg", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, _, _ float64) float64 { return -x },
		F32:  func(x, _, _, _ float32) float32 { return -x },
		WGSL: "-x"},
	OpExp: {Name: "exp", Class: ClassUnary, Inputs: 1, Domain: [2]float32{-10, 10}, Tol: [2]float64{0, 1e-5}, Flops: 8,
		F64: f64(math.Exp), F32: f32(math.Exp), WGSL: "expp(x)"},
	OpLog: {Name: "log", Class: ClassUnary, Inputs: 1, Domain: [2]float32{0.01, 10}, Tol: [2]float64{1e-6, 1e-5}, Flops: 8,
		F64: f64(math.Log), F32: f32(math.Log), WGSL: "logp(x)"},
	OpSqrt: {Name: "sqrt", Class: ClassUnary, Inputs: 1, Domain: [2]float32{0, 10}, Tol: [2]float64{0, 1e-6}, Flops: 8,
		F64: f64(math.Sqrt), F32: f32(math.Sqrt), WGSL: "sqrtp(x)"},
	OpReLU: {Name: "relu", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, _, _ float64) float64 { return max(x, 0) }, // Go's max: NaN if any operand is
		F32:  func(x, _, _, _ float32) float32 { return ReLU32(x) },
		WGSL: "select(0.0, x, x > 0.0 || isNaNBits(x))"},
	OpSigmoid: {Name: "sigmoid", Class: ClassUnary, Inputs: 1, Domain: [2]float32{-8, 8}, Tol: [2]float64{1e-6, 1e-5}, Flops: 8,
		F64:  func(x, _, _, _ float64) float64 { return 1 / (1 + math.Exp(-x)) },
		F32:  func(x, _, _, _ float32) float32 { return Sigmoid32(x) },
		WGSL: "select(1.0 / (1.0 + exp(-x)), x, isNaNBits(x))"},
	// (tanh saturates to ±1 in f32 beyond 15; the clamp keeps GPU
	// implementations that compute it through exp from giving Inf/Inf)
	OpTanh: {Name: "tanh", Class: ClassUnary, Inputs: 1, Domain: [2]float32{-5, 5}, Tol: [2]float64{1e-6, 1e-5}, Flops: 8,
		F64: f64(math.Tanh), F32: f32(math.Tanh), WGSL: "select(tanh(clamp(x, -15.0, 15.0)), x, isNaNBits(x))"},
	// (affine's x*A+B may cancel near zero: the absolute tolerance covers
	// the rounding of x*A)
	OpAffine: {Name: "affine", Class: ClassUnary, Inputs: 1, Tol: [2]float64{1e-6, 1e-6},
		F64:  func(x, _, a, b float64) float64 { return x*a + b },
		F32:  func(x, _, a, b float32) float32 { return x*a + b },
		WGSL: "x * a + b"},
	OpPowConst: {Name: "pow", Class: ClassUnary, Inputs: 1, Tol: [2]float64{1e-6, 1e-5}, Flops: 8,
		F64:  func(x, _, a, _ float64) float64 { return pow64(x, a) },
		F32:  func(x, _, a, _ float32) float32 { return Pow32(x, a) },
		WGSL: "powc(x, a)"},
	OpClamp: {Name: "clamp", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, a, b float64) float64 { return min(max(x, a), b) },
		F32:  func(x, _, a, b float32) float32 { return min(max(x, a), b) },
		WGSL: "select(min(max(x, a), b), x, isNaNBits(x))"},
	OpInside: {Name: "inside", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, a, b float64) float64 { return inside64(x, a, b) },
		F32:  func(x, _, a, b float32) float32 { return float32(inside64(float64(x), float64(a), float64(b))) },
		WGSL: "select(0.0, 1.0, x > a && x < b && !isNaNBits(x))"},
	OpAbs: {Name: "abs", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  f64(math.Abs),
		F32:  f32(math.Abs),
		WGSL: "bitcast<f32>(bitcast<u32>(x) & 0x7fffffffu)"}, // the sign bit cleared: NaN stays NaN
	// (sin, cos: absolute tolerances, as a GPU's are: a few ulp of the
	// reduced argument near the zeros, where a relative bound means nothing)
	OpSin: {Name: "sin", Class: ClassUnary, Inputs: 1, Domain: [2]float32{-10, 10}, Tol: [2]float64{2e-6, 0}, Flops: 8,
		F64: f64(math.Sin), F32: f32(math.Sin), WGSL: "sinp(x)"},
	OpCos: {Name: "cos", Class: ClassUnary, Inputs: 1, Domain: [2]float32{-10, 10}, Tol: [2]float64{2e-6, 0}, Flops: 8,
		F64: f64(math.Cos), F32: f32(math.Cos), WGSL: "cosp(x)"},
	OpRoundF16: {Name: "round_f16", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, _, _ float64) float64 { return RoundSig(x, 11, -14, 65504) },
		F32:  func(x, _, _, _ float32) float32 { return RoundF16(x) },
		WGSL: "roundf16(x)"},
	OpRoundBF16: {Name: "round_bf16", Class: ClassUnary, Inputs: 1, Exact: true,
		F64:  func(x, _, _, _ float64) float64 { return RoundSig(x, 8, -126, 3.3895313892515355e38) },
		F32:  func(x, _, _, _ float32) float32 { return RoundBF16(x) },
		WGSL: "roundbf16(x)"},
	// (WGSL: a degree-8 Taylor polynomial for |x| < 0.35, where it is
	// within 1e-9 relative, else exp(x) - 1, whose rounding is then at
	// most 3.4 times exp's relative error)
	OpExpm1: {Name: "expm1", Class: ClassUnary, Inputs: 1, Tol: [2]float64{1e-6, 1e-5}, Flops: 8,
		F64: f64(math.Expm1), F32: f32(math.Expm1),
		WGSL: "select(expp(x) - 1.0, x * (1.0 + x * (0.5 + x * (0.16666667 + x * (0.041666668 + x * (0.008333334 + x * (0.0013888889 + x * (0.0001984127 + x * 0.0000248015873))))))), abs(x) < 0.35)"},

	OpSum:        {Name: "sum", Class: ClassReduce, Inputs: 1},
	OpMax:        {Name: "max", Class: ClassReduce, Inputs: 1, Exact: true},
	OpSoftmax:    {Name: "softmax", Class: ClassRowwise, Inputs: 1},
	OpLogSoftmax: {Name: "log_softmax", Class: ClassRowwise, Inputs: 1},

	OpReshape:    {Name: "reshape", Class: ClassMovement, Inputs: 1, Exact: true},
	OpPermute:    {Name: "permute", Class: ClassMovement, Inputs: 1, Exact: true},
	OpExpand:     {Name: "expand", Class: ClassMovement, Inputs: 1, Exact: true},
	OpSliceRows:  {Name: "slice_rows", Class: ClassMovement, Inputs: 1, Exact: true},
	OpConcatRows: {Name: "concat_rows", Class: ClassMovement, Inputs: 2, Exact: true},

	OpGetRows:        {Name: "get_rows", Class: ClassIndex, Inputs: 2, Exact: true},
	OpScatterAddRows: {Name: "scatter_add_rows", Class: ClassIndex, Inputs: 2},
	OpOneHot:         {Name: "one_hot", Class: ClassIndex, Inputs: 1, Exact: true},

	OpMatMul: {Name: "matmul", Class: ClassMatMul, Inputs: 2},
	// (its domain keeps the scores q·k small enough that the sums agree)
	OpAttention: {Name: "attention", Class: ClassAttention, Inputs: 4, Domain: [2]float32{-2, 2}},
	OpAdamW:     {Name: "adamw", Class: ClassUpdate, Inputs: 5},
	OpSGD:       {Name: "sgd", Class: ClassUpdate, Inputs: 4},

	OpRandUniform: {Name: "rand_uniform", Class: ClassRandom, Inputs: 1, Exact: true},

	OpPackF16:    {Name: "pack_f16", Class: ClassPack, Inputs: 1, Exact: true},
	OpUnpackF16:  {Name: "unpack_f16", Class: ClassPack, Inputs: 1, Exact: true},
	OpPackBF16:   {Name: "pack_bf16", Class: ClassPack, Inputs: 1, Exact: true},
	OpUnpackBF16: {Name: "unpack_bf16", Class: ClassPack, Inputs: 1, Exact: true},
}

// Info returns the op's description. It panics on an op that is not
// declared (a switch over ops that meets one is a half-added op).
func (o Op) Info() OpInfo {
	if o == OpInvalid || int(o) >= len(opInfo) || opInfo[o].Name == "" {
		panic(fmt.Sprintf("backend: op %d is not declared in ir.go", int(o)))
	}
	return opInfo[o]
}

// String returns the op's IR name, as used in profiles.
func (o Op) String() string {
	if int(o) < len(opInfo) && opInfo[o].Name != "" {
		return opInfo[o].Name
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Ops lists every valid op, in declaration order.
func Ops() []Op {
	out := make([]Op, 0, len(opInfo)-1)
	for o := OpArg; int(o) < len(opInfo); o++ {
		out = append(out, o)
	}
	return out
}

// Unknown panics naming the place and the op: the end of every switch over
// ops, so that an op added to the IR but not to a backend fails loudly at
// its first use (and in TestEveryOp) instead of computing something else.
func Unknown(where string, o Op) {
	panic(fmt.Sprintf("%s: no case for op %v (a half-added op: see backend/doc.go)", where, o))
}

// IsUnary reports whether o is an elementwise op of one input.
func (o Op) IsUnary() bool { return o.valid() && opInfo[o].Class == ClassUnary }

// IsBinary reports whether o is an elementwise op of two broadcast inputs.
func (o Op) IsBinary() bool { return o.valid() && opInfo[o].Class == ClassBinary }

// IsComposite reports whether o is a composite op (see Decompose).
func (o Op) IsComposite() bool { return o.valid() && opInfo[o].Class == ClassComposite }

// InPlace reports whether o writes into its OpArg operands.
func (o Op) InPlace() bool { return o.valid() && opInfo[o].Class == ClassUpdate }

// The lists UpdateTargets returns, made once: core asks for them per
// update node in every lowering.
var adamWTargets, sgdTargets = []int{0, 2, 3}, []int{0, 2}

// UpdateTargets are the operands an in-place op writes (the others it
// only reads: the gradient, operand 1, and the hyperparameters, the last).
// The list is shared: callers must not write to it.
// It panics on an op that is not in place.

func UpdateTargets(op Op) []int {
	switch op {
	case OpAdamW:
		return adamWTargets
	case OpSGD:
		return sgdTargets
	}
	panic(fmt.Sprintf("backend: %v is not an in-place op", op))
}

func (o Op) valid() bool { return o > OpInvalid && int(o) < len(opInfo) }

// Node is one vertex of a Graph. Inputs name earlier nodes by index.
type Node struct {
	Op    Op
	In    []int
	Shape []int

	Arg    int     // OpArg: index into Run's args
	A, B   float32 // scalar attributes (OpFill, OpAffine, OpPowConst, OpClamp, OpInside; OpAttention's scale A and f16 precision B; the norms' eps A)
	Axis   int     // OpSum, OpMax
	Start  int     // OpSliceRows; OpRandUniform: counter offset in blocks of 4
	Perm   []int   // OpPermute
	TransA bool    // OpMatMul
	TransB bool    // OpMatMul
}

// Output says that the value of Node leaves the run in Run's args[Arg]: the
// backend computes it there (or copies it there) so it outlives the run.
type Output struct {
	Node int
	Arg  int
}

// Graph is what a backend compiles: nodes in topological order and the values
// that leave the run. Nodes execute in order; in-place ops (OpAdamW, OpSGD)
// mutate their OpArg operands at their position, so a backend may not move a
// read of such an arg across them.
type Graph struct {
	Nodes   []Node
	Outputs []Output
	// NumArgs is the length of the args slice Run takes.
	NumArgs int
}

// Key returns a string that identifies the graph's structure exactly: two
// graphs with equal keys compile to interchangeable programs. Core caches
// compiled programs by it, once per lazy step, so it is a binary encoding
// (varints, lists prefixed by their length, floats as their bits) built
// with appends: the decimal text it was took twice the time in a lazy
// step's profile (6.7% of it against 3.3%).
func (g *Graph) Key() string { return string(g.AppendKey(nil)) }

// AppendKey appends Key's bytes to b: a caller that keys a map by them
// looks up with string(b), which does not allocate, and makes the string
// only for a new graph.
func (g *Graph) AppendKey(b []byte) []byte {
	b = slices.Grow(b, 24*len(g.Nodes)+4*len(g.Outputs)+8)
	ints := func(v []int) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		for _, x := range v {
			b = binary.AppendVarint(b, int64(x))
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		b = binary.AppendUvarint(b, uint64(n.Op))
		ints(n.In)
		ints(n.Shape)
		b = binary.AppendVarint(b, int64(n.Arg))
		b = binary.AppendVarint(b, int64(n.Axis))
		b = binary.AppendVarint(b, int64(n.Start))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(n.A))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(n.B))
		ints(n.Perm)
		b = append(b, byte(btoi(n.TransA)|btoi(n.TransB)<<1))
	}
	b = binary.AppendUvarint(b, uint64(len(g.Outputs)))
	for _, o := range g.Outputs {
		b = binary.AppendVarint(b, int64(o.Node))
		b = binary.AppendVarint(b, int64(o.Arg))
	}
	return binary.AppendVarint(b, int64(g.NumArgs))
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// String prints the graph one node per line, for debugging and error messages.
func (g *Graph) String() string {
	var b strings.Builder
	for i, n := range g.Nodes {
		fmt.Fprintf(&b, "%3d %-16s %v <- %v", i, n.Op, n.Shape, n.In)
		if a := n.AttrText(); a != "" {
			b.WriteString(" " + a)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "outputs %v, %d args\n", g.Outputs, g.NumArgs)
	return b.String()
}

// AttrText is n's attributes as Graph.String prints them ("axis=1", a
// composite's own), "" where it has none.
func (n *Node) AttrText() string {
	var parts []string
	switch n.Op {
	case OpArg:
		parts = append(parts, fmt.Sprintf("arg=%d", n.Arg))
	case OpFill, OpAffine, OpPowConst, OpClamp, OpInside:
		parts = append(parts, fmt.Sprintf("a=%g b=%g", n.A, n.B))
	case OpAttention:
		parts = append(parts, fmt.Sprintf("scale=%g", n.A))
		if n.B != 0 {
			parts = append(parts, fmt.Sprintf("half=%g", n.B))
		}
	case OpSum, OpMax:
		parts = append(parts, fmt.Sprintf("axis=%d", n.Axis))
	case OpSliceRows, OpRandUniform:
		parts = append(parts, fmt.Sprintf("start=%d", n.Start))
	case OpPermute:
		parts = append(parts, fmt.Sprintf("perm=%v", n.Perm))
	case OpMatMul:
		parts = append(parts, fmt.Sprintf("transA=%t transB=%t", n.TransA, n.TransB))
	}
	if c := composites[n.Op]; c != nil && c.Attr != nil {
		parts = append(parts, c.Attr(n))
	}
	return strings.Join(parts, " ")
}

// Variadic is OpInfo.Inputs of an op that takes one or more inputs.
const Variadic = -1

// MaxRank is the largest rank of a tensor, in core and in a Graph.
const MaxRank = 6

// NativeRank is the largest rank a backend's kernels take unless its
// Caps.KernelRank says more (ggml has 4 dimensions, WebGPU's kernels 4):
// plan.Expand rewrites the nodes above it into nodes of rank at most
// NativeRank (plan/rank.go), so that every rank up to MaxRank runs on
// every backend with the same values.
const NativeRank = 4

// MaxElems bounds the elements of one tensor (2^46, 256 TiB of f32): no
// device holds more, and products of sizes, byte counts and offsets computed
// from shapes that pass CheckShape stay far from int overflow.
const MaxElems = 1 << 46

// CheckShape reports whether shape is a valid tensor shape: rank at most
// MaxRank, every dimension at least 1, at most MaxElems elements (checked
// without overflowing).
func CheckShape(shape []int) error {
	// The messages print copies: shape may be scratch memory on the
	// caller's stack (core's Reshape), which printing it would move to the heap.
	if len(shape) > MaxRank {
		return fmt.Errorf("shape %v has %d dimensions, more than backend.MaxRank = %d", slices.Clone(shape), len(shape), MaxRank)
	}
	n := 1
	for _, d := range shape {
		if d < 1 {
			return fmt.Errorf("shape %v has a dimension < 1", slices.Clone(shape))
		}
		if n > MaxElems/d {
			return fmt.Errorf("shape %v has more than 2^46 = %d elements", slices.Clone(shape), MaxElems)
		}
		n *= d
	}
	return nil
}

// InRange reports whether [off, off+n) lies inside [0, size), written so
// that no sum can overflow (off and n may be any ints).
func InRange(off, n, size int) bool {
	return off >= 0 && n >= 0 && n <= size && off <= size-n
}

// NumElems is the number of elements of a shape (1 for a scalar). Shapes
// that passed CheckShape cannot overflow it.
func NumElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Strides returns the row-major strides of shape, in elements.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// BroadcastShape returns the numpy broadcast of a and b, or an error naming
// both shapes.
func BroadcastShape(a, b []int) ([]int, error) {
	return AppendBroadcastShape(make([]int, 0, max(len(a), len(b))), a, b)
}

// AppendBroadcastShape is BroadcastShape appending the shape to dst:
// scratch memory the caller reuses (core records an op's shape from an
// array on its stack).
func AppendBroadcastShape(dst, a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast (dimension %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return dst[:len(dst)+n], nil
}

// BroadcastStrides returns strides for reading an input of shape in as if it
// had shape out (numpy broadcast): broadcast dimensions get stride 0.
func BroadcastStrides(in, out []int) []int {
	st := make([]int, len(out))
	inStrides := Strides(in)
	off := len(out) - len(in)
	for i := range out {
		j := i - off
		if j >= 0 && in[j] != 1 {
			st[i] = inStrides[j]
		}
	}
	return st
}

// Validate checks the graph's structure: op codes, input counts, topological
// order, arg indices and output shapes. Backends call it in Compile so a bad
// graph is an error, never a crash inside a device library.
func (g *Graph) Validate() error {
	words := g.wordReaders()
	for i, n := range g.Nodes {
		if err := g.validateNode(i, &n, words); err != nil {
			return fmt.Errorf("backend: node %d (%s %v): %w", i, n.Op, n.Shape, err)
		}
	}
	for _, o := range g.Outputs {
		if o.Node < 0 || o.Node >= len(g.Nodes) {
			return fmt.Errorf("backend: output names node %d of %d", o.Node, len(g.Nodes))
		}
		if o.Arg < 0 || o.Arg >= g.NumArgs {
			return fmt.Errorf("backend: output of node %d goes to arg %d of %d", o.Node, o.Arg, g.NumArgs)
		}
		if u := words[o.Node]; u != OpInvalid {
			return fmt.Errorf("backend: output of node %d, a get_rows of packed words: only %s reads them", o.Node, u)
		}
	}
	return nil
}

// wordReaders returns, for each get_rows that an unpack reads (a get_rows
// of packed words), the first such unpack's op; OpInvalid for other nodes.
// Input indices are not checked here (validateNode does).
func (g *Graph) wordReaders() []Op {
	words := make([]Op, len(g.Nodes))
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if (n.Op != OpUnpackF16 && n.Op != OpUnpackBF16) || len(n.In) == 0 {
			continue
		}
		if j := n.In[0]; j >= 0 && j < i && g.Nodes[j].Op == OpGetRows && words[j] == OpInvalid {
			words[j] = n.Op
		}
	}
	return words
}

// WordGathers reports, for each node of a valid graph, whether it is a
// get_rows of packed words (a get_rows that unpacks read, see
// OpUnpackF16's rows form): its value is 16-bit values two to a word,
// which the backend must move bit for bit and never compute on.
func (g *Graph) WordGathers() []bool {
	out := make([]bool, len(g.Nodes))
	for i, u := range g.wordReaders() {
		out[i] = u != OpInvalid
	}
	return out
}

func (g *Graph) validateNode(i int, n *Node, words []Op) error {
	if !n.Op.valid() {
		return fmt.Errorf("unknown op %d", int(n.Op))
	}
	if err := CheckShape(n.Shape); err != nil {
		return err
	}
	for _, in := range n.In {
		if in < 0 || in >= i {
			return fmt.Errorf("input %d is not an earlier node", in)
		}
	}
	if nin := n.Op.Info().Inputs; len(n.In) != nin && !(nin == Variadic && len(n.In) >= 1) {
		return fmt.Errorf("%d inputs, want %d", len(n.In), n.Op.Info().Inputs)
	}
	// Packed words are opaque: an unpack of the same format is their only
	// reader (backends may hold them as 16-bit tensors, not as f32 words),
	// and an unpack reads a pack, words an arg holds, or rows of an arg's
	// words that a get_rows gathers (which then only unpacks of one format
	// read: a backend may lower the pair as one gather of 16-bit values).
	for _, in := range n.In {
		if src := g.Nodes[in].Op; src == OpPackF16 || src == OpPackBF16 {
			if unpackOf[src] != n.Op {
				return fmt.Errorf("reads the packed words of node %d (%s): only %s reads them", in, src, unpackOf[src])
			}
		}
		if u := words[in]; u != OpInvalid && n.Op != u {
			return fmt.Errorf("reads the packed words that node %d (get_rows) gathers: only %s reads them", in, u)
		}
	}
	if n.Op == OpUnpackF16 || n.Op == OpUnpackBF16 {
		if src := g.Nodes[n.In[0]].Op; src != OpArg && src != OpGetRows && unpackOf[src] != n.Op {
			return fmt.Errorf("unpacks node %d (%s): want an arg, a %s or a get_rows of an arg's words", n.In[0], src, packOf[n.Op])
		}
	}
	in := func(k int) []int { return g.Nodes[n.In[k]].Shape }
	same := func(a, b []int) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	switch {
	case n.Op == OpArg:
		if n.Arg < 0 || n.Arg >= g.NumArgs {
			return fmt.Errorf("arg %d of %d", n.Arg, g.NumArgs)
		}
	case n.Op.IsBinary():
		bs, err := BroadcastShape(in(0), in(1))
		if err != nil {
			return err
		}
		if !same(bs, n.Shape) {
			return fmt.Errorf("broadcast of %v and %v is %v", in(0), in(1), bs)
		}
	case n.Op.IsUnary(), n.Op == OpSoftmax, n.Op == OpLogSoftmax:
		if !same(in(0), n.Shape) {
			return fmt.Errorf("input shape %v differs", in(0))
		}
		return validScalars(n)
	case n.Op == OpSum || n.Op == OpMax:
		s := in(0)
		if n.Axis < 0 || n.Axis >= len(s) || len(n.Shape) != len(s) || n.Shape[n.Axis] != 1 {
			return fmt.Errorf("axis %d of input %v", n.Axis, s)
		}
		for k := range s {
			if k != n.Axis && s[k] != n.Shape[k] {
				return fmt.Errorf("input %v", s)
			}
		}
	case n.Op == OpReshape:
		if NumElems(in(0)) != NumElems(n.Shape) {
			return fmt.Errorf("input %v has another size", in(0))
		}
	case n.Op == OpPermute:
		s := in(0)
		if len(n.Perm) != len(s) || len(n.Shape) != len(s) {
			return fmt.Errorf("perm %v for input %v", n.Perm, s)
		}
		seen := make([]bool, len(s))
		for k, p := range n.Perm {
			if p < 0 || p >= len(s) || seen[p] || n.Shape[k] != s[p] {
				return fmt.Errorf("perm %v for input %v", n.Perm, s)
			}
			seen[p] = true
		}
	case n.Op == OpExpand:
		bs, err := BroadcastShape(in(0), n.Shape)
		if err != nil || !same(bs, n.Shape) {
			return fmt.Errorf("input %v does not broadcast", in(0))
		}
	case n.Op == OpSliceRows:
		s := in(0)
		if len(s) == 0 || len(n.Shape) != len(s) || !InRange(n.Start, n.Shape[0], s[0]) || !same(s[1:], n.Shape[1:]) {
			return fmt.Errorf("start %d of input %v", n.Start, s)
		}
	case n.Op == OpConcatRows:
		a, b := in(0), in(1)
		if len(a) == 0 || len(a) != len(b) || !same(a[1:], b[1:]) || !same(a[1:], n.Shape[1:]) || n.Shape[0] != a[0]+b[0] {
			return fmt.Errorf("inputs %v and %v", a, b)
		}
	case n.Op == OpGetRows:
		t, idx := in(0), in(1)
		if len(t) == 0 || len(idx) != 1 || len(n.Shape) != len(t) || n.Shape[0] != idx[0] || !same(t[1:], n.Shape[1:]) {
			return fmt.Errorf("table %v, indices %v", t, idx)
		}
		if u := words[i]; u != OpInvalid && (g.Nodes[n.In[0]].Op != OpArg || len(t) != 2) {
			return fmt.Errorf("gathers packed words (%s reads them) from node %d (%s %v): the table must be an arg of shape [rows, words]", u, n.In[0], g.Nodes[n.In[0]].Op, t)
		}
	case n.Op == OpScatterAddRows:
		src, idx := in(0), in(1)
		if len(src) == 0 || len(idx) != 1 || idx[0] != src[0] || len(n.Shape) != len(src) || !same(src[1:], n.Shape[1:]) {
			return fmt.Errorf("source %v, indices %v", src, idx)
		}
	case n.Op == OpOneHot:
		if len(in(0)) != 1 || len(n.Shape) != 2 || n.Shape[0] != in(0)[0] {
			return fmt.Errorf("indices %v", in(0))
		}
		if err := checkClasses(n.Shape[1]); err != nil {
			return err
		}
	case n.Op == OpMatMul:
		a, b := in(0), in(1)
		if len(a) < 2 || len(a) != len(b) || len(n.Shape) != len(a) || !same(a[:len(a)-2], b[:len(b)-2]) {
			return fmt.Errorf("operands %v and %v", a, b)
		}
		m, k := a[len(a)-2], a[len(a)-1]
		if n.TransA {
			m, k = k, m
		}
		k2, nn := b[len(b)-2], b[len(b)-1]
		if n.TransB {
			k2, nn = nn, k2
		}
		r := len(n.Shape)
		if k != k2 || n.Shape[r-2] != m || n.Shape[r-1] != nn || !same(a[:r-2], n.Shape[:r-2]) {
			return fmt.Errorf("operands %v (trans %t) and %v (trans %t)", a, n.TransA, b, n.TransB)
		}
	case n.Op == OpAttention:
		q, k, v, keep := in(0), in(1), in(2), in(3)
		r := len(q)
		if r < 2 || len(k) != r || len(v) != r || len(keep) != r || len(n.Shape) != r ||
			!same(q[:r-2], k[:r-2]) || !same(q[:r-2], v[:r-2]) || k[r-1] != q[r-1] || v[r-2] != k[r-2] ||
			!same(n.Shape[:r-1], q[:r-1]) || n.Shape[r-1] != v[r-1] {
			return fmt.Errorf("q %v, k %v, v %v: want [..., Tq, D], [..., Tk, D], [..., Tk, Dv] giving [..., Tq, Dv]", q, k, v)
		}
		scores := append(append([]int(nil), q[:r-1]...), k[r-2])
		for i, d := range keep {
			if d != 1 && d != scores[i] {
				return fmt.Errorf("keep %v does not broadcast to the scores %v", keep, scores)
			}
		}
		if math.IsNaN(float64(n.A)) || math.IsInf(float64(n.A), 0) {
			return fmt.Errorf("scale %g is not finite", n.A)
		}
		if n.B != 0 && n.B != 1 {
			return fmt.Errorf("B %g: want 0 (f32) or 1 (f16 precision)", n.B)
		}
	case n.Op.IsComposite():
		return composites[n.Op].Check(n, in)
	case n.Op == OpPackF16 || n.Op == OpPackBF16:
		if want := PackedLen(NumElems(in(0))); len(n.Shape) != 1 || n.Shape[0] != want {
			return fmt.Errorf("input %v packs into [%d] words", in(0), want)
		}
	case n.Op == OpUnpackF16 || n.Op == OpUnpackBF16:
		w := in(0)
		switch len(w) {
		case 1:
			if want := PackedLen(NumElems(n.Shape)); w[0] != want {
				return fmt.Errorf("input %v: %v unpacks from [%d] words", w, n.Shape, want)
			}
		case 2:
			if len(n.Shape) != 2 || n.Shape[0] != w[0] || PackedLen(n.Shape[1]) != w[1] {
				return fmt.Errorf("input %v: rows of %d words unpack to [%d, %d] or [%d, %d]", w, w[1], w[0], 2*w[1]-1, w[0], 2*w[1])
			}
		default:
			return fmt.Errorf("input %v: words are [n] (flat) or [rows, words per row]", w)
		}
	case n.Op == OpRandUniform:
		if NumElems(in(0)) != RandStateLen || n.Start < 0 {
			return fmt.Errorf("state %v (want %d values) and counter offset %d (want >= 0)", in(0), RandStateLen, n.Start)
		}
	case n.Op.InPlace():
		w := in(0)
		for _, k := range UpdateTargets(n.Op) {
			if g.Nodes[n.In[k]].Op != OpArg || !same(in(k), w) {
				return fmt.Errorf("operand %d must be an arg of shape %v", k, w)
			}
		}
		if !same(in(1), w) || !same(n.Shape, w) {
			return fmt.Errorf("gradient %v for parameter %v", in(1), w)
		}
		hp := in(len(n.In) - 1)
		switch ne := NumElems(hp); {
		case n.Op == OpSGD && ne != 3:
			return fmt.Errorf("hyperparameters %v, want 3 values", hp)
		case n.Op == OpAdamW && ne != 7 && ne != 8:
			return fmt.Errorf("hyperparameters %v, want 7 values (8 with the gradient's scale)", hp)
		}
	}
	return nil
}

var (
	unpackOf = map[Op]Op{OpPackF16: OpUnpackF16, OpPackBF16: OpUnpackBF16}
	packOf   = map[Op]Op{OpUnpackF16: OpPackF16, OpUnpackBF16: OpPackBF16}
)

// validScalars checks the scalar attributes whose special values the table
// of Special values leaves undefined: a non-finite exponent (C's rules for it
// would cost every backend a branch no model needs) and clamp bounds that
// are not ordered (NaN included).
func validScalars(n *Node) error {
	switch {
	case n.Op == OpPowConst && (math.IsNaN(float64(n.A)) || math.IsInf(float64(n.A), 0)):
		return fmt.Errorf("exponent %g is not finite", n.A)
	case n.Op == OpClamp && !(n.A <= n.B):
		return fmt.Errorf("clamp bounds %g > %g", n.A, n.B)
	}
	return nil
}
