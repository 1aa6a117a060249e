package backend

import (
	"fmt"
	"math"
)

// OpCrossEntropy is the mean softmax cross-entropy of logits In[0] [B, C]
// at integer labels In[1] [B] (whole numbers as f32, rounded and clamped
// as one_hot's), a scalar (Node.Shape []):
//
//	-(1/B) sum_i log_softmax(x_i)[label_i]
//
// plus NaN when a label lies outside 0..C-1 or is NaN, so that a bad label
// computed on the device shows instead of being clamped. Each row follows
// log_softmax's special values; only the label's entry is read from it (a
// -Inf logit elsewhere is no NaN; at the label the loss is +Inf).
var OpCrossEntropy = defineComposite(Composite{
	Name: "cross_entropy", Inputs: 2, Index: []int{1},
	Check: checkCrossEntropy,
	Decompose: func(n *Node, in []int, inShapes [][]int, add func(Node) int) int {
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
	},
	Eval:   crossEntropy64,
	Sample: func() ([][]int, Node) { return [][]int{{2, 3}, {2}}, Node{In: []int{0, 1}, Shape: []int{}} },
	Cases:  crossEntropyCases(false),
	// a mean of log-probabilities (log_softmax's bound)
	Tol: [2]float64{1e-5, 1e-5}, Flops: 6,
})

// OpCrossEntropyBack is OpCrossEntropy's gradient for the logits: In[0] =
// logits [B, C], In[1] = labels [B], In[2] = the loss's gradient g (shape
// []); (softmax(x_i) - onehot(label_i))*g/B, the labels rounded and
// clamped as one_hot's.
var OpCrossEntropyBack = defineComposite(Composite{
	Name: "cross_entropy_back", Inputs: 3, Index: []int{1},
	Check: checkCrossEntropy,
	Decompose: func(n *Node, in []int, _ [][]int, add func(Node) int) int {
		b, c := n.Shape[0], n.Shape[1]
		sm := add(Node{Op: OpSoftmax, In: []int{in[0]}, Shape: []int{b, c}})
		q := add(Node{Op: OpOneHot, In: []int{in[1]}, Shape: []int{b, c}})
		d := add(Node{Op: OpSub, In: []int{sm, q}, Shape: []int{b, c}})
		g := add(Node{Op: OpAffine, In: []int{in[2]}, Shape: []int{}, A: 1 / float32(b)})
		return add(Node{Op: OpMul, In: []int{d, g}, Shape: []int{b, c}})
	},
	Eval: crossEntropy64,
	Sample: func() ([][]int, Node) {
		return [][]int{{2, 3}, {2}, {}}, Node{In: []int{0, 1, 2}, Shape: []int{2, 3}}
	},
	Cases: crossEntropyCases(true),
	// softmax's differences from the one-hot target
	Tol: [2]float64{1e-6, 2e-5}, Flops: 6,
})

// checkCrossEntropy: logits [B, C], labels [B], the loss a scalar (and for
// the backward, its gradient a scalar and the result the logits' shape).
func checkCrossEntropy(n *Node, in func(int) []int) error {
	x, lab := in(0), in(1)
	if len(x) != 2 || len(lab) != 1 || lab[0] != x[0] {
		return fmt.Errorf("logits %v, labels %v: want [batch, classes] and [batch]", x, lab)
	}
	if err := checkClasses(x[1]); err != nil {
		return err
	}
	want := []int{}
	if len(n.In) == 3 {
		if g := in(2); len(g) != 0 {
			return fmt.Errorf("loss gradient %v: want a scalar", g)
		}
		want = x
	}
	if fmt.Sprint(n.Shape) != fmt.Sprint(want) {
		return fmt.Errorf("shape %v: want %v", n.Shape, want)
	}
	return nil
}

// MaxClasses is the most classes one_hot and cross_entropy take: their
// indices and labels are f32, which name every whole number only up to
// 2^24 (the one-hot's column numbers, made as f32, could not even be
// counted past it: ggml-vulkan's composition aborted the process there).
const MaxClasses = 1 << 24

// checkClasses refuses more than MaxClasses classes.
func checkClasses(c int) error {
	if c > MaxClasses {
		return fmt.Errorf("%d classes: more than f32 indices name exactly (%d)", c, MaxClasses)
	}
	return nil
}

// crossEntropy64 computes OpCrossEntropy's mean of -log_softmax at the
// labels (NaN for a label outside 0..C-1) or OpCrossEntropyBack's
// (softmax - onehot)*g/B.
func crossEntropy64(n *Node, in [][]float64, shapes [][]int, out []float64) {
	b, c := shapes[0][0], shapes[0][1]
	sm := make([]float64, b*c)
	back := len(in) == 3
	Softmax64(!back, in[0], c, sm)
	if back {
		g := in[2][0] / float64(b)
		for i := 0; i < b; i++ {
			k := ClampIndex(in[1][i], c)
			for j := 0; j < c; j++ {
				q := 0.0
				if j == k {
					q = 1
				}
				out[i*c+j] = (sm[i*c+j] - q) * g
			}
		}
		return
	}
	sum := 0.0
	for i := 0; i < b; i++ {
		l := in[1][i]
		if !(l >= 0 && l <= float64(c-1)) {
			out[0] = math.NaN()
			return
		}
		sum += sm[i*c+ClampIndex(l, c)]
	}
	out[0] = -sum / float64(b)
}

// crossEntropyCases: logits drawn at a few batch and class counts, whole
// labels; and rows holding a special (at the label in every other row),
// labels outside 0..C-1 (the loss is NaN; the gradient's one-hot clamps
// them), a fraction (rounded), labels at the ends.
func crossEntropyCases(back bool) func(Draw, bool) []CompositeCase {
	return func(d Draw, special bool) []CompositeCase {
		labels := func(n, c int) []float32 {
			l := make([]float32, n)
			for i := range l {
				l[i] = float32(d.IntN(c))
			}
			return l
		}
		mk := func(x []float32, b, c int, lab []float32) CompositeCase {
			cs := CompositeCase{Args: [][]float32{x, lab}, Shapes: [][]int{{b, c}, {b}}, Node: Node{In: []int{0, 1}, Shape: []int{}}}
			if back {
				cs.Args = append(cs.Args, d.Uniform(1, -2, 2))
				cs.Shapes = append(cs.Shapes, []int{})
				cs.Node = Node{In: []int{0, 1, 2}, Shape: []int{b, c}}
			}
			return cs
		}
		var cs []CompositeCase
		if !special {
			for _, bc := range [][2]int{{1, 1}, {3, 7}, {17, 65}, {129, 3}, {5, 1000}} {
				cs = append(cs, mk(d.Uniform(bc[0]*bc[1], -5, 5), bc[0], bc[1], labels(bc[0], bc[1])))
			}
			return cs
		}
		for _, nc := range [][2]int{{5, 0}, {5, 4}, {300, 299}} {
			var x []float32
			rows := d.SpecialRows(nc[0], nc[1], false)
			for _, r := range rows {
				x = append(x, r...)
			}
			lab := labels(len(rows), nc[0])
			for i := 0; i < len(rows); i += 2 {
				lab[i] = float32(nc[1])
			}
			cs = append(cs, mk(x, len(rows), nc[0], lab))
		}
		nan, inf := float32(math.NaN()), float32(math.Inf(1))
		bad := []float32{-1, 7, nan, 2.5, inf, -inf, 0, 6, 1e30}
		cs = append(cs, mk(d.Uniform(len(bad)*7, -5, 5), len(bad), 7, bad))
		for _, v := range bad {
			lab := labels(4, 7)
			lab[2] = v
			cs = append(cs, mk(d.Uniform(4*7, -5, 5), 4, 7, lab))
		}
		return cs
	}
}
