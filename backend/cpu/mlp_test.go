package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// mlpStep builds the IR of one training step of an MLP with ReLU hidden
// layers, written by hand the way core lowers it: forward, MSE loss,
// backward through transposed matmuls, AdamW on every parameter. Args: x,
// target, hyperparameters, then per layer W, b and their m, v; the loss
// leaves through the last arg.
func mlpStep(batch int, widths []int) *gb {
	b := &gb{}
	x := b.arg(batch, widths[0])
	y := b.arg(batch, widths[len(widths)-1])
	hp := b.arg(7)
	type layer struct{ w, b, in, pre, out int }
	layers := make([]layer, len(widths)-1)
	h := x
	for l := range layers {
		in, out := widths[l], widths[l+1]
		L := &layers[l]
		L.w, L.b, L.in = b.arg(in, out), b.arg(out), h
		mm := b.op(backend.OpMatMul, []int{batch, out}, h, L.w)
		L.pre = b.op(backend.OpAdd, []int{batch, out}, mm, L.b)
		h = L.pre
		if l < len(layers)-1 {
			h = b.op(backend.OpReLU, []int{batch, out}, L.pre)
		}
		L.out = h
	}
	O := widths[len(widths)-1]
	d := b.op(backend.OpSub, []int{batch, O}, h, y)
	sq := b.op(backend.OpMul, []int{batch, O}, d, d)
	s1 := b.node(backend.Node{Op: backend.OpSum, In: []int{sq}, Shape: []int{batch, 1}, Axis: 1})
	s0 := b.node(backend.Node{Op: backend.OpSum, In: []int{s1}, Shape: []int{1, 1}, Axis: 0})
	loss := b.node(backend.Node{Op: backend.OpAffine, In: []int{s0}, Shape: []int{1, 1}, A: 1 / float32(batch*O)})
	grad := b.node(backend.Node{Op: backend.OpAffine, In: []int{d}, Shape: []int{batch, O}, A: 2 / float32(batch*O)})
	for l := len(layers) - 1; l >= 0; l-- {
		L := layers[l]
		in, out := widths[l], widths[l+1]
		if l < len(layers)-1 { // through the ReLU
			mask := b.node(backend.Node{Op: backend.OpInside, In: []int{L.pre}, Shape: []int{batch, out}, A: 0, B: float32(math.Inf(1))})
			grad = b.op(backend.OpMul, []int{batch, out}, grad, mask)
		}
		gw := b.node(backend.Node{Op: backend.OpMatMul, In: []int{L.in, grad}, Shape: []int{in, out}, TransA: true})
		gb1 := b.node(backend.Node{Op: backend.OpSum, In: []int{grad}, Shape: []int{1, out}, Axis: 0})
		gbias := b.op(backend.OpReshape, []int{out}, gb1)
		if l > 0 {
			grad = b.node(backend.Node{Op: backend.OpMatMul, In: []int{grad, L.w}, Shape: []int{batch, in}, TransB: true})
		}
		for _, pg := range [][2]int{{L.w, gw}, {L.b, gbias}} {
			shape := b.g.Nodes[pg[0]].Shape
			m, v := b.arg(shape...), b.arg(shape...)
			b.node(backend.Node{Op: backend.OpAdamW, In: []int{pg[0], pg[1], m, v, hp}, Shape: shape})
		}
	}
	b.out(loss)
	return b
}

// mlpArgs returns initial data: inputs in [-1,1), weights scaled by
// 1/sqrt(fan-in), zero optimizer state, Adam step 1 hyperparameters.
func mlpArgs(r *rand.Rand, b *gb) [][]float32 {
	args := randArgs(r, b.shapes, -1, 1)
	args[2] = []float32{1e-3, 0.9, 0.999, 1e-8, 0.01, 1 / (1 - 0.9), 1 / (1 - 0.999)}
	for i := 3; i < len(args); i++ {
		switch s := b.shapes[i]; {
		case !isParam(b, i):
			clear(args[i]) // optimizer state and the loss output
		case len(s) == 2:
			for j := range args[i] {
				args[i][j] /= float32(math.Sqrt(float64(s[0])))
			}
		}
	}
	return args
}

// isParam reports whether arg a is a parameter (In[0] of an AdamW).
func isParam(b *gb, a int) bool {
	for _, n := range b.g.Nodes {
		if n.Op == backend.OpAdamW && b.g.Nodes[n.In[0]].Arg == a {
			return true
		}
	}
	return false
}

// TestMLPTrainingStep runs three steps of a small MLP and compares loss,
// parameters and optimizer state with the float64 reference after each.
func TestMLPTrainingStep(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	c := New()
	b := mlpStep(13, []int{20, 37, 33, 5})
	args := mlpArgs(r, b)
	for step := range 3 {
		check(t, c, b, args, tol{2e-5, 2e-4})
		// check ran on copies: advance args with the reference for the next step.
		ref := make([][]float64, len(args))
		for i, a := range args {
			ref[i] = make([]float64, len(a))
			for j, v := range a {
				ref[i][j] = float64(v)
			}
		}
		refEval(&b.g, ref)
		for i := range args {
			for j := range args[i] {
				args[i][j] = float32(ref[i][j])
			}
		}
		if step == 0 && args[len(args)-1][0] <= 0 {
			t.Fatalf("loss %v", args[len(args)-1][0])
		}
	}
}

// TestRunAllocations: once compiled, a training step allocates nothing.
func TestRunAllocations(t *testing.T) {
	c := New()
	b := mlpStep(64, []int{256, 512, 512, 10})
	prog, err := c.Compile(&b.g)
	if err != nil {
		t.Fatal(err)
	}
	args := mlpArgs(rand.New(rand.NewPCG(31, 1)), b)
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		bufs[i], _ = c.Alloc(len(a))
		_ = c.Write(bufs[i], 0, a)
	}
	if _, err := prog.Run(bufs); err != nil { // warm up the pool
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = prog.Run(bufs) }); n > 0 {
		t.Errorf("Run allocates %v times per run, want 0", n)
	}
	times := backend.NewNodeTimes(len(b.g.Nodes))
	if n := testing.AllocsPerRun(10, func() { _, _ = prog.(backend.NodeTimer).RunTimed(bufs, times) }); n > 0 {
		t.Errorf("RunTimed allocates %v times per run, want 0", n)
	}
}
