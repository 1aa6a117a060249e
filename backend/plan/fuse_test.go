package plan

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
)

// These tests check Fuse's decisions on graphs alone; backend/webgpu's
// fusion tests run the kernels it generates from them against the
// reference.

// gpuCaps are WebGPU's fusion capabilities with maxBindings storage
// buffers per kernel.
func gpuCaps(maxBindings int) FuseCaps {
	reduce := func(op backend.Op) bool { return op == backend.OpSum || op == backend.OpMax }
	return FuseCaps{
		MaxBindings:   maxBindings,
		FixedBindings: 1,
		Inline:        Pointwise,
		Prologue:      reduce,
		Core:          func(op backend.Op) bool { return op == backend.OpMatMul || reduce(op) },
		GroupUpdates:  true,
	}
}

// kernels plans f's graph and counts its kernels: the needed nodes that
// are neither inlined, deferred into a group, views (but updates, which
// live in their arg) nor args.
func kernels(t *testing.T, f *Fusion) int {
	t.Helper()
	pl, err := Make(f.Graph, f.Options())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, nd := range f.Graph.Nodes {
		if pl.Needed[i] && !f.Inline[i] && !f.Deferred[i] && (!pl.View[i] || nd.Op.InPlace()) && nd.Op != backend.OpArg {
			n++
		}
	}
	return n
}

// mlpStep builds a training step the way core lowers one: rows gathered by
// index, depth Linear layers with bias and ReLU, MSE loss, the backward
// with ReLU masks and bias sums, gradients as outputs, and AdamW on every
// parameter.
func mlpStep(batch, width, depth, rows int) *builder {
	b := &builder{}
	x := b.arg(rows, width)
	idx := b.arg(batch)
	sh := []int{batch, width}
	type layer struct{ w, bias, pre, act int }
	var ls []layer
	h := b.op(backend.OpGetRows, sh, x, idx)
	in0 := h
	for l := range depth {
		w, bias := b.arg(width, width), b.arg(width)
		pre := b.op(backend.OpAdd, sh, b.op(backend.OpMatMul, sh, h, w), bias)
		act := pre
		if l < depth-1 {
			act = b.op(backend.OpReLU, sh, pre)
		}
		ls = append(ls, layer{w, bias, pre, act})
		h = act
	}
	yb := b.op(backend.OpGetRows, sh, b.arg(rows, width), idx)
	diff := b.op(backend.OpSub, sh, h, yb)
	sq := b.op(backend.OpMul, sh, diff, diff)
	ne := batch * width
	tot := b.node(backend.Node{Op: backend.OpSum, In: []int{b.op(backend.OpReshape, []int{ne}, sq)}, Shape: []int{1}})
	sc := b.op(backend.OpReshape, []int{}, tot)
	b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{sc}, Shape: []int{}, A: 1 / float32(ne)}))
	one := b.node(backend.Node{Op: backend.OpFill, Shape: []int{}, A: 1})
	g0 := b.node(backend.Node{Op: backend.OpAffine, In: []int{one}, Shape: []int{}, A: 1 / float32(ne)})
	g2 := b.op(backend.OpExpand, []int{ne}, b.op(backend.OpReshape, []int{1}, g0))
	gs := b.op(backend.OpReshape, sh, g2)
	d := b.op(backend.OpAdd, sh, b.op(backend.OpMul, sh, gs, diff), b.op(backend.OpMul, sh, gs, diff))
	var grads [][2]int
	for l := depth - 1; l >= 0; l-- {
		L := ls[l]
		bs := b.node(backend.Node{Op: backend.OpSum, In: []int{d}, Shape: []int{1, width}})
		gbias := b.op(backend.OpReshape, []int{width}, bs)
		b.out(gbias)
		prev := in0
		if l > 0 {
			prev = ls[l-1].act
		}
		gw := b.node(backend.Node{Op: backend.OpMatMul, In: []int{prev, d}, Shape: []int{width, width}, TransA: true})
		b.out(gw)
		grads = append(grads, [2]int{L.w, gw}, [2]int{L.bias, gbias})
		if l > 0 {
			dh := b.node(backend.Node{Op: backend.OpMatMul, In: []int{d, L.w}, Shape: sh, TransB: true})
			mask := b.node(backend.Node{Op: backend.OpInside, In: []int{ls[l-1].pre}, Shape: sh, B: float32(math.Inf(1))})
			d = b.op(backend.OpMul, sh, dh, mask)
		}
	}
	hp := b.arg(7)
	for _, pg := range grads {
		s := b.g.Nodes[pg[0]].Shape
		b.op(backend.OpAdamW, s, pg[0], pg[1], b.arg(s...), b.arg(s...), hp)
	}
	return b
}

// TestFuseMLPStep: fusion leaves about four kernels per layer of a
// training step, and each ReLU mask reads the ReLU.
func TestFuseMLPStep(t *testing.T) {
	for _, c := range []struct{ batch, width, depth int }{{12, 24, 3}, {7, 20, 4}, {16, 9, 2}} {
		t.Run(fmt.Sprintf("b%d-w%d-d%d", c.batch, c.width, c.depth), func(t *testing.T) {
			b := mlpStep(c.batch, c.width, c.depth, 3*c.batch)
			if err := b.g.Validate(); err != nil {
				t.Fatal(err)
			}
			f := Fuse(&b.g, gpuCaps(10))
			nf, np := kernels(t, f), kernels(t, Unfused(&b.g))
			// Per layer: matmul+bias+ReLU, the backward matmul with its mask,
			// the weight gradient, the bias sum; plus the gathers, the loss,
			// the loss gradient and the optimizer group(s).
			if limit := 4*c.depth + 6; nf > limit || nf >= np {
				t.Errorf("fused step has %d kernels (unfused %d), want at most %d", nf, np, limit)
			}
			for i, n := range f.Graph.Nodes {
				if n.Op == backend.OpInside && f.Graph.Nodes[n.In[0]].Op != backend.OpReLU {
					t.Errorf("mask %d reads %v, not the ReLU of its input", i, f.Graph.Nodes[n.In[0]].Op)
				}
				if n.Op == backend.OpInside && b.g.Nodes[i].In[0] == n.In[0] {
					t.Errorf("Fuse changed its input graph at node %d", i)
				}
			}
		})
	}
}

// TestFusePatterns counts the kernels of each kind of fused chain.
func TestFusePatterns(t *testing.T) {
	cases := []struct {
		name    string
		build   func(b *builder)
		kernels int
	}{
		{"matmul-epilogue-broadcast", func(b *builder) {
			x, w := b.arg(2, 12, 8), b.arg(2, 8, 20)
			col, row := b.arg(20), b.arg(2, 12, 1)
			s := []int{2, 12, 20}
			z := b.op(backend.OpMatMul, s, x, w)
			b.out(b.op(backend.OpTanh, s, b.op(backend.OpMul, s, b.op(backend.OpAdd, s, z, col), row)))
		}, 1},
		{"matmul-epilogue-reads-operand", func(b *builder) {
			x := b.arg(7, 7)
			z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, x}, Shape: []int{7, 7}, TransB: true})
			b.out(b.op(backend.OpSub, []int{7, 7}, z, x))
		}, 1},
		{"gather-sub-square-sum-scale", func(b *builder) {
			tb, y, ix := b.arg(9, 6), b.arg(5, 6), b.arg(5)
			s := []int{5, 6}
			d := b.op(backend.OpSub, s, y, b.op(backend.OpGetRows, s, tb, ix))
			sq := b.op(backend.OpMul, s, d, d)
			tot := b.node(backend.Node{Op: backend.OpSum, In: []int{b.op(backend.OpReshape, []int{30}, sq)}, Shape: []int{1}})
			b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{tot}, Shape: []int{1}, A: 0.5, B: 1}))
		}, 1},
		{"col-sum-prologue-epilogue", func(b *builder) {
			x := b.arg(3, 7, 5)
			e := b.op(backend.OpExp, []int{3, 7, 5}, x)
			s := b.node(backend.Node{Op: backend.OpSum, In: []int{e}, Shape: []int{3, 1, 5}, Axis: 1})
			b.out(b.op(backend.OpLog, []int{3, 1, 5}, s))
		}, 1},
		{"max-of-permute-expand", func(b *builder) {
			x, c := b.arg(4, 3, 5), b.arg(3, 1)
			p := b.node(backend.Node{Op: backend.OpPermute, In: []int{x}, Shape: []int{3, 5, 4}, Perm: []int{1, 2, 0}})
			e := b.op(backend.OpExpand, []int{2, 3, 5, 4}, b.op(backend.OpReshape, []int{3, 1, 1}, c))
			s := b.op(backend.OpAdd, []int{2, 3, 5, 4}, e, p)
			b.out(b.node(backend.Node{Op: backend.OpMax, In: []int{s}, Shape: []int{2, 3, 5, 1}, Axis: 3}))
		}, 1},
		// The constant is inlined into both readers; m, read twice, is not.
		{"one-hot-slice-constants", func(b *builder) {
			ix, x := b.arg(6), b.arg(6, 5)
			oh := b.node(backend.Node{Op: backend.OpOneHot, In: []int{ix}, Shape: []int{6, 5}})
			half := b.node(backend.Node{Op: backend.OpFill, Shape: []int{5}, A: 0.5})
			sl := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Shape: []int{6, 5}})
			m := b.op(backend.OpMul, []int{6, 5}, oh, b.op(backend.OpAdd, []int{6, 5}, sl, half))
			b.out(m)
			b.out(b.op(backend.OpNeg, []int{6, 5}, b.op(backend.OpSub, []int{6, 5}, m, half)))
		}, 2},
		{"reshape-output-is-a-view", func(b *builder) {
			s := b.node(backend.Node{Op: backend.OpSum, In: []int{b.arg(6, 4)}, Shape: []int{1, 4}})
			b.out(b.op(backend.OpReshape, []int{4}, s))
		}, 1},
		// neg(w) is computed before the update of w and read after it: it
		// must not move into its reader past the update.
		{"no-inlining-across-inplace", func(b *builder) {
			w, g, m, v, hp := b.arg(10), b.arg(10), b.arg(10), b.arg(10), b.arg(7)
			n := b.op(backend.OpNeg, []int{10}, w)
			b.op(backend.OpAdamW, []int{10}, w, g, m, v, hp)
			b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{n}, Shape: []int{10}, A: 2}))
		}, 3},
		// The second update writes the arg the first reads as its gradient:
		// they stay two kernels in order.
		{"no-group-over-read-then-write", func(b *builder) {
			hp := b.arg(3)
			w1, x, v1, g2, v2 := b.arg(300), b.arg(300), b.arg(300), b.arg(300), b.arg(300)
			b.op(backend.OpSGD, []int{300}, w1, x, v1, hp)
			b.op(backend.OpSGD, []int{300}, x, g2, v2, hp)
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{}
			c.build(b)
			if err := b.g.Validate(); err != nil {
				t.Fatal(err)
			}
			if n := kernels(t, Fuse(&b.g, gpuCaps(8))); n != c.kernels {
				t.Errorf("%d kernels, want %d\n%s", n, c.kernels, &b.g)
			}
		})
	}
}

// TestFuseUpdateGroups: updates group within the binding limit (the fixed
// bindings, the hyperparameters once, the operands of each), not without
// GroupUpdates, and never across another op.
func TestFuseUpdateGroups(t *testing.T) {
	updates := func(op backend.Op, n int) *builder {
		b := &builder{}
		hpLen := 7
		if op == backend.OpSGD {
			hpLen = 3
		}
		hp := b.arg(hpLen)
		for k := range n {
			s := []int{k + 3}
			if op == backend.OpSGD {
				b.op(op, s, b.arg(s...), b.arg(s...), b.arg(s...), hp)
			} else {
				b.op(op, s, b.arg(s...), b.arg(s...), b.arg(s...), b.arg(s...), hp)
			}
		}
		return b
	}
	for _, c := range []struct {
		op          backend.Op
		n, bindings int
		kernels     int
	}{
		{backend.OpSGD, 5, 17, 1}, // 1 + 1 + 5*3
		{backend.OpSGD, 5, 16, 2},
		{backend.OpSGD, 5, 8, 3}, // two per kernel
		{backend.OpAdamW, 9, 10, 5},
		{backend.OpAdamW, 9, 38, 1},
	} {
		b := updates(c.op, c.n)
		f := Fuse(&b.g, gpuCaps(c.bindings))
		if n := kernels(t, f); n != c.kernels {
			t.Errorf("%d %v updates, %d bindings: %d kernels, want %d", c.n, c.op, c.bindings, n, c.kernels)
		}
		caps := gpuCaps(c.bindings)
		caps.GroupUpdates = false
		if n := kernels(t, Fuse(&b.g, caps)); n != c.n {
			t.Errorf("%d %v updates without GroupUpdates: %d kernels", c.n, c.op, n)
		}
		// The members run at the group's last member (Options), which
		// computes them all (Computes, Kernels).
		o := f.Options()
		all := make([]bool, len(f.Graph.Nodes))
		for i := range all {
			all[i] = true
		}
		ks := f.Kernels(all)
		for last, ms := range f.Group {
			if len(ms) > 1 && !slices.Equal(ks[last], f.Computes(last)) {
				t.Errorf("Kernels()[%d] = %v, want %v", last, ks[last], f.Computes(last))
			}
		}
		for k, ms := range ks {
			if len(ms) < 2 || !slices.Equal(ms, f.Computes(k)) {
				t.Errorf("Kernels()[%d] = %v, Computes(%d) = %v", k, ms, k, f.Computes(k))
			}
		}
		for last, ms := range f.Group {
			if ms != nil && len(f.Computes(last)) != len(ms) {
				t.Errorf("the group at %d computes %v, want %v", last, f.Computes(last), ms)
			}
			for _, j := range ms {
				if o.RunsAt[j] != last {
					t.Errorf("member %d of the group at %d runs at %d", j, last, o.RunsAt[j])
				}
				if j != last && f.Computes(j) != nil {
					t.Errorf("deferred member %d computes %v", j, f.Computes(j))
				}
			}
		}
	}
	b := updates(backend.OpSGD, 2)
	hp := 0
	x := b.arg(4)
	b.out(b.op(backend.OpNeg, []int{4}, x))
	b.op(backend.OpSGD, []int{3}, b.arg(3), b.arg(3), b.arg(3), hp)
	if n := kernels(t, Fuse(&b.g, gpuCaps(30))); n != 3 {
		t.Errorf("updates around a neg: %d kernels, want 3 (a group, the neg, the last update)", n)
	}
}

// TestFuseBindingCuts: a chain reading more values than a kernel binds, or
// values larger than a binding, is cut into more kernels.
func TestFuseBindingCuts(t *testing.T) {
	b := &builder{}
	s := []int{64}
	acc := b.arg(s...)
	for range 6 {
		acc = b.op(backend.OpAdd, s, acc, b.arg(s...))
	}
	b.out(acc)
	for _, c := range []struct {
		bindings int
		bytes    uint64
		kernels  int
	}{
		{9, 0, 1},   // 7 args, P and the output
		{8, 0, 2},   // cut once
		{4, 0, 6},   // every add its own kernel, but the first reads two args
		{9, 256, 1}, // each value fits
		{9, 255, 6}, // none fits a binding: nothing fuses
		{100, 1 << 30, 1},
	} {
		caps := gpuCaps(c.bindings)
		caps.MaxBindingBytes = c.bytes
		f := Fuse(&b.g, caps)
		if n := kernels(t, f); n != c.kernels {
			t.Errorf("%d bindings of %d bytes: %d kernels, want %d", c.bindings, c.bytes, n, c.kernels)
		}
		for r := range f.Graph.Nodes {
			if !f.Inline[r] && f.Fused(r) && !f.kernelFits(r, caps) {
				t.Errorf("%d bindings of %d bytes: kernel %d reads %v", c.bindings, c.bytes, r, f.Reads(r))
			}
		}
	}
}

// TestFuseCaps: a backend that states no cores gets no epilogues, one that
// inlines nothing gets one kernel per node.
func TestFuseCaps(t *testing.T) {
	b := &builder{}
	x, w, bias := b.arg(4, 8), b.arg(8, 5), b.arg(5)
	z := b.op(backend.OpMatMul, []int{4, 5}, x, w)
	b.out(b.op(backend.OpReLU, []int{4, 5}, b.op(backend.OpAdd, []int{4, 5}, z, bias)))
	root := len(b.g.Nodes) - 1
	if f := Fuse(&b.g, gpuCaps(8)); kernels(t, f) != 1 || f.Core[root] != z || len(f.Computes(root)) != 3 || f.Computes(z) != nil {
		t.Errorf("matmul + bias + ReLU: %d kernels, core %v, root computes %v", kernels(t, f), f.Core, f.Computes(root))
	}
	caps := gpuCaps(8)
	caps.Core = nil
	if n := kernels(t, Fuse(&b.g, caps)); n != 2 {
		t.Errorf("without cores: %d kernels, want 2 (the matmul, then bias + ReLU)", n)
	}
	caps.Inline = nil
	if n := kernels(t, Fuse(&b.g, caps)); n != 3 {
		t.Errorf("inlining nothing: %d kernels, want 3", n)
	}
}

// TestFuseReLUMask: a mask inside(x, a>=0, b) reads relu(x) where that is
// computed, but not for an x living in an arg (an update between could
// change it) nor for a < 0.
func TestFuseReLUMask(t *testing.T) {
	b := &builder{}
	s := []int{6}
	a := b.arg(s...)
	x := b.op(backend.OpNeg, s, a)
	r := b.op(backend.OpReLU, s, x)
	b.out(r)
	m := b.node(backend.Node{Op: backend.OpInside, In: []int{x}, Shape: s, B: 1})
	neg := b.node(backend.Node{Op: backend.OpInside, In: []int{x}, Shape: s, A: -1, B: 1})
	b.op(backend.OpReLU, s, a)
	ma := b.node(backend.Node{Op: backend.OpInside, In: []int{a}, Shape: s, B: 1})
	b.out(b.op(backend.OpAdd, s, b.op(backend.OpAdd, s, m, neg), ma))
	f := Fuse(&b.g, gpuCaps(8))
	for _, c := range []struct{ node, reads int }{{m, r}, {neg, x}, {ma, a}} {
		if got := f.Graph.Nodes[c.node].In[0]; got != c.reads {
			t.Errorf("mask %d reads %d, want %d", c.node, got, c.reads)
		}
	}
	if b.g.Nodes[m].In[0] != x {
		t.Error("Fuse changed its input graph")
	}
}

// TestFuseWordGather: a get_rows of packed words is never fused: its
// indices come from a reshape, which is inlined into any other get_rows (a
// generated kernel would move the words as f32 values).
func TestFuseWordGather(t *testing.T) {
	b := &builder{}
	tn := b.arg(4, 3)
	flat := b.op(backend.OpReshape, []int{4}, b.arg(2, 2))
	gather := b.op(backend.OpGetRows, []int{4, 3}, tn, flat)
	b.out(b.op(backend.OpUnpackBF16, []int{4, 5}, gather))
	if err := b.g.Validate(); err != nil {
		t.Fatal(err)
	}
	f := Fuse(&b.g, gpuCaps(8))
	if f.Inline[flat] || f.Fused(gather) || !f.Words[gather] {
		t.Errorf("the get_rows of words: indices inlined %t, fused %t, words %t", f.Inline[flat], f.Fused(gather), f.Words[gather])
	}
}

// TestPointwiseEveryOp: Pointwise has a case for every op (else it
// panics), and every elementwise op is pointwise.
func TestPointwiseEveryOp(t *testing.T) {
	for _, op := range backend.Ops() {
		if (op.IsUnary() || op.IsBinary()) && !Pointwise(op) {
			t.Errorf("elementwise %v is not pointwise", op)
		}
	}
}
