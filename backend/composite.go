package backend

import (
	"fmt"
	"math"
)

// Composite ops are ops of the IR, not a side table, so that everything
// that walks a graph (Validate, Key, the planner, the profiler, the
// conformance suite) sees them with no new machinery. One op per composite
// rather than one OpComposite with an ID: attributes and input counts
// differ per composite. Each is defined once, in a file of its own
// (composite_*.go) holding its Composite: its checks, its decomposition,
// its float64 definition and its conformance cases. Core states its
// gradient (core/composite_*.go) and a backend that runs it natively lowers
// it in a file of its own (backend/native/composite_*.go), so that a new
// composite with a native lowering touches three files.

// Composite defines one composite op.
type Composite struct {
	// Name is the op's IR name (as in profiles); Inputs its input count.
	Name   string
	Inputs int
	// Index lists the inputs that hold indices (labels) as whole f32
	// numbers: tests draw them as such, and they are never stored as
	// 16-bit floats.
	Index []int
	// Check validates node n, in(k) being input k's shape; the generic
	// checks (input count, earlier inputs, Shape) have passed.
	Check func(n *Node, in func(k int) []int) error
	// Decompose appends the primitive nodes that compute n to a graph
	// through add (which appends a node and returns its index) and returns
	// the index of the node holding n's value. in are the indices of n's
	// inputs in the graph add appends to, inShapes their shapes. It is the
	// composite's meaning for every backend that does not lower it
	// natively; a native lowering must agree with it (backendtest checks
	// both against Eval on every backend).
	Decompose func(n *Node, in []int, inShapes [][]int, add func(Node) int) int
	// Eval computes n in float64 from its definition, independently of
	// Decompose (the reference backend's value).
	Eval func(n *Node, in [][]float64, shapes [][]int, out []float64)
	// Sample is a small instance: its args' shapes and the node over args
	// 0..len(args)-1 (SampleGraph).
	Sample func() (args [][]int, n Node)
	// Cases are the conformance suite's instances, drawn over random shapes
	// and values or, with special, at the IEEE special values.
	Cases func(d Draw, special bool) []CompositeCase
	// Tol is the conformance tolerance against Eval: absolute, relative.
	Tol [2]float64
	// Terms, when set, makes Tol's relative part a bound on sums: relative
	// to the sum of the |terms| an element adds up times the square root
	// of their count, Terms(n, inShapes) (backendtest's Tol.Terms), for a
	// reduction whose result may cancel to far below its terms.
	Terms func(n *Node, inShapes [][]int) int
	// Flops is the cost model's work per output element.
	Flops float64
	// FlopsOf, when set, is the cost model's work for all of n instead of
	// Flops (a product's per element grows with K), in(k) being input k's
	// shape.
	FlopsOf func(n *Node, in func(k int) []int) float64
	// Attr prints n's attributes for Graph.String ("eps=1e-05"); nil when
	// it has none.
	Attr func(n *Node) string
}

// CompositeCase is one instance of a composite: arg contents and shapes,
// and the node over args 0..len(Args)-1.
type CompositeCase struct {
	Args   [][]float32
	Shapes [][]int
	Node   Node
}

// composites are the defined composites by op.
var composites = map[Op]*Composite{}

// defineComposite declares c as a new op of the IR after the primitives and
// the composites defined before it.
func defineComposite(c Composite) Op {
	if c.Name == "" || c.Check == nil || c.Decompose == nil || c.Eval == nil || c.Sample == nil || c.Cases == nil {
		panic(fmt.Sprintf("backend: composite %q is missing a part of its definition", c.Name))
	}
	op := Op(len(opInfo))
	opInfo = append(opInfo, OpInfo{Name: c.Name, Class: ClassComposite, Inputs: c.Inputs})
	composites[op] = &c
	return op
}

// CompositeOf returns op's definition. It panics on an op that is not a
// composite.
func CompositeOf(op Op) *Composite {
	c := composites[op]
	if c == nil {
		panic(fmt.Sprintf("backend.CompositeOf: %v is not a composite op", op))
	}
	return c
}

// Decompose appends the primitive nodes that compute composite node n (see
// Composite.Decompose). It panics on an op that is not a composite.
func Decompose(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
	return CompositeOf(n.Op).Decompose(n, in, inShapes, add)
}

// normStats appends, for x of shape along its last axis, d = x - mean(x)
// and r = (mean(d*d) + eps)^-0.5 (one per row, broadcast by the reader).
func normStats(shape []int, x int, eps float32, add func(Node) int) (d, r int) {
	m := rowMean(shape, x, 0, add)
	d = add(Node{Op: OpSub, In: []int{x, m}, Shape: shape})
	dd := add(Node{Op: OpMul, In: []int{d, d}, Shape: shape})
	v := rowMean(shape, dd, eps, add)
	r = add(Node{Op: OpPowConst, In: []int{v}, Shape: rowShape(shape), A: -0.5})
	return d, r
}

// rowMean appends sum(x)/c + b along the last axis of shape (c its size),
// keeping the rank.
func rowMean(shape []int, x int, b float32, add func(Node) int) int {
	ax := len(shape) - 1
	s := add(Node{Op: OpSum, In: []int{x}, Shape: rowShape(shape), Axis: ax})
	return add(Node{Op: OpAffine, In: []int{s}, Shape: rowShape(shape), A: 1 / float32(shape[ax]), B: b})
}

// rowShape is shape with its last dimension 1 (a fresh slice: nodes own their shapes).
func rowShape(shape []int) []int {
	out := append([]int(nil), shape...)
	out[len(out)-1] = 1
	return out
}

// ClampIndex turns an f32 index into a row number in 0..n-1, as the IR
// reads indices: NaN and negatives are 0, past the end is the last row.
func ClampIndex(x float64, n int) int {
	switch {
	case math.IsNaN(x) || x < 0:
		return 0
	case x > float64(n-1):
		return n - 1
	}
	return int(math.Round(x))
}

// Softmax64 is the softmax (or, with logOut, the log-softmax) of each row
// of cols values of in, in float64, shifted by the row's maximum: OpSoftmax's
// and OpLogSoftmax's definition, which the reference evaluates and the
// composites' definitions build on.
func Softmax64(logOut bool, in []float64, cols int, out []float64) {
	for r := 0; r < len(in)/cols; r++ {
		x, o := in[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
		m := math.Inf(-1)
		for _, v := range x {
			m = max(m, v)
		}
		sum := 0.0
		for _, v := range x {
			sum += math.Exp(v - m)
		}
		for k, v := range x {
			if logOut {
				o[k] = v - m - math.Log(sum)
			} else {
				o[k] = math.Exp(v-m) / sum
			}
		}
	}
}

// Draw is what a composite's Cases draw their data with: the conformance
// suite (backendtest) provides it, with its sizes and special values.
type Draw interface {
	// Uniform draws n values in [lo, hi).
	Uniform(n int, lo, hi float64) []float32
	// Shape draws a shape of the rank within the suite's size bound.
	Shape(rank int) []int
	// IntN draws an int in [0, n).
	IntN(n int) int
	// SpecialRows are rows of n values drawn from [-4, 4), each holding
	// one of the suite's special values at column col, then rows mixing
	// infinities and NaN. tame leaves out the large finite values (whose
	// squares overflow f32) and ends with a row of zeros; otherwise a row
	// of -Inf ends them.
	SpecialRows(n, col int, tame bool) [][]float32
}
