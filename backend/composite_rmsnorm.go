package backend

// OpRMSNorm normalizes along the last axis by the root mean square,
// without gain: x*r, r = 1/sqrt(mean(x^2) + A), A = eps >= 0 (PyTorch's
// rms_norm, ggml_rms_norm). Elementwise in r, as PyTorch's: a row holding
// a NaN is NaN; one holding an infinity (r = 0) is NaN at the infinity and
// a zero of x's sign elsewhere; a row of zeros with eps 0 is NaN (0/0).
var OpRMSNorm = defineComposite(Composite{
	Name: "rms_norm", Inputs: 1,
	Check: checkNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		r := rmsScale(n.Shape, in[0], n.A, add)
		return add(Node{Op: OpMul, In: []int{in[0], r}, Shape: n.Shape})
	},
	Eval:   rmsNorm64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}}, Node{In: []int{0}, Shape: []int{2, 3}, A: 1e-5} },
	Cases:  normCases(1, false),
	// a row's sum of squares, then a product (outputs of a few units)
	Tol: [2]float64{2e-5, 1e-4}, Flops: 4, Attr: epsAttr,
})

// OpRMSNormBack is OpRMSNorm's input gradient: In[0] = x, In[1] = the
// output's gradient dy, A = eps; per row, with r = 1/sqrt(mean(x^2) + eps)
// and xhat = x*r, dx = r*(dy - xhat*mean(dy*xhat)) (ggml_rms_norm_back's
// formula). A row where x holds a NaN or an infinity is NaN (xhat is NaN
// there); an infinite dy makes its row infinite, NaN where that infinity
// meets its own (or a zero) xhat.
var OpRMSNormBack = defineComposite(Composite{
	Name: "rms_norm_back", Inputs: 2,
	Check: checkNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		r := rmsScale(n.Shape, in[0], n.A, add)
		dy := in[1]
		xhat := add(Node{Op: OpMul, In: []int{in[0], r}, Shape: n.Shape})
		p := add(Node{Op: OpMul, In: []int{dy, xhat}, Shape: n.Shape})
		mp := rowMean(n.Shape, p, 0, add)
		t := add(Node{Op: OpMul, In: []int{xhat, mp}, Shape: n.Shape})
		w := add(Node{Op: OpSub, In: []int{dy, t}, Shape: n.Shape})
		return add(Node{Op: OpMul, In: []int{w, r}, Shape: n.Shape})
	},
	Eval: rmsNorm64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2, 3}}, Node{In: []int{0, 1}, Shape: []int{2, 3}, A: 1e-5}
	},
	Cases: normCases(2, false),
	Tol:   [2]float64{2e-5, 1e-4}, Flops: 10, Attr: epsAttr,
})

// rmsScale appends r = (mean(x*x) + eps)^-0.5 along the last axis of shape
// (one per row, broadcast by the reader).
func rmsScale(shape []int, x int, eps float32, add func(Node) int) int {
	xx := add(Node{Op: OpMul, In: []int{x, x}, Shape: shape})
	v := rowMean(shape, xx, eps, add)
	return add(Node{Op: OpPowConst, In: []int{v}, Shape: rowShape(shape), A: -0.5})
}

// rmsNorm64 computes OpRMSNorm's x*r or OpRMSNormBack's
// r*(dy - xhat*mean(dy*xhat)), row by row.
func rmsNorm64(n *Node, in [][]float64, _ [][]int, out []float64) {
	rowNorm64(n, in, out, false)
}
