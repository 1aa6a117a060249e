package backend

import "fmt"

// OpBatchNorm is batch norm's training-mode normalization without gain or
// bias: each channel (axis 1) of x [N, C, ...] (rank 2 to 4) over every
// other axis, (x - mean)/sqrt(var + A), var the biased variance, A = eps
// >= 0 (PyTorch's batch_norm with training=True). A channel holding a NaN
// or an infinity is NaN; a constant channel with eps 0 is NaN (0/0).
var OpBatchNorm = defineComposite(Composite{
	Name: "batch_norm", Inputs: 1,
	Check: checkBatchNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		d, r := chanStats(n.Shape, in[0], n.A, add)
		return add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
	},
	Eval:   batchNorm64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3, 2}}, Node{In: []int{0}, Shape: []int{2, 3, 2}, A: 1e-5} },
	Cases:  normCases(1, true),
	// as layer norm's, over a channel's values
	Tol: [2]float64{5e-5, 1e-4}, Flops: 8, Attr: epsAttr,
})

// OpBatchNormBack is OpBatchNorm's input gradient (through the batch's
// mean and variance): In[0] = x, In[1] = the output's gradient dy, A =
// eps; per channel, with r = 1/sqrt(var + eps), xhat = (x - mean)*r and
// c = dy - mean(dy), dx = r*(c - xhat*mean(c*xhat)), as layer norm's over
// a channel instead of a row. A channel where x or dy holds a NaN or an
// infinity is NaN.
var OpBatchNormBack = defineComposite(Composite{
	Name: "batch_norm_back", Inputs: 2,
	Check: checkBatchNorm,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		d, r := chanStats(n.Shape, in[0], n.A, add)
		dy := in[1]
		xhat := add(Node{Op: OpMul, In: []int{d, r}, Shape: n.Shape})
		mdy := chanMean(n.Shape, dy, 0, add)
		c := add(Node{Op: OpSub, In: []int{dy, mdy}, Shape: n.Shape})
		p := add(Node{Op: OpMul, In: []int{c, xhat}, Shape: n.Shape})
		mp := chanMean(n.Shape, p, 0, add)
		t := add(Node{Op: OpMul, In: []int{xhat, mp}, Shape: n.Shape})
		w := add(Node{Op: OpSub, In: []int{c, t}, Shape: n.Shape})
		return add(Node{Op: OpMul, In: []int{w, r}, Shape: n.Shape})
	},
	Eval: batchNorm64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3, 2}, {2, 3, 2}}, Node{In: []int{0, 1}, Shape: []int{2, 3, 2}, A: 1e-5}
	},
	Cases: normCases(2, true),
	// Abs: the f32 mean of a channel of 6 values at 100 +- 1 is ~1e-5
	// off, ~2e-5 of xhat, which xhat*mean(c*xhat) carries times terms of
	// up to ~7 (the decomposition in f32 is 1.4e-4 off there)
	Tol: [2]float64{2e-4, 1e-4}, Flops: 14, Attr: epsAttr,
})

// OpBatchNormStats is the batch's statistics that batch norm normalizes
// with, for its running statistics: each channel (axis 1) of x [N, C, ...]
// (rank 2 to 4) over every other axis, its mean (row 0) and biased
// variance about that mean (row 1), of shape [2, C]. A channel holding NaN
// has NaN for both; one holding infinities of one sign has that infinity
// as its mean and a NaN variance (the float64 definition's values).
var OpBatchNormStats = defineComposite(Composite{
	Name: "batch_norm_stats", Inputs: 1,
	Check: checkBatchNormStats,
	Decompose: func(n *Node, in []int, shapes [][]int, add func(Node) int) int {
		xs, c := shapes[0], shapes[0][1]
		m := chanMean(xs, in[0], 0, add)
		d := add(Node{Op: OpSub, In: []int{in[0], m}, Shape: xs})
		dd := add(Node{Op: OpMul, In: []int{d, d}, Shape: xs})
		v := chanMean(xs, dd, 0, add)
		m = add(Node{Op: OpReshape, In: []int{m}, Shape: []int{1, c}})
		v = add(Node{Op: OpReshape, In: []int{v}, Shape: []int{1, c}})
		return add(Node{Op: OpConcatRows, In: []int{m, v}, Shape: []int{2, c}})
	},
	Eval:   batchNormStats64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3, 2}}, Node{In: []int{0}, Shape: []int{2, 3}} },
	Cases: func(d Draw, special bool) []CompositeCase {
		cs := normCases(1, true)(d, special)
		for i := range cs {
			cs[i].Node.Shape, cs[i].Node.A = []int{2, cs[i].Shapes[0][1]}, 0
		}
		return cs
	},
	// as batch norm's: the f32 mean of a channel is ~1e-7 of its values
	// off, and the variance a few of its own ulps
	Tol: [2]float64{5e-5, 1e-4}, Flops: 4,
})

// checkBatchNormStats: x of rank 2 to 4, the node [2, C].
func checkBatchNormStats(n *Node, in func(int) []int) error {
	x := in(0)
	if r := len(x); r < 2 || r > 4 {
		return fmt.Errorf("input of shape %v: want [N, C], [N, C, L] or [N, C, H, W]", x)
	}
	if len(n.Shape) != 2 || n.Shape[0] != 2 || n.Shape[1] != x[1] {
		return fmt.Errorf("shape %v for an input of shape %v: want [2, %d]", n.Shape, x, x[1])
	}
	return nil
}

// batchNormStats64 computes OpBatchNormStats channel by channel
// (channelValues).
func batchNormStats64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	c := shapes[0][1]
	for ch := 0; ch < c; ch++ {
		vals := channelValues(in[0], shapes[0][0], c, ch)
		m, v := 0.0, 0.0
		for _, e := range vals {
			m += e
		}
		m /= float64(len(vals))
		for _, e := range vals {
			v += (e - m) * (e - m)
		}
		out[ch], out[c+ch] = m, v/float64(len(vals))
	}
}

// checkBatchNorm: as checkNorm, and rank 2 to 4.
func checkBatchNorm(n *Node, in func(int) []int) error {
	if r := len(n.Shape); r < 2 || r > 4 {
		return fmt.Errorf("shape %v: want [N, C], [N, C, L] or [N, C, H, W]", n.Shape)
	}
	return checkNorm(n, in)
}

// chanStats appends, for x of shape [N, C, ...], d = x - mean(x) and r =
// (mean(d*d) + eps)^-0.5 over each channel (broadcast as [1, C, 1, ...]).
func chanStats(shape []int, x int, eps float32, add func(Node) int) (d, r int) {
	m := chanMean(shape, x, 0, add)
	d = add(Node{Op: OpSub, In: []int{x, m}, Shape: shape})
	dd := add(Node{Op: OpMul, In: []int{d, d}, Shape: shape})
	v := chanMean(shape, dd, eps, add)
	r = add(Node{Op: OpPowConst, In: []int{v}, Shape: chanShape(shape), A: -0.5})
	return d, r
}

// chanMean appends the mean + b of each channel of x [N, C, ...], of shape
// [1, C, 1, ...]: x as [N, C, L] summed along L (contiguous rows), then N.
func chanMean(shape []int, x int, b float32, add func(Node) int) int {
	nn, c := shape[0], shape[1]
	l := NumElems(shape) / (nn * c)
	if len(shape) != 3 {
		x = add(Node{Op: OpReshape, In: []int{x}, Shape: []int{nn, c, l}})
	}
	s := add(Node{Op: OpSum, In: []int{x}, Shape: []int{nn, c, 1}, Axis: 2})
	s = add(Node{Op: OpSum, In: []int{s}, Shape: []int{1, c, 1}, Axis: 0})
	m := add(Node{Op: OpAffine, In: []int{s}, Shape: []int{1, c, 1}, A: 1 / float32(nn*l), B: b})
	if len(shape) != 3 {
		m = add(Node{Op: OpReshape, In: []int{m}, Shape: chanShape(shape)})
	}
	return m
}

// chanShape is [1, C, 1, ...] of shape's rank (a fresh slice).
func chanShape(shape []int) []int {
	out := make([]int, len(shape))
	for i := range out {
		out[i] = 1
	}
	out[1] = shape[1]
	return out
}

// batchNorm64 computes OpBatchNorm or OpBatchNormBack channel by channel
// (norm64 over a channel's values gathered).
func batchNorm64(n *Node, in [][]float64, _ [][]int, out []float64) {
	nn, c := n.Shape[0], n.Shape[1]
	l := len(out) / (nn * c)
	for ch := 0; ch < c; ch++ {
		x, o := channelValues(in[0], nn, c, ch), make([]float64, nn*l)
		var dy []float64
		if len(in) > 1 {
			dy = channelValues(in[1], nn, c, ch)
		}
		norm64(x, dy, o, float64(n.A), true)
		for b := 0; b < nn; b++ {
			copy(out[(b*c+ch)*l:(b*c+ch+1)*l], o[b*l:(b+1)*l])
		}
	}
}

// channelValues gathers channel ch of src [N, C, ...] (N = nn): its N
// blocks of contiguous values.
func channelValues(src []float64, nn, c, ch int) []float64 {
	l := len(src) / (nn * c)
	g := make([]float64, 0, nn*l)
	for b := 0; b < nn; b++ {
		g = append(g, src[(b*c+ch)*l:(b*c+ch+1)*l]...)
	}
	return g
}

// BatchNormSplits is how many chunks each channel of a batch norm over
// shape [N, C, ...] splits into where a GPU kernel sums the chunks in
// workgroups of their own and merges them per channel (ggml-vulkan's
// patch 0015, webgpu): chunks of at least batchNormChunk values, as many as
// bring the channels' chunks to about batchNormWorkgroups (32 channels of
// a convnet, a workgroup each, would leave most of a large GPU idle).
func BatchNormSplits(shape []int) int {
	c := shape[1]
	m := NumElems(shape) / c
	return max(1, min((batchNormWorkgroups+c-1)/c, m/batchNormChunk))
}

const (
	batchNormWorkgroups = 1024
	batchNormChunk      = 256
)
