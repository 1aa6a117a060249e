package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
)

// gb builds test graphs and their arg data.
type gb struct {
	g    backend.Graph
	args [][]float32
	rng  *rand.Rand
}

func newGB(seed uint64) *gb { return &gb{rng: rand.New(rand.NewPCG(seed, 11))} }

func (b *gb) arg(data []float32, shape ...int) int {
	b.args = append(b.args, data)
	b.g.NumArgs++
	return b.node(backend.Node{Op: backend.OpArg, Arg: b.g.NumArgs - 1, Shape: shape})
}

func (b *gb) rand(lo, hi float64, shape ...int) int {
	d := make([]float32, backend.NumElems(shape))
	for i := range d {
		d[i] = float32(lo + (hi-lo)*b.rng.Float64())
	}
	return b.arg(d, shape...)
}

func (b *gb) node(n backend.Node) int {
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1
}

func (b *gb) op(op backend.Op, shape []int, in ...int) int {
	return b.node(backend.Node{Op: op, In: in, Shape: shape})
}

// out sends node n's value to a new zeroed arg.
func (b *gb) out(n int) {
	ne := backend.NumElems(b.g.Nodes[n].Shape)
	b.args = append(b.args, make([]float32, ne))
	b.g.NumArgs++
	b.g.Outputs = append(b.g.Outputs, backend.Output{Node: n, Arg: b.g.NumArgs - 1})
}

// mlpStep builds a training step the way core lowers one (see the webgpu
// benchmarks): rows gathered by index, depth Linear layers with bias and
// ReLU, MSE loss, the backward with ReLU masks and bias sums, gradients as
// outputs, and AdamW on every parameter.
func mlpStep(seed uint64, batch, width, depth, rows int) *gb {
	b := newGB(seed)
	x := b.rand(-1, 1, rows, width)
	idxData := make([]float32, batch)
	for i := range idxData {
		idxData[i] = float32(b.rng.IntN(rows))
	}
	idx := b.arg(idxData, batch)
	sh := []int{batch, width}
	type layer struct{ w, bias, pre, act int }
	var ls []layer
	h := b.op(backend.OpGetRows, sh, x, idx)
	in0 := h
	for l := 0; l < depth; l++ {
		w := b.rand(-0.3, 0.3, width, width)
		bias := b.rand(-0.1, 0.1, width)
		z := b.op(backend.OpMatMul, sh, h, w)
		pre := b.op(backend.OpAdd, sh, z, bias)
		act := pre
		if l < depth-1 {
			act = b.op(backend.OpReLU, sh, pre)
		}
		ls = append(ls, layer{w, bias, pre, act})
		h = act
	}
	y := b.rand(-1, 1, rows, width)
	yb := b.op(backend.OpGetRows, sh, y, idx)
	diff := b.op(backend.OpSub, sh, h, yb)
	sq := b.op(backend.OpMul, sh, diff, diff)
	ne := batch * width
	flat := b.op(backend.OpReshape, []int{ne}, sq)
	tot := b.node(backend.Node{Op: backend.OpSum, In: []int{flat}, Shape: []int{1}, Axis: 0})
	sc := b.op(backend.OpReshape, []int{}, tot)
	loss := b.node(backend.Node{Op: backend.OpAffine, In: []int{sc}, Shape: []int{}, A: 1 / float32(ne)})
	b.out(loss)
	one := b.node(backend.Node{Op: backend.OpFill, Shape: []int{}, A: 1})
	g0 := b.node(backend.Node{Op: backend.OpAffine, In: []int{one}, Shape: []int{}, A: 1 / float32(ne)})
	g1 := b.op(backend.OpReshape, []int{1}, g0)
	g2 := b.op(backend.OpExpand, []int{ne}, g1)
	gs := b.op(backend.OpReshape, sh, g2)
	d := b.op(backend.OpAdd, sh, b.op(backend.OpMul, sh, gs, diff), b.op(backend.OpMul, sh, gs, diff))
	type grad struct{ w, gw, bias, gb int }
	var grads []grad
	for l := depth - 1; l >= 0; l-- {
		L := ls[l]
		bs := b.node(backend.Node{Op: backend.OpSum, In: []int{d}, Shape: []int{1, width}, Axis: 0})
		gbias := b.op(backend.OpReshape, []int{width}, bs)
		b.out(gbias)
		prev := in0
		if l > 0 {
			prev = ls[l-1].act
		}
		gw := b.node(backend.Node{Op: backend.OpMatMul, In: []int{prev, d}, Shape: []int{width, width}, TransA: true})
		b.out(gw)
		grads = append(grads, grad{L.w, gw, L.bias, gbias})
		if l > 0 {
			dh := b.node(backend.Node{Op: backend.OpMatMul, In: []int{d, L.w}, Shape: sh, TransB: true})
			mask := b.node(backend.Node{Op: backend.OpInside, In: []int{ls[l-1].pre}, Shape: sh, A: 0, B: float32(math.Inf(1))})
			d = b.op(backend.OpMul, sh, dh, mask)
		}
	}
	hp := b.arg([]float32{0.01, 0.9, 0.999, 1e-8, 0.01, 10, 1000}, 7)
	for _, gr := range grads {
		for _, pg := range [][2]int{{gr.w, gr.gw}, {gr.bias, gr.gb}} {
			s := b.g.Nodes[pg[0]].Shape
			m := b.rand(-0.01, 0.01, s...)
			v := b.rand(0, 0.01, s...)
			b.node(backend.Node{Op: backend.OpAdamW, In: []int{pg[0], pg[1], m, v, hp}, Shape: s})
		}
	}
	return b
}

// runGraph runs g on the backend (fused or not) for runs runs and returns
// every arg afterwards, and the number of dispatches of one run.
func runGraph(t *testing.T, be *Backend, g *backend.Graph, args [][]float32, runs int, fuse bool) ([][]float32, int) {
	t.Helper()
	withFusion(t, be, fuse)
	bufs := uploadArgs(t, be, args)
	p, err := be.Compile(g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, g)
	}
	defer p.Release()
	for range runs {
		if _, err := p.Run(bufs); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	out := make([][]float32, len(args))
	for i, buf := range bufs {
		out[i] = make([]float32, buf.Len())
		if err := be.Read(buf, 0, out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out, len(p.(*program).steps)
}

// uploadArgs allocates a buffer per arg, holding its data, freed when the
// test ends.
func uploadArgs(t *testing.T, be *Backend, args [][]float32) []backend.Buffer {
	t.Helper()
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		buf, err := be.Alloc(len(a))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Free(buf) })
		if err := be.Write(buf, 0, a); err != nil {
			t.Fatal(err)
		}
		bufs[i] = buf
	}
	return bufs
}

// reference evaluates g runs times in float64 (backendtest.Eval).
func reference(t *testing.T, g *backend.Graph, args [][]float32, runs int) [][]float64 {
	t.Helper()
	ref := make([][]float64, len(args))
	for i, a := range args {
		ref[i] = make([]float64, len(a))
		for j, v := range a {
			ref[i][j] = float64(v)
		}
	}
	for range runs {
		if _, err := backendtest.Eval(g, ref); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// compare checks got against want: |got-want| <= tol*(1+|want|).
func compare(t *testing.T, what string, got [][]float32, want [][]float64, tol float64) {
	t.Helper()
	for i := range want {
		bad := 0
		for j, w := range want[i] {
			g := float64(got[i][j])
			if !(math.Abs(g-w) <= tol*(1+math.Abs(w))) && !(math.IsNaN(w) && math.IsNaN(g)) {
				if bad < 3 {
					t.Errorf("%s: arg %d [%d]: got %v, want %v (tol %g)", what, i, j, g, w, tol)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("%s: arg %d: %d of %d elements out of tolerance", what, i, bad, len(want[i]))
		}
	}
}

// TestFusedTrainingStep runs a core-shaped MLP training step fused and
// unfused against the float64 reference, over several steps (the updated
// weights feed the next), and checks that fusion removes most dispatches.
func TestFusedTrainingStep(t *testing.T) {
	be := openTest(t)
	for _, c := range []struct{ batch, width, depth int }{{12, 24, 3}, {7, 20, 4}, {16, 9, 2}} {
		t.Run(fmt.Sprintf("b%d-w%d-d%d", c.batch, c.width, c.depth), func(t *testing.T) {
			b := mlpStep(uint64(c.batch*c.width), c.batch, c.width, c.depth, 3*c.batch)
			want := reference(t, &b.g, b.args, 3)
			fused, nf := runGraph(t, be, &b.g, b.args, 3, true)
			plain, np := runGraph(t, be, &b.g, b.args, 3, false)
			compare(t, "fused", fused, want, 1e-4)
			compare(t, "unfused", plain, want, 1e-4)
			// Per layer: matmul+bias+ReLU, the backward matmul with its mask,
			// the weight gradient, the bias sum; plus the gathers, the loss,
			// the loss gradient and the optimizer group(s).
			if limit := 4*c.depth + 6; nf > limit || nf >= np {
				t.Errorf("fused step has %d dispatches (unfused %d), want at most %d", nf, np, limit)
			}
			t.Logf("dispatches: fused %d, unfused %d", nf, np)
		})
	}
}

// compiledKernels compiles g and returns the kernels of its dispatches.
func compiledKernels(t *testing.T, be *Backend, g *backend.Graph) []*kernel {
	t.Helper()
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	var ks []*kernel
	for _, st := range p.(*program).steps {
		ks = append(ks, st.k)
	}
	return ks
}

// transposes compiles g and returns how many of its kernels are
// transposing copies, and all their names.
func transposes(t *testing.T, be *Backend, g *backend.Graph) (int, []string) {
	t.Helper()
	var names []string
	for _, k := range compiledKernels(t, be, g) {
		names = append(names, k.name)
	}
	return strings.Count(strings.Join(names, " "), "transpose"), names
}

// TestFusedTransposeFirst runs the fused training step and epilogues that
// read an operand of their matmul under the GPU's plans with every product
// of B stored transposed transposing B first (mmPlan.tB), against the
// reference: an epilogue reading B must read it as stored.
func TestFusedTransposeFirst(t *testing.T) {
	be := openTest(t)
	be.gpuPlans, be.tbRows = true, 1
	defer func() { be.gpuPlans, be.tbRows = false, 0 }()
	b := mlpStep(7, 16, 24, 3, 48)
	want := reference(t, &b.g, b.args, 2)
	got, _ := runGraph(t, be, &b.g, b.args, 2, true)
	compare(t, "mlp step", got, want, 1e-4)
	for _, n := range []int{12, 13} { // vec4 and scalar kernels
		b := newGB(uint64(n))
		x, y := b.rand(-1, 1, n, n), b.rand(-1, 1, n, n)
		s := []int{n, n}
		z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{y, x}, Shape: s, TransB: true})
		b.out(b.op(backend.OpSub, s, z, x)) // reads B
		z2 := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, y}, Shape: s, TransB: true})
		b.out(b.op(backend.OpMul, s, z2, x)) // reads A
		want := reference(t, &b.g, b.args, 1)
		got, _ := runGraph(t, be, &b.g, b.args, 1, true)
		compare(t, fmt.Sprintf("epilogues reading operands, %dx%d", n, n), got, want, 2e-5)
		// The second product transposes B first; the first may not.
		if k, names := transposes(t, be, &b.g); k != 1 {
			t.Errorf("%dx%d: %d transposing copies, want 1 (kernels %v)", n, n, k, names)
		}
	}
}

// TestFusedTN runs the fused training step and epilogues that read an
// operand of their matmul with every product planned as mmTN's where its
// operands may be copied (Backend.tnAll), against the reference: A not
// stored transposed and B stored transposed are copied transposed first
// (mmPlan.tA, tB) unless an epilogue reads them.
func TestFusedTN(t *testing.T) {
	be := openTest(t)
	if !mmTN.fits(*be.info) {
		t.Skipf("SKIPPED: %s has no room for mmTN's tiles (%d invocations, %d bytes of workgroup memory)", be.info.Name, mmTN.threads(), mmTN.sharedBytes())
	}
	be.gpuPlans, be.tnAll = true, true
	defer func() { be.gpuPlans, be.tnAll = false, false }()
	b := mlpStep(9, 16, 24, 3, 48)
	want := reference(t, &b.g, b.args, 2)
	got, _ := runGraph(t, be, &b.g, b.args, 2, true)
	compare(t, "mlp step", got, want, 1e-4)
	// Batched products larger than a tile with partial tiles, each layout
	// copied into TN (vec4 and scalar kernels).
	for _, d := range [][3]int{{260, 136, 200}, {261, 135, 199}} {
		for _, l := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			b := newGB(uint64(d[0]))
			m, k, n := d[0], d[1], d[2]
			sa, sb := []int{2, m, k}, []int{2, k, n}
			if l[0] {
				sa = []int{2, k, m}
			}
			if l[1] {
				sb = []int{2, n, k}
			}
			x, y := b.rand(-1, 1, sa...), b.rand(-1, 1, sb...)
			b.out(b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, y}, Shape: []int{2, m, n}, TransA: l[0], TransB: l[1]}))
			want := reference(t, &b.g, b.args, 1)
			got, _ := runGraph(t, be, &b.g, b.args, 1, true)
			compare(t, fmt.Sprintf("%dx%dx%d transA %v transB %v", m, k, n, l[0], l[1]), got, want, 1e-5*float64(k))
		}
	}
	for _, n := range []int{12, 13} { // vec4 and scalar kernels
		for _, c := range []struct {
			name           string
			transA, transB bool
			readsA         bool // the epilogue reads A, else B
			copies         int  // transposing copies expected
		}{
			{"NN reading A", false, false, true, 0},
			{"NN reading B", false, false, false, 1},
			{"NT reading A", false, true, true, 0},
			{"NT reading B", false, true, false, 0},
			{"TN reading A", true, false, true, 0},
			{"TT reading A", true, true, true, 1},
		} {
			b := newGB(uint64(n))
			x, y := b.rand(-1, 1, n, n), b.rand(-1, 1, n, n)
			s := []int{n, n}
			z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, y}, Shape: s, TransA: c.transA, TransB: c.transB})
			read := y
			if c.readsA {
				read = x
			}
			b.out(b.op(backend.OpMul, s, b.op(backend.OpSub, s, z, read), read))
			want := reference(t, &b.g, b.args, 1)
			got, _ := runGraph(t, be, &b.g, b.args, 1, true)
			what := fmt.Sprintf("%s, %dx%d", c.name, n, n)
			compare(t, what, got, want, 2e-5)
			if k, names := transposes(t, be, &b.g); k != c.copies {
				t.Errorf("%s: %d transposing copies, want %d (kernels %v)", what, k, c.copies, names)
			}
		}
	}
}

// TestFusionPatterns covers each kind of fused kernel against the reference.
func TestFusionPatterns(t *testing.T) {
	be := openTest(t)
	cases := []struct {
		name  string
		build func(b *gb)
		steps int // dispatches when fused
	}{
		{"matmul-epilogue-broadcast", func(b *gb) {
			x, w := b.rand(-1, 1, 2, 12, 8), b.rand(-1, 1, 2, 8, 20)
			col, row := b.rand(-1, 1, 20), b.rand(-1, 1, 2, 12, 1)
			z := b.op(backend.OpMatMul, []int{2, 12, 20}, x, w)
			s := []int{2, 12, 20}
			b.out(b.op(backend.OpTanh, s, b.op(backend.OpMul, s, b.op(backend.OpAdd, s, z, col), row)))
		}, 1},
		{"matmul-epilogue-odd-reads-operand", func(b *gb) {
			x := b.rand(-1, 1, 7, 7)
			z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, x}, Shape: []int{7, 7}, TransB: true})
			b.out(b.op(backend.OpSub, []int{7, 7}, z, x))
		}, 1},
		{"matmul-epilogue-vec-reads-operand", func(b *gb) {
			x := b.rand(-1, 1, 8, 8)
			z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, x}, Shape: []int{8, 8}, TransA: true})
			b.out(b.op(backend.OpMul, []int{8, 8}, z, x))
		}, 1},
		{"gather-sub-square-sum-scale", func(b *gb) {
			t, y := b.rand(-1, 1, 9, 6), b.rand(-1, 1, 5, 6)
			ix := b.arg([]float32{8, 0, 3, 3, -2}, 5)
			s := []int{5, 6}
			d := b.op(backend.OpSub, s, y, b.op(backend.OpGetRows, s, t, ix))
			sq := b.op(backend.OpMul, s, d, d)
			tot := b.node(backend.Node{Op: backend.OpSum, In: []int{b.op(backend.OpReshape, []int{30}, sq)}, Shape: []int{1}, Axis: 0})
			b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{tot}, Shape: []int{1}, A: 0.5, B: 1}))
		}, 1},
		{"col-sum-prologue-epilogue", func(b *gb) {
			x := b.rand(-1, 1, 3, 7, 5)
			e := b.op(backend.OpExp, []int{3, 7, 5}, x)
			s := b.node(backend.Node{Op: backend.OpSum, In: []int{e}, Shape: []int{3, 1, 5}, Axis: 1})
			b.out(b.op(backend.OpLog, []int{3, 1, 5}, s))
		}, 1},
		{"max-of-permute-expand", func(b *gb) {
			x, c := b.rand(-1, 1, 4, 3, 5), b.rand(-1, 1, 3, 1)
			p := b.node(backend.Node{Op: backend.OpPermute, In: []int{x}, Shape: []int{3, 5, 4}, Perm: []int{1, 2, 0}})
			e := b.op(backend.OpExpand, []int{2, 3, 5, 4}, b.op(backend.OpReshape, []int{3, 1, 1}, c))
			s := b.op(backend.OpAdd, []int{2, 3, 5, 4}, e, p)
			b.out(b.node(backend.Node{Op: backend.OpMax, In: []int{s}, Shape: []int{2, 3, 5, 1}, Axis: 3}))
		}, 1},
		{"one-hot-slice-constants", func(b *gb) {
			ix := b.arg([]float32{0, 4, 2, 9, -1, 3}, 6)
			x := b.rand(-1, 1, 6, 5)
			oh := b.node(backend.Node{Op: backend.OpOneHot, In: []int{ix}, Shape: []int{6, 5}})
			half := b.node(backend.Node{Op: backend.OpFill, Shape: []int{5}, A: 0.5})
			sl := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Shape: []int{6, 5}, Start: 0})
			m := b.op(backend.OpMul, []int{6, 5}, oh, b.op(backend.OpAdd, []int{6, 5}, sl, half))
			b.out(m)
			b.out(b.op(backend.OpNeg, []int{6, 5}, b.op(backend.OpSub, []int{6, 5}, m, half)))
		}, 2},
		{"reshape-output-written-direct", func(b *gb) {
			x := b.rand(-1, 1, 6, 4)
			s := b.node(backend.Node{Op: backend.OpSum, In: []int{x}, Shape: []int{1, 4}, Axis: 0})
			b.out(b.op(backend.OpReshape, []int{4}, s))
		}, 1},
		// neg(w) is computed before the update of w and read after it: it
		// must not move into its reader past the update.
		{"no-inlining-across-inplace", func(b *gb) {
			w, g := b.rand(-1, 1, 10), b.rand(-1, 1, 10)
			m, v := b.rand(-0.1, 0.1, 10), b.rand(0, 0.1, 10)
			hp := b.arg([]float32{0.1, 0.9, 0.999, 1e-8, 0, 10, 1000}, 7)
			n := b.op(backend.OpNeg, []int{10}, w)
			b.node(backend.Node{Op: backend.OpAdamW, In: []int{w, g, m, v, hp}, Shape: []int{10}})
			b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{n}, Shape: []int{10}, A: 2}))
		}, 3},
		// The second update writes the arg the first reads as its gradient:
		// they must stay two dispatches in order.
		{"no-group-over-read-then-write", func(b *gb) {
			hp := b.arg([]float32{0.1, 0.9, 0.01}, 3)
			w1, x, v1 := b.rand(-1, 1, 300), b.rand(-1, 1, 300), b.rand(-1, 1, 300)
			g2, v2 := b.rand(-1, 1, 300), b.rand(-1, 1, 300)
			b.node(backend.Node{Op: backend.OpSGD, In: []int{w1, x, v1, hp}, Shape: []int{300}})
			b.node(backend.Node{Op: backend.OpSGD, In: []int{x, g2, v2, hp}, Shape: []int{300}})
		}, 2},
		// Five SGD updates: one dispatch where a kernel may bind 17 storage
		// buffers (P, the hyperparameters, 3 per update), else groups.
		{"sgd-group", func(b *gb) {
			hp := b.arg([]float32{0.1, 0.9, 0.01}, 3)
			for k := range 5 {
				w, g, vel := b.rand(-1, 1, k+3, 2), b.rand(-1, 1, k+3, 2), b.rand(-1, 1, k+3, 2)
				b.node(backend.Node{Op: backend.OpSGD, In: []int{w, g, vel, hp}, Shape: []int{k + 3, 2}})
			}
		}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newGB(uint64(len(c.name)))
			c.build(b)
			if err := b.g.Validate(); err != nil {
				t.Fatal(err)
			}
			want := reference(t, &b.g, b.args, 2)
			got, n := runGraph(t, be, &b.g, b.args, 2, true)
			compare(t, "fused", got, want, 2e-5)
			if c.steps < 0 { // the SGD groups the device's binding limit allows
				per := (int(be.info.MaxStorageBuffers) - 2) / 3
				c.steps = (5 + per - 1) / per
			}
			if n != c.steps {
				t.Errorf("%d dispatches, want %d\n%s", n, c.steps, &b.g)
			}
			if cp := len(b.g.Outputs); c.name == "reshape-output-written-direct" && cp > 0 {
				withFusion(t, be, true)
				p, err := be.Compile(&b.g)
				if err != nil {
					t.Fatal(err)
				}
				if k := len(p.(*program).copies); k != 0 {
					t.Errorf("%d output copies, want the sum written into its output arg", k)
				}
				p.Release()
			}
		})
	}
}

// TestOptimizerGroups checks that AdamW updates are grouped within the
// binding limit and that a run whose args alias falls back to one dispatch
// per update with the same results as the unfused program.
func TestOptimizerGroups(t *testing.T) {
	be := openTest(t)
	b := newGB(5)
	hp := b.arg([]float32{0.01, 0.9, 0.999, 1e-8, 0.01, 10, 1000}, 7)
	const params = 9
	var ws, gs []int
	for k := range params {
		s := []int{5 + k}
		w, g := b.rand(-1, 1, s...), b.rand(-1, 1, s...)
		m, v := b.rand(-0.1, 0.1, s...), b.rand(0, 0.1, s...)
		ws, gs = append(ws, w), append(gs, g)
		b.node(backend.Node{Op: backend.OpAdamW, In: []int{w, g, m, v, hp}, Shape: s})
	}
	want := reference(t, &b.g, b.args, 2)
	got, n := runGraph(t, be, &b.g, b.args, 2, true)
	compare(t, "grouped", got, want, 1e-5)
	per := (int(be.info.MaxStorageBuffers) - 2) / 4
	if wantN := (params + per - 1) / per; n != wantN {
		t.Errorf("%d dispatches for %d AdamW updates with %d storage buffers per kernel, want %d", n, params, be.info.MaxStorageBuffers, wantN)
	}
	// Alias: bind w of the first update as the gradient of the second
	// (same length 5 vs 6: use a buffer long enough for both).
	runAliased := func(fuse bool) [][]float32 {
		withFusion(t, be, fuse)
		p, err := be.Compile(&b.g)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		bufs := make([]backend.Buffer, len(b.args))
		for i, a := range b.args {
			buf, err := be.Alloc(len(a) + 1)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Free(buf)
			be.Write(buf, 0, a)
			bufs[i] = buf
		}
		bufs[b.g.Nodes[gs[1]].Arg] = bufs[b.g.Nodes[ws[0]].Arg]
		if _, err := p.Run(bufs); err != nil {
			t.Fatalf("fusion %t: Run with aliased args: %v", fuse, err)
		}
		out := make([][]float32, len(bufs))
		for i, buf := range bufs {
			out[i] = make([]float32, buf.Len())
			be.Read(buf, 0, out[i])
		}
		return out
	}
	fused, plain := runAliased(true), runAliased(false)
	for i := range fused {
		for j := range fused[i] {
			if fused[i][j] != plain[i][j] {
				t.Fatalf("aliased run: arg %d [%d]: fused %v, unfused %v", i, j, fused[i][j], plain[i][j])
			}
		}
	}
}
