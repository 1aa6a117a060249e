package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// Backward appends the gradient of t (a one-element tensor, usually a loss)
// with respect to every tensor it depends on to the device's pending graph,
// and accumulates the result into the Grad of each leaf that requires grad
// (params). It does not run anything: the backward becomes part of the next
// sync's program, together with the forward and any optimizer update.
//
// Each node is differentiated once: a second Backward through the same nodes
// is an error, like PyTorch without retain_graph.
func (t *Tensor) Backward() error {
	if t == nil {
		return fmt.Errorf("core: Backward of a nil tensor")
	}
	if t.Len() != 1 {
		return fmt.Errorf("core: Backward of a tensor of shape %v: want one element (a scalar loss)", t.shape)
	}
	d := t.dev
	// The walk and the ops it records are the backward's create time: the
	// timed mode charges the time between ops to the next op.
	defer d.enterMode(profile.PassBackward, true, profiling())()
	d.lock()
	if !t.requiresGrad {
		d.mu.Unlock()
		return fmt.Errorf("core: Backward of %v: it does not depend on any tensor that requires grad", t)
	}
	order, err := topo(t)
	d.mu.Unlock()
	if err != nil {
		return err
	}

	grads := map[*Tensor]*Tensor{t: d.Full(1, t.shape...)}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i].t
		g := grads[n]
		delete(grads, n)
		if g == nil {
			continue
		}
		if n.isLeaf() {
			d.lock()
			prev := n.grad
			d.mu.Unlock()
			sum := g
			if prev != nil {
				sum = Add(prev, g)
			}
			d.lock()
			sum.keep = true
			n.grad = sum
			d.grads = append(d.grads, gradUndo{leaf: n, prev: prev})
			d.mu.Unlock()
			continue
		}
		for k, in := range order[i].inputs {
			if !order[i].needs[k] {
				continue // no work for inputs without gradient (data, labels)
			}
			gin := vjp(n, order[i].inputs, g, k)
			if gin == nil {
				continue
			}
			if prev := grads[in]; prev != nil {
				gin = Add(prev, gin)
			}
			grads[in] = gin
		}
		d.lock()
		n.backwarded = true
		d.mu.Unlock()
	}
	return nil
}

func (t *Tensor) isLeaf() bool { return t.op == backend.OpInvalid }

// walked is a node of Backward's walk with what it read under the lock: its
// inputs and which of them need a gradient.
type walked struct {
	t      *Tensor
	inputs []*Tensor
	needs  []bool
}

// topo orders the requires-grad subgraph under t, inputs first. Called with
// the device lock held: it reads the recipes that a sync may change.
func topo(t *Tensor) ([]walked, error) {
	var order []walked
	seen := map[*Tensor]bool{}
	var visit func(n *Tensor) error
	visit = func(n *Tensor) error {
		if seen[n] || !n.requiresGrad {
			return nil
		}
		seen[n] = true
		if !n.isLeaf() {
			if n.backwarded {
				return fmt.Errorf("core: Backward: %v was already differentiated by an earlier Backward", n)
			}
			if n.state() == stateFailed {
				return fmt.Errorf("core: Backward: %v was dropped by a failed run: %w", n, n.err)
			}
			if n.inputs == nil {
				return fmt.Errorf("core: Backward: the graph of %v is gone (its values were not kept)", n)
			}
		}
		w := walked{t: n, inputs: slices.Clone(n.inputs), needs: make([]bool, len(n.inputs))}
		for k, in := range n.inputs {
			switch in.state() {
			case stateSpent:
				return fmt.Errorf("core: Backward: %v needs %v, which was not kept", n, in)
			case stateFailed:
				return fmt.Errorf("core: Backward: %v needs %v, which was dropped by a failed run: %w", n, in, in.err)
			}
			w.needs[k] = in.requiresGrad
			if err := visit(in); err != nil {
				return err
			}
		}
		order = append(order, w)
		return nil
	}
	return order, visit(t)
}

// vjp returns the gradient of input k of n given the gradient g of n (nil
// where none flows), expressed in the same IR ops.
func vjp(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
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
	case backend.OpNeg:
		return Neg(g)
	case backend.OpExp:
		return Mul(g, n)
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
		return Mul(g, passMask(x, n.attr.A, n.attr.B))
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
	case backend.OpMax, backend.OpOneHot, backend.OpFill, backend.OpInside, backend.OpArg, backend.OpAdamW, backend.OpSGD:
		return nil // no gradient flows through a selection, a mask, a constant or an update
	default:
		backend.Unknown("core.vjp", n.op)
	}
	return nil
}

// The gradient masks of ReLU and Clamp are NaN where x is NaN, so that a
// NaN input gives a NaN gradient rather than a zero one (inside alone is a
// comparison mask, 0 at NaN).

// reluMask is ReLU's derivative as PyTorch's: 1 where x > 0, +Inf and
// subnormals included, 0 where x <= 0, and NaN at NaN (x may be ReLU's
// input or its output: the mask is the same). x*2^127 is at least
// 2^-22 for every positive x (the smallest subnormal is 2^-149), so the
// clamp gives exactly 0 or 2^-22 (or NaN), scaled to 0 or 1. The clamp
// stands between the two scales: a WGSL compiler may fold x*2^127*2^22
// into x*Inf (lavapipe does), which is NaN at 0.
func reluMask(x *Tensor) *Tensor {
	return Scale(Clamp(Scale(x, 0x1p127), 0, 0x1p-22), 0x1p22)
}

// passMask is Clamp's: 1 strictly inside (lo, hi), 0 outside, NaN at NaN
// (Clamp(x, 0, 0) is 0 for every other x, ±Inf included).
func passMask(x *Tensor, lo, hi float32) *Tensor {
	return Add(inside(x, lo, hi), Clamp(x, 0, 0))
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
	for ax := 0; ax < g.Rank(); ax++ {
		if ax < off || shape[ax-off] == 1 && g.shape[ax] != 1 {
			g = sumKeep("unbroadcast", g, ax)
		}
	}
	return Reshape(g, shape...)
}
