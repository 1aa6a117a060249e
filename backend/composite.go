package backend

import "fmt"

// Composite ops are ops of the IR, not a side table, so that everything
// that walks a graph (Validate, Key, the planner, the profiler, the
// conformance suite) sees them with no new machinery, and every switch over
// ops stays exhaustive. One op per composite rather than one OpComposite
// with an ID: attributes and input counts differ per composite, and OpInfo
// already is the per-op table. Each is defined once: its semantics at its
// declaration in ir.go, its decomposition here, its gradient in core.

// Decompose appends the primitive nodes that compute composite node n to a
// graph through add (which appends a node and returns its index) and
// returns the index of the node holding n's value. in are the indices of
// n's inputs in the graph add appends to, inShapes their shapes. It is the definition of the
// composite: a backend's native lowering must agree with it
// (backendtest's composite cases check this on every backend).
func Decompose(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
	switch n.Op {
	case OpLayerNorm:
		d, r := normStats(n.Shape, in[0], n.A, add)
		return add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
	case OpLayerNormBack:
		// dx = r*(dy - mean(dy) - xhat*mean(dy*xhat)): the gradient of
		// (x - mean)*r through the mean and the variance.
		d, r := normStats(n.Shape, in[0], n.A, add)
		dy := in[1]
		xhat := add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
		mdy := rowMean(n.Shape, dy, 0, add)
		p := add(Node{Op: OpMul, In: []int{dy, xhat}, Shape: n.Shape})
		mp := rowMean(n.Shape, p, 0, add)
		t := add(Node{Op: OpMul, In: []int{xhat, mp}, Shape: n.Shape})
		u := add(Node{Op: OpSub, In: []int{dy, mdy}, Shape: n.Shape})
		w := add(Node{Op: OpSub, In: []int{u, t}, Shape: n.Shape})
		return add(Node{Op: OpMul, In: []int{w, r}, Shape: n.Shape})
	case OpCrossEntropy:
		x, lab := in[0], in[1]
		b, c := inShapes[0][0], inShapes[0][1]
		lp := add(Node{Op: OpLogSoftmax, In: []int{x}, Shape: []int{b, c}})
		q := add(Node{Op: OpOneHot, In: []int{lab}, Shape: []int{b, c}})
		// keep, not q*lp: a -Inf log-probability of another class is no 0*Inf = NaN
		ll := add(Node{Op: OpKeep, In: []int{q, lp}, Shape: []int{b, c}})
		rows := add(Node{Op: OpSum, In: []int{ll}, Shape: []int{b, 1}, Axis: 1})
		all := add(Node{Op: OpSum, In: []int{rows}, Shape: []int{1, 1}, Axis: 0})
		s := add(Node{Op: OpReshape, In: []int{all}, Shape: []int{}})
		loss := add(Node{Op: OpAffine, In: []int{s}, Shape: []int{}, A: -1 / float32(b)})
		// sqrt(-sum(d^2)), d a label's distance from 0..C-1: -0, or NaN
		cl := add(Node{Op: OpClamp, In: []int{lab}, Shape: []int{b}, A: 0, B: float32(c - 1)})
		d := add(Node{Op: OpSub, In: []int{lab, cl}, Shape: []int{b}})
		dd := add(Node{Op: OpMul, In: []int{d, d}, Shape: []int{b}})
		sd := add(Node{Op: OpSum, In: []int{dd}, Shape: []int{1}, Axis: 0})
		rs := add(Node{Op: OpReshape, In: []int{sd}, Shape: []int{}})
		neg := add(Node{Op: OpNeg, In: []int{rs}, Shape: []int{}})
		poison := add(Node{Op: OpSqrt, In: []int{neg}, Shape: []int{}})
		return add(Node{Op: OpAdd, In: []int{loss, poison}, Shape: []int{}})
	case OpCrossEntropyBack:
		b, c := n.Shape[0], n.Shape[1]
		sm := add(Node{Op: OpSoftmax, In: []int{in[0]}, Shape: []int{b, c}})
		q := add(Node{Op: OpOneHot, In: []int{in[1]}, Shape: []int{b, c}})
		d := add(Node{Op: OpSub, In: []int{sm, q}, Shape: []int{b, c}})
		g := add(Node{Op: OpAffine, In: []int{in[2]}, Shape: []int{}, A: 1 / float32(b)})
		return add(Node{Op: OpMul, In: []int{d, g}, Shape: []int{b, c}})
	}
	panic(fmt.Sprintf("backend.Decompose: %v is not a composite op", n.Op))
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
