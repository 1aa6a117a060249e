package backendtest

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// tin is one input of a hand-computed case: its shape and data.
type tin struct {
	shape []int
	data  []float64
}

func in(shape []int, data ...float64) tin { return tin{shape, data} }

func sh(d ...int) []int { return d }

// single builds a graph of one OpArg per input and then n over them; the
// value of n is the last node.
func single(n backend.Node, ins ...tin) (*backend.Graph, [][]float64) {
	g := &backend.Graph{NumArgs: len(ins)}
	args := make([][]float64, len(ins))
	for i, x := range ins {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpArg, Arg: i, Shape: x.shape})
		args[i] = append([]float64(nil), x.data...)
		if n.In == nil || len(n.In) < len(ins) {
			n.In = append(n.In, i)
		}
	}
	g.Nodes = append(g.Nodes, n)
	return g, args
}

func node(op backend.Op, shape []int) backend.Node { return backend.Node{Op: op, Shape: shape} }

// near compares within 1e-12 relative, NaN matching NaN and infinities
// exactly.
func near(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) != math.IsNaN(g) {
				return false
			}
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if g != w {
				return false
			}
		case math.Abs(g-w) > 1e-12*(1+math.Abs(w)):
			return false
		}
	}
	return true
}

// TestEvalSpecials checks rows of the table of special values of
// backend.Op, computed by hand from IEEE, C's pow and PyTorch.
func TestEvalSpecials(t *testing.T) {
	nan, inf, negz := math.NaN(), math.Inf(1), math.Copysign(0, -1)
	with := func(n backend.Node, a, b float32) backend.Node { n.A, n.B = a, b; return n }
	axis1 := func(n backend.Node) backend.Node { n.Axis = 1; return n }
	x := []float64{nan, inf, -inf, negz, 0, -2, 4}
	cases := []struct {
		name string
		n    backend.Node
		ins  []tin
		want []float64
	}{
		{"exp", node(backend.OpExp, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, inf, 0, 1, 1, math.Exp(-2), math.Exp(4)}},
		{"log", node(backend.OpLog, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, inf, nan, -inf, -inf, nan, math.Log(4)}},
		{"sqrt", node(backend.OpSqrt, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, inf, nan, 0, 0, nan, 2}},
		{"relu", node(backend.OpReLU, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, inf, 0, 0, 0, 0, 4}},
		{"sigmoid", node(backend.OpSigmoid, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, 1, 0, 0.5, 0.5, 1 / (1 + math.Exp(2)), 1 / (1 + math.Exp(-4))}},
		{"tanh", node(backend.OpTanh, sh(7)), []tin{in(sh(7), x...)}, []float64{nan, 1, -1, 0, 0, math.Tanh(-2), math.Tanh(4)}},
		{"clamp", with(node(backend.OpClamp, sh(7)), -1, 2), []tin{in(sh(7), x...)}, []float64{nan, 2, -1, 0, 0, -1, 2}},
		{"inside", with(node(backend.OpInside, sh(7)), -inf32, inf32), []tin{in(sh(7), x...)}, []float64{0, 0, 0, 1, 1, 1, 1}},
		{"pow/0", with(node(backend.OpPowConst, sh(7)), 0, 0), []tin{in(sh(7), x...)}, []float64{1, 1, 1, 1, 1, 1, 1}},
		{"pow/0.5", with(node(backend.OpPowConst, sh(7)), 0.5, 0), []tin{in(sh(7), x...)}, []float64{nan, inf, nan, 0, 0, nan, 2}},
		{"pow/-0.5", with(node(backend.OpPowConst, sh(7)), -0.5, 0), []tin{in(sh(7), x...)}, []float64{nan, 0, nan, inf, inf, nan, 0.5}},
		{"pow/-3", with(node(backend.OpPowConst, sh(7)), -3, 0), []tin{in(sh(7), x...)}, []float64{nan, 0, 0, -inf, inf, -0.125, 1.0 / 64}},
		{"pow/2", with(node(backend.OpPowConst, sh(7)), 2, 0), []tin{in(sh(7), x...)}, []float64{nan, inf, inf, 0, 0, 4, 16}},
		{"max/nan-after-inf", axis1(node(backend.OpMax, sh(1, 1))), []tin{in(sh(1, 3), inf, nan, 1)}, []float64{nan}},
		{"max/-inf", node(backend.OpMax, sh(1, 2)), []tin{in(sh(2, 2), -inf, 1, -inf, nan)}, []float64{-inf, nan}},
		{"sum/inf-inf", node(backend.OpSum, sh(1, 2)), []tin{in(sh(2, 2), inf, inf, -inf, 1)}, []float64{nan, inf}},
		{"softmax/inf-row", node(backend.OpSoftmax, sh(3, 2)), []tin{in(sh(3, 2), inf, 1, -inf, 0, -inf, -inf)}, []float64{nan, nan, 0, 1, nan, nan}},
		{"log_softmax/-inf", node(backend.OpLogSoftmax, sh(1, 2)), []tin{in(sh(1, 2), -inf, 0)}, []float64{-inf, 0}},
		{"matmul/inf-times-0", node(backend.OpMatMul, sh(2, 1)), []tin{in(sh(2, 2), inf, 1, 2, 3), in(sh(2, 1), 0, 1)}, []float64{nan, 3}},
		{"get_rows/nan-index", node(backend.OpGetRows, sh(3)), []tin{in(sh(3), 10, 11, 12), in(sh(3), nan, inf, -inf)}, []float64{10, 12, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, args := single(c.n, c.ins...)
			vals, err := Eval(g, args)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got := vals[len(vals)-1]; !near(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestEvalOps checks the reference on small cases computed by hand, at
// least one per op.
func TestEvalOps(t *testing.T) {
	ln2, ln3, e := math.Log(2), math.Log(3), math.E
	with := func(n backend.Node, f func(*backend.Node)) backend.Node { f(&n); return n }
	cases := []struct {
		name string
		n    backend.Node
		ins  []tin
		want []float64
	}{
		{"add/broadcast", node(backend.OpAdd, sh(2, 3)), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6), in(sh(3), 10, 20, 30)}, []float64{11, 22, 33, 14, 25, 36}},
		{"add/left-broadcast", node(backend.OpAdd, sh(2, 2)), []tin{in(sh(2, 1), 1, 2), in(sh(2, 2), 10, 20, 30, 40)}, []float64{11, 21, 32, 42}},
		{"sub/row-col", node(backend.OpSub, sh(2, 3)), []tin{in(sh(2, 1), 1, 2), in(sh(1, 3), 1, 2, 3)}, []float64{0, -1, -2, 1, 0, -1}},
		{"mul/scalar", node(backend.OpMul, sh(2)), []tin{in(nil, 2), in(sh(2), 3, -4)}, []float64{6, -8}},
		{"div", node(backend.OpDiv, sh(2)), []tin{in(sh(2), 1, 3), in(sh(2), 4, -2)}, []float64{0.25, -1.5}},
		{"neg", node(backend.OpNeg, sh(2)), []tin{in(sh(2), 1, -2)}, []float64{-1, 2}},
		{"exp", node(backend.OpExp, sh(2)), []tin{in(sh(2), 0, 1)}, []float64{1, e}},
		{"log", node(backend.OpLog, sh(2)), []tin{in(sh(2), 1, e)}, []float64{0, 1}},
		{"sqrt", node(backend.OpSqrt, sh(2)), []tin{in(sh(2), 4, 2.25)}, []float64{2, 1.5}},
		{"relu", node(backend.OpReLU, sh(3)), []tin{in(sh(3), -1, 0, 2)}, []float64{0, 0, 2}},
		{"sigmoid", node(backend.OpSigmoid, sh(2)), []tin{in(sh(2), 0, ln3)}, []float64{0.5, 0.75}},
		{"tanh", node(backend.OpTanh, sh(2)), []tin{in(sh(2), 0, ln2)}, []float64{0, 0.6}},
		{"affine", with(node(backend.OpAffine, sh(2)), func(n *backend.Node) { n.A, n.B = 2, 1 }), []tin{in(sh(2), 1, -3)}, []float64{3, -5}},
		{"pow/3", with(node(backend.OpPowConst, sh(2)), func(n *backend.Node) { n.A = 3 }), []tin{in(sh(2), 2, -1)}, []float64{8, -1}},
		{"pow/0.5-negative", with(node(backend.OpPowConst, sh(2)), func(n *backend.Node) { n.A = 0.5 }), []tin{in(sh(2), -4, 9)}, []float64{math.NaN(), 3}},
		{"clamp", with(node(backend.OpClamp, sh(3)), func(n *backend.Node) { n.A, n.B = -1, 2 }), []tin{in(sh(3), -3, 0.5, 5)}, []float64{-1, 0.5, 2}},
		{"inside", with(node(backend.OpInside, sh(4)), func(n *backend.Node) { n.A, n.B = -1, 2 }), []tin{in(sh(4), -1, 0, 2, 3)}, []float64{0, 1, 0, 0}},
		{"fill", with(node(backend.OpFill, sh(2)), func(n *backend.Node) { n.A = 1.5 }), nil, []float64{1.5, 1.5}},
		{"sum/axis0", node(backend.OpSum, sh(1, 3)), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6)}, []float64{5, 7, 9}},
		{"sum/axis1", with(node(backend.OpSum, sh(2, 1)), func(n *backend.Node) { n.Axis = 1 }), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6)}, []float64{6, 15}},
		{"sum/middle", with(node(backend.OpSum, sh(2, 1, 2)), func(n *backend.Node) { n.Axis = 1 }), []tin{in(sh(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)}, []float64{4, 6, 12, 14}},
		{"max/axis1", with(node(backend.OpMax, sh(2, 1)), func(n *backend.Node) { n.Axis = 1 }), []tin{in(sh(2, 3), 1, 5, 2, -4, -1, -7)}, []float64{5, -1}},
		{"max/axis0", node(backend.OpMax, sh(1, 3)), []tin{in(sh(2, 3), 1, 5, 2, -4, -1, -7)}, []float64{1, 5, 2}},
		{"softmax", node(backend.OpSoftmax, sh(2, 2)), []tin{in(sh(2, 2), 0, ln3, 1000, 1000+ln3)}, []float64{0.25, 0.75, 0.25, 0.75}},
		{"softmax/scalar", node(backend.OpSoftmax, nil), []tin{in(nil, 42)}, []float64{1}},
		{"log_softmax", node(backend.OpLogSoftmax, sh(1, 2)), []tin{in(sh(1, 2), -5000, -5000+ln3)}, []float64{math.Log(0.25), math.Log(0.75)}},
		{"reshape", node(backend.OpReshape, sh(3, 2)), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6)}, []float64{1, 2, 3, 4, 5, 6}},
		{"permute/2d", with(node(backend.OpPermute, sh(3, 2)), func(n *backend.Node) { n.Perm = []int{1, 0} }), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6)}, []float64{1, 4, 2, 5, 3, 6}},
		// out[c][a][0] = in[a][0][c]
		{"permute/3d", with(node(backend.OpPermute, sh(3, 2, 1)), func(n *backend.Node) { n.Perm = []int{2, 0, 1} }), []tin{in(sh(2, 1, 3), 1, 2, 3, 4, 5, 6)}, []float64{1, 4, 2, 5, 3, 6}},
		// out[a][c][0] = in[a][0][c]: a move of a size-1 axis keeps the order.
		{"permute/3d-inner", with(node(backend.OpPermute, sh(2, 3, 1)), func(n *backend.Node) { n.Perm = []int{0, 2, 1} }), []tin{in(sh(2, 1, 3), 1, 2, 3, 4, 5, 6)}, []float64{1, 2, 3, 4, 5, 6}},
		{"permute/3d-swap", with(node(backend.OpPermute, sh(3, 2, 2)), func(n *backend.Node) { n.Perm = []int{2, 1, 0} }), []tin{in(sh(2, 2, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)}, []float64{1, 7, 4, 10, 2, 8, 5, 11, 3, 9, 6, 12}},
		{"expand", node(backend.OpExpand, sh(2, 3, 2)), []tin{in(sh(3, 1), 1, 2, 3)}, []float64{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}},
		{"expand/scalar", node(backend.OpExpand, sh(3)), []tin{in(nil, 7)}, []float64{7, 7, 7}},
		{"slice_rows", with(node(backend.OpSliceRows, sh(2, 2)), func(n *backend.Node) { n.Start = 1 }), []tin{in(sh(3, 2), 1, 2, 3, 4, 5, 6)}, []float64{3, 4, 5, 6}},
		{"concat_rows", node(backend.OpConcatRows, sh(3, 2)), []tin{in(sh(1, 2), 1, 2), in(sh(2, 2), 3, 4, 5, 6)}, []float64{1, 2, 3, 4, 5, 6}},
		{"get_rows/clamp", node(backend.OpGetRows, sh(5, 2)), []tin{in(sh(3, 2), 1, 2, 3, 4, 5, 6), in(sh(5), 2, -5, 7, 0, 1)}, []float64{5, 6, 1, 2, 5, 6, 1, 2, 3, 4}},
		{"get_rows/1d", node(backend.OpGetRows, sh(3)), []tin{in(sh(4), 10, 11, 12, 13), in(sh(3), 3, 3, 1)}, []float64{13, 13, 11}},
		{"scatter_add_rows", node(backend.OpScatterAddRows, sh(3, 2)), []tin{in(sh(4, 2), 1, 2, 3, 4, 5, 6, 7, 8), in(sh(4), 1, 1, -3, 9)}, []float64{5, 6, 4, 6, 7, 8}},
		{"one_hot", node(backend.OpOneHot, sh(4, 3)), []tin{in(sh(4), 0, 2, 5, -1)}, []float64{1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0}},
		{"matmul", node(backend.OpMatMul, sh(2, 2)), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6), in(sh(3, 2), 7, 8, 9, 10, 11, 12)}, []float64{58, 64, 139, 154}},
		{"matmul/transA", with(node(backend.OpMatMul, sh(2, 2)), func(n *backend.Node) { n.TransA = true }), []tin{in(sh(3, 2), 1, 4, 2, 5, 3, 6), in(sh(3, 2), 7, 8, 9, 10, 11, 12)}, []float64{58, 64, 139, 154}},
		{"matmul/transB", with(node(backend.OpMatMul, sh(2, 2)), func(n *backend.Node) { n.TransB = true }), []tin{in(sh(2, 3), 1, 2, 3, 4, 5, 6), in(sh(2, 3), 7, 9, 11, 8, 10, 12)}, []float64{58, 64, 139, 154}},
		{"matmul/transAB", with(node(backend.OpMatMul, sh(2, 2)), func(n *backend.Node) { n.TransA, n.TransB = true, true }), []tin{in(sh(3, 2), 1, 4, 2, 5, 3, 6), in(sh(2, 3), 7, 9, 11, 8, 10, 12)}, []float64{58, 64, 139, 154}},
		{"matmul/batched", node(backend.OpMatMul, sh(2, 1, 1)), []tin{in(sh(2, 1, 2), 1, 2, 5, 6), in(sh(2, 2, 1), 3, 4, 7, 8)}, []float64{11, 83}},
		{"matmul/K1", node(backend.OpMatMul, sh(2, 3)), []tin{in(sh(2, 1), 2, 3), in(sh(1, 3), 1, 10, 100)}, []float64{2, 20, 200, 3, 30, 300}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, args := single(c.n, c.ins...)
			vals, err := Eval(g, args)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got := vals[len(vals)-1]; !near(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestEvalOptimizers checks AdamW and SGD update their args in place.
func TestEvalOptimizers(t *testing.T) {
	// AdamW, lr .1, b1 .9, b2 .999, eps 0, wd .1, t=1 (bc1 10, bc2 1000), g .5:
	// m = .05, v = .00025, w = 1*(1-.01) - .1*(.05*10)/sqrt(.00025*1000) = .89.
	g, args := single(node(backend.OpAdamW, sh(1)), in(sh(1), 1), in(sh(1), 0.5), in(sh(1), 0), in(sh(1), 0),
		in(sh(7), 0.1, 0.9, 0.999, 0, 0.1, 10, 1000))
	vals, err := Eval(g, args)
	if err != nil {
		t.Fatalf("Eval(adamw): %v", err)
	}
	if !near(args[0], []float64{0.89}) || !near(args[2], []float64{0.05}) || !near(args[3], []float64{0.00025}) || !near(vals[5], []float64{0.89}) {
		t.Fatalf("adamw: w %v m %v v %v value %v; want .89 .05 .00025 .89", args[0], args[2], args[3], vals[5])
	}
	// SGD, lr .1, momentum .9, wd .5, w 2, g 1, vel .5: vel = .45 + 1 + 1 = 2.45, w = 2 - .245.
	g, args = single(node(backend.OpSGD, sh(1)), in(sh(1), 2), in(sh(1), 1), in(sh(1), 0.5), in(sh(3), 0.1, 0.9, 0.5))
	vals, err = Eval(g, args)
	if err != nil {
		t.Fatalf("Eval(sgd): %v", err)
	}
	if !near(args[0], []float64{1.755}) || !near(args[2], []float64{2.45}) || !near(vals[4], []float64{1.755}) {
		t.Fatalf("sgd: w %v vel %v value %v; want 1.755 2.45 1.755", args[0], args[2], vals[4])
	}
}

// TestEvalGraph checks the run-level semantics: outputs land in args (only
// their prefix), a read of an arg after an in-place update sees the new
// value, and bad input is an error.
func TestEvalGraph(t *testing.T) {
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: sh(1)},       // 0: w
		{Op: backend.OpArg, Arg: 1, Shape: sh(3)},       // 1: sgd hp
		{Op: backend.OpNeg, In: []int{0}, Shape: sh(1)}, // 2: -w before the update
		{Op: backend.OpFill, Shape: sh(1), A: 1},        // 3: gradient 1
		{Op: backend.OpArg, Arg: 2, Shape: sh(1)},       // 4: velocity
		{Op: backend.OpSGD, In: []int{0, 3, 4, 1}, Shape: sh(1)},
		{Op: backend.OpNeg, In: []int{0}, Shape: sh(1)}, // 6: -w after the update
		{Op: backend.OpConcatRows, In: []int{2, 6}, Shape: sh(2)},
	}, Outputs: []backend.Output{{Node: 7, Arg: 2}}}
	// The output overwrites the velocity arg after the run: [-w0, -w1, untouched].
	args := [][]float64{{3}, {0.5, 0, 0}, {0, 99, 99}}
	if _, err := Eval(g, args); err != nil {
		t.Fatalf("Eval: %v", err)
	}
	// w1 = 3 - .5*(0 + 1) = 2.5
	if !near(args[0], []float64{2.5}) || !near(args[2], []float64{-3, -2.5, 99}) {
		t.Fatalf("args after run: %v, want w [2.5] and output [-3 -2.5 99]", args)
	}
	for name, bad := range map[string]struct {
		g    *backend.Graph
		args [][]float64
		msg  string
	}{
		"invalid":      {&backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 3, Shape: sh(1)}}}, [][]float64{{1}}, "arg 3 of 1"},
		"args count":   {&backend.Graph{NumArgs: 2}, [][]float64{{1}}, "1 args"},
		"arg short":    {&backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpArg, Shape: sh(4)}}}, [][]float64{{1, 2}}, "holds 2"},
		"output short": {&backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpFill, Shape: sh(4)}}, Outputs: []backend.Output{{Node: 0, Arg: 0}}}, [][]float64{{1}}, "holds 1"},
	} {
		_, err := Eval(bad.g, bad.args)
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: Eval error %v, want one containing %q", name, err, bad.msg)
		}
	}
}

// TestCompare checks the checker itself: it passes within the bound, fails
// past it, names the worst element, and treats NaN and Inf as values.
func TestCompare(t *testing.T) {
	tol := Tol{Abs: 1e-6, Rel: 1e-6}
	if msg := compare([]float32{1, 2}, []float64{1, 2.0000001}, nil, tol, 0, sh(2)); msg != "" {
		t.Errorf("within tolerance: %s", msg)
	}
	msg := compare([]float32{1, 2, 3, 4}, []float64{1, 2.001, 3, 4.1}, nil, tol, 0, sh(2, 2))
	if !strings.Contains(msg, "2 of 4") || !strings.Contains(msg, "worst element 3 [1 1]") {
		t.Errorf("past tolerance: %q, want 2 of 4 bad and worst element 3 [1 1]", msg)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	if msg := compare([]float32{nan, inf}, []float64{math.NaN(), math.Inf(1)}, nil, tol, 0, sh(2)); msg != "" {
		t.Errorf("NaN and Inf matching: %s", msg)
	}
	if msg := compare([]float32{nan}, []float64{1}, nil, tol, 0, sh(1)); msg == "" {
		t.Error("NaN accepted for 1")
	}
	if msg := compare([]float32{1}, []float64{math.NaN()}, nil, tol, 0, sh(1)); msg == "" {
		t.Error("1 accepted for NaN")
	}
	if msg := compare([]float32{-inf}, []float64{math.Inf(1)}, nil, tol, 0, sh(1)); msg == "" {
		t.Error("-Inf accepted for +Inf")
	}
	if msg := compare([]float32{3e38}, []float64{math.Inf(1)}, nil, tol, 0, sh(1)); msg == "" {
		t.Error("3e38 accepted for +Inf")
	}
	// A float64 result past the f32 range is the f32 infinity; a subnormal
	// one may come back flushed to zero (or as another subnormal).
	if msg := compare([]float32{inf, 0, 1e-45}, []float64{1e39, 1e-40, 2e-45}, nil, Tol{}, 0, sh(3)); msg != "" {
		t.Errorf("overflow and subnormals: %s", msg)
	}
	if msg := compare([]float32{0}, []float64{2e-38}, nil, Tol{}, 0, sh(1)); msg == "" {
		t.Error("0 accepted for the normal 2e-38")
	}
	if msg := compare([]float32{1}, []float64{0}, nil, Tol{}, 0, sh(1)); msg == "" {
		t.Error("exact tolerance accepted 1 for 0")
	}
	// Terms: the bound follows the terms' magnitude (10) times sqrt(4).
	terms := Tol{Rel: 1e-3, Terms: true}
	if msg := compare([]float32{0.01}, []float64{0}, []float64{10}, terms, 4, sh(1)); msg != "" {
		t.Errorf("terms bound 0.02: %s", msg)
	}
	if msg := compare([]float32{0.03}, []float64{0}, []float64{10}, terms, 4, sh(1)); msg == "" {
		t.Error("terms bound 0.02 accepted 0.03")
	}
}

// TestCasesValid checks every graph the suite draws passes Validate and that
// Eval runs on it, so a failure in a backend is never the suite's own.
func TestCasesValid(t *testing.T) {
	for _, c := range opCases() {
		if _, ok := tolerances[c.tol]; !ok {
			t.Errorf("%s: tolerance %q missing", c.name, c.tol)
		}
		ins := c.build(seeded(c.name))
		if len(ins) == 0 {
			t.Errorf("%s: no instances", c.name)
		}
		for i, in := range ins {
			if err := in.g.Validate(); err != nil {
				t.Errorf("%s #%d: %v", c.name, i, err)
			}
			if len(in.args) != in.g.NumArgs {
				t.Errorf("%s #%d: %d args for %d", c.name, i, len(in.args), in.g.NumArgs)
			}
		}
	}
}

// Packed words match bit for bit but for the payload of a NaN half of the
// same sign (NVIDIA's f16 NaN is 0x7fff, the reference's 0x7e00).
func TestSameWord(t *testing.T) {
	f16, bf16 := Tol{Bits: true, Half: 1}, Tol{Bits: true, Half: 2}
	unpacked := tolerances["unpacked"]
	for _, c := range []struct {
		tol  Tol
		a, b uint32
		want bool
	}{
		{f16, 0x56407fff, 0x56407e00, true},
		{f16, 0x7fff3c00, 0x7e003c00, true},
		{f16, 0x56407fff, 0x56417e00, false}, // the other half differs
		{f16, 0x0000fe00, 0x00007e00, false}, // the NaN's sign
		{f16, 0x00007c00, 0x00007e00, false}, // Inf is not a NaN
		{f16, 0x00000001, 0x00000000, false}, // a subnormal word is not a zero
		{bf16, 0x7fc17f81, 0x7fc07fc0, true},
		{bf16, 0x00007f80, 0x00007fc0, false},
		{Tol{Bits: true}, 0x7fff, 0x7e00, false},
		// unpacked values: any f32 NaN, else every bit
		{unpacked, 0x7fc00000, 0x7fffe000, true},
		{unpacked, 0xffc00000, 0xff800001, true},
		{unpacked, 0xffc00000, 0x7fffffff, true},  // NVIDIA's NaN for -NaN
		{unpacked, 0x7f800000, 0x7fc00000, false}, // Inf is not a NaN
		{unpacked, 0x80000000, 0x00000000, false}, // -0 is not +0
		{unpacked, 0x00000001, 0x00000000, false}, // a subnormal is not flushed
	} {
		if got := c.tol.sameWord(c.a, c.b); got != c.want {
			t.Errorf("%+v: sameWord(%08x, %08x) = %t, want %t", c.tol, c.a, c.b, got, c.want)
		}
	}
}
