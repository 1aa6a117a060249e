package core

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestGradValues: Grad of sum(x^3) is 3x^2, and with CreateGraph the
// gradient of its sum is 6x; no leaf's Grad changes.
func TestGradValues(t *testing.T) {
	dev := open(t)
	xs := []float32{-1.5, -0.5, 0.25, 2}
	x := dev.Param(xs, 4)
	y := Sum(Mul(Mul(x, x), x))
	g, err := Grad(y, []*Tensor{x}, &GradOptions{CreateGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	gg, err := Grad(Sum(g[0]), []*Tensor{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gv, err := g[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	ggv, err := gg[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range xs {
		if math.Abs(float64(gv[i]-3*v*v)) > 1e-5 || math.Abs(float64(ggv[i]-6*v)) > 1e-5 {
			t.Errorf("x = %g: gradient %g, second %g; want %g, %g", v, gv[i], ggv[i], 3*v*v, 6*v)
		}
	}
	if x.Grad() != nil {
		t.Errorf("Grad left a gradient on the leaf: %v", x.Grad())
	}
	if g[0].requiresGrad == false || gg[0].requiresGrad {
		t.Errorf("requiresGrad: with CreateGraph %v (want true), without %v (want false)", g[0].requiresGrad, gg[0].requiresGrad)
	}
}

// TestGradIntermediate: the gradient with respect to a value computed
// from a parameter, and to the parameter through it and directly.
func TestGradIntermediate(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{0.5, -2}, 2)
	h := Scale(x, 3)
	y := Sum(Add(Mul(h, h), x)) // dy/dh = 2h, dy/dx = 18x + 1
	g, err := Grad(y, []*Tensor{h, x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := g[0].Data()
	gx, _ := g[1].Data()
	if !near(gh, []float32{3, -12}, 1e-6) || !near(gx, []float32{10, -35}, 1e-6) {
		t.Errorf("dy/dh = %v (want [3 -12]), dy/dx = %v (want [10 -35])", gh, gx)
	}
}

// TestGradRetain: without RetainGraph a Grad differentiates the nodes as
// Backward does; with it (or CreateGraph) Backward can follow.
func TestGradRetain(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1, 2}, 2)
	y := Sum(Tanh(x))
	if _, err := Grad(y, []*Tensor{x}, nil); err != nil {
		t.Fatal(err)
	}
	if err := y.Backward(); err == nil || !strings.Contains(err.Error(), "already differentiated") {
		t.Errorf("Backward after Grad: err = %v, want already differentiated", err)
	}
	y = Sum(Tanh(x))
	g, err := Grad(y, []*Tensor{x}, &GradOptions{RetainGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Backward(); err != nil {
		t.Fatalf("Backward after Grad with RetainGraph: %v", err)
	}
	gv, err := g[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	bv, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	if !near(gv, bv, 0) {
		t.Errorf("Grad %v, Backward %v: want equal", gv, bv)
	}
}

func TestGradErrors(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1, 2}, 2)
	c := dev.Tensor([]float32{3, 4}, 2)
	z := dev.Param([]float32{5}, 1)
	for _, tc := range []struct {
		name string
		y    *Tensor
		xs   []*Tensor
		opt  *GradOptions
		want string
	}{
		{"nil output", nil, []*Tensor{x}, nil, "core.Grad: nil output"},
		{"vector", Mul(x, x), []*Tensor{x}, nil, "core.Grad: output of shape [2]: want one element"},
		{"no inputs", Sum(x), nil, nil, "core.Grad: no inputs"},
		{"nil input", Sum(x), []*Tensor{x, nil}, nil, "core.Grad: input 1 is nil"},
		{"constant input", Sum(Mul(x, c)), []*Tensor{c}, nil, "core.Grad: input 0 ("},
		{"constant output", Sum(c), []*Tensor{x}, nil, "does not depend on any tensor that requires grad"},
		{"unrelated", Sum(x), []*Tensor{x, z}, nil, "core.Grad: output"},
	} {
		_, err := Grad(tc.y, tc.xs, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err := Grad(Sum(Mul(x, c)), []*Tensor{c}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not require grad") {
		t.Errorf("constant input: err = %v", err)
	}
	_, err = Grad(Sum(x), []*Tensor{x, z}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not depend on input 1") {
		t.Errorf("unrelated input: err = %v", err)
	}
	dev.NoGrad(func() {
		_, err = Grad(Sum(Mul(x, x)), []*Tensor{x}, &GradOptions{CreateGraph: true})
	})
	if err == nil || !strings.Contains(err.Error(), "core.Grad: CreateGraph inside NoGrad") {
		t.Errorf("CreateGraph inside NoGrad: err = %v", err)
	}
	y := Checkpoint(Tanh, x)
	_, err = Grad(Sum(y), []*Tensor{x}, &GradOptions{CreateGraph: true})
	if err == nil || !strings.Contains(err.Error(), "core.Grad: CreateGraph through the Checkpoint segment") {
		t.Errorf("CreateGraph through Checkpoint: err = %v", err)
	}
}

// TestGradGradcheck: second derivatives of core's ops against finite
// differences of their gradients, on cpu (nn's TestGradGradDevice runs
// the layers' ops on every device).
func TestGradGradcheck(t *testing.T) {
	dev := open(t)
	xs := []float32{-1.2, -0.3, 0.4, 0.9, 1.7, -0.8}
	for _, tc := range []struct {
		name string
		f    func(x *Tensor) *Tensor
	}{
		{"Tanh", Tanh}, {"Sigmoid", Sigmoid}, {"Exp", Exp}, {"Sin", Sin}, {"Cos", Cos},
		{"Log", func(x *Tensor) *Tensor { return Log(AddScalar(Mul(x, x), 1)) }},
		{"Sqrt", func(x *Tensor) *Tensor { return Sqrt(AddScalar(Mul(x, x), 0.5)) }},
		{"Div", func(x *Tensor) *Tensor { return Div(x, AddScalar(Mul(x, x), 1)) }},
		{"Pow", func(x *Tensor) *Tensor { return Pow(AddScalar(Mul(x, x), 1), 1.5) }},
		{"Softmax", Softmax}, {"LogSoftmax", LogSoftmax},
		{"GELU", GELU}, {"GELUErf", GELUErf}, {"Softplus", Softplus}, {"SiLU", SiLU}, {"ELU", func(x *Tensor) *Tensor { return ELU(x, 1.3) }},
		{"LayerNorm", func(x *Tensor) *Tensor { return LayerNorm(x, 1e-5) }},
		{"RMSNorm", func(x *Tensor) *Tensor { return RMSNorm(x, 1e-5) }},
		{"BatchNorm", func(x *Tensor) *Tensor { return BatchNorm(Reshape(x, 3, 2), 1e-5) }}, // N = 2 would be ±1
		{"MaskedSoftmax", func(x *Tensor) *Tensor { return MaskedSoftmax(x, Scale(x, 0.5), 0.7) }},
		{"CrossEntropy", func(x *Tensor) *Tensor { return CrossEntropy(Mul(x, x), x.dev.Tensor([]float32{2, 0}, 2)) }},
		{"MatMul", func(x *Tensor) *Tensor { return MatMulT(x, Tanh(x), false, true) }},
		{"linear", func(x *Tensor) *Tensor { return linear(x, Tanh(Transpose(x)), false) }},
		{"ReLU", func(x *Tensor) *Tensor { return Mul(ReLU(x), x) }},
		{"Abs", func(x *Tensor) *Tensor { return Mul(Abs(x), x) }},
		{"Clamp", func(x *Tensor) *Tensor { return Mul(Clamp(x, -1, 1), x) }},
		{"Attention", func(x *Tensor) *Tensor {
			q := Reshape(x, 1, 2, 3)
			return Attention(q, Tanh(q), Mul(q, q), &AttentionOptions{Causal: true})
		}},
		{"SumSquares", func(x *Tensor) *Tensor { return Mul(SumSquares(x), x) }},
	} {
		x := dev.Param(xs, 2, 3)
		f := func() *Tensor { return weighted(tc.f(x), 3) }
		if err := GradGradcheck(f, []*Tensor{x}, &GradcheckOptions{Tol: 5e-3}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestGradGradClamp: Clamp's gradient at x = 0 has no second derivative
// of its own (its NaN term once gave one).
func TestGradGradClamp(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{0, 0.5, -2}, 3)
	f := func() *Tensor { return weighted(Mul(Clamp(x, -1, 1), AddScalar(x, 1)), 2) }
	if err := GradGradcheck(f, []*Tensor{x}, nil); err != nil {
		t.Error(err)
	}
}

// A test that can fail: a gradient recorded without gradients of its own
// (detached) has the wrong second derivative.
func TestGradGradcheckFails(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{0.5, -1, 2}, 3)
	sq := func(in *Tensor) *Tensor {
		return Custom("square", func(in []*Tensor) *Tensor { return Mul(in[0], in[0]) },
			func(in []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{Mul(g, Scale(detach("test", in[0]), 2))} }, in)
	}
	err := GradGradcheck(func() *Tensor { return weighted(Mul(sq(x), x), 1) }, []*Tensor{x}, nil)
	if err == nil || !strings.Contains(err.Error(), "core.GradGradcheck: core.Gradcheck: ") {
		t.Errorf("a detached gradient: err = %v, want mismatches", err)
	}
	// the same backward with its factor attached: a Custom's backward is
	// recorded with gradients under CreateGraph
	good := func(in *Tensor) *Tensor {
		return Custom("square", func(in []*Tensor) *Tensor { return Mul(in[0], in[0]) },
			func(in []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{Mul(g, Scale(in[0], 2))} }, in)
	}
	if err := GradGradcheck(func() *Tensor { return weighted(Mul(good(x), x), 1) }, []*Tensor{x}, nil); err != nil {
		t.Errorf("a Custom's differentiable backward: %v", err)
	}
}

// A gradient penalty, as WGAN-GP's: the loss adds (||dD/dx|| - 1)^2, and
// Backward trains the critic's weight through the gradient.
func ExampleGrad() {
	dev, _ := Open("cpu")
	defer dev.Close()
	w := dev.Param([]float32{0.5, -1, 2}, 3)    // the critic's weight
	x := dev.Param([]float32{1, 0.5, -0.25}, 3) // a point it is penalized at
	critic := Sum(Tanh(Mul(w, x)))
	g, err := Grad(critic, []*Tensor{x}, &GradOptions{CreateGraph: true})
	if err != nil {
		panic(err)
	}
	norm := Sqrt(SumSquares(g[0]))
	penalty := Pow(AddScalar(norm, -1), 2)
	loss := Add(critic, Scale(penalty, 10))
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	gw, _ := w.Grad().Data()
	fmt.Printf("%.4f\n", gw) // PyTorch 1.13: [2.2671, -2.5680, 5.7258]
	// Output: [2.2671 -2.5680 5.7258]
}

// TestWithGrad: a WithGrad view of data is an input Grad accepts, lazily
// and eagerly (where its graph is gone once it ran), and Backward leaves
// it and its data alone.
func TestWithGrad(t *testing.T) {
	for _, eager := range []bool{false, true} {
		dev := open(t)
		dev.SetEager(eager)
		w := dev.Param([]float32{2, -1}, 2)
		x := dev.Tensor([]float32{0.5, 3}, 2).WithGrad()
		y := Sum(Mul(Mul(x, x), w)) // dy/dx = 2xw
		g, err := Grad(y, []*Tensor{x}, &GradOptions{CreateGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := Sum(g[0]).Backward(); err != nil { // d/dw sum(2xw) = 2x
			t.Fatal(err)
		}
		gv, err := g[0].Data()
		if err != nil {
			t.Fatal(err)
		}
		wv, err := w.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		if !near(gv, []float32{2, -6}, 1e-6) || !near(wv, []float32{1, 6}, 1e-6) || x.Grad() != nil {
			t.Errorf("eager %v: dy/dx = %v (want [2 -6]), w's gradient %v (want [1 6]), x's %v (want none)", eager, gv, wv, x.Grad())
		}
	}
	dev := open(t)
	var v *Tensor
	dev.NoGrad(func() { v = dev.Tensor([]float32{1}, 1).WithGrad() })
	if _, err := Grad(Sum(v), []*Tensor{v}, nil); err == nil || !strings.Contains(err.Error(), "does not require grad") {
		t.Errorf("WithGrad inside NoGrad: err = %v, want does not require grad", err)
	}
}

// The gradient of a function of data with respect to the data, as a
// gradient penalty takes it.
func ExampleTensor_WithGrad() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{0, 1, 2}, 3).WithGrad()
	g, _ := Grad(Sum(Mul(x, x)), []*Tensor{x}, nil)
	v, _ := g[0].Data()
	fmt.Println(v)
	// Output: [0 2 4]
}

// Checking the second derivative of an op of your own: squareplus, as in
// Gradcheck's example.
func ExampleGradGradcheck() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{-2, -0.5, 0, 0.5, 2}, 5)
	squareplus := func(x *Tensor) *Tensor { return Scale(Add(x, Sqrt(AddScalar(Mul(x, x), 4))), 0.5) }
	fmt.Println(GradGradcheck(func() *Tensor { return Sum(Mul(squareplus(x), x)) }, []*Tensor{x}, nil))
	// Output: <nil>
}
