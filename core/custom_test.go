package core

import (
	"math"
	"strings"
	"testing"
)

// steRound rounds to the nearest integer (ties to even, |x| < 512) in the
// forward and passes the gradient straight through: x+1536 lies in
// [1024, 2048), where f16 values are whole numbers, and RoundF16 is exact
// on every backend.
func steRound(x *Tensor) *Tensor {
	return Custom("steRound",
		func(in []*Tensor) *Tensor { return AddScalar(RoundF16(AddScalar(in[0], 1536)), -1536) },
		func(_ []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{g} },
		x)
}

// clipGrad is the identity in the forward with its gradient clamped to
// [-1, 1] in the backward.
func clipGrad(x *Tensor) *Tensor {
	return Custom("clipGrad",
		func(in []*Tensor) *Tensor { return in[0] },
		func(_ []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{Clamp(g, -1, 1)} },
		x)
}

func TestCustomValuesAndGradients(t *testing.T) {
	dev := open(t)
	xs := []float32{-2.7, -1.2, -0.4, 0.3, 0.5, 1.5, 2.49, 7.6}
	cs := []float32{3, -0.5, 2, -4, 0.25, 1, -1.5, 0.75}
	x := dev.Param(xs, 2, 4)
	c := dev.Tensor(cs, 2, 4)
	// x*x inside forward would give 2x*g if its ops carried gradients
	y := steRound(Mul(x, dev.Full(1, 2, 4)))
	z := clipGrad(x)
	loss := Add(Sum(Mul(y, c)), Sum(Mul(z, c)))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	yv, err := y.Data()
	if err != nil {
		t.Fatal(err)
	}
	gv, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		if want := float32(math.RoundToEven(float64(xs[i]))); yv[i] != want {
			t.Errorf("steRound(%g) = %g, want %g", xs[i], yv[i], want)
		}
		if want := cs[i] + max(-1, min(1, cs[i])); gv[i] != want {
			t.Errorf("grad[%d] = %g, want %g (identity %g plus clipped %g)", i, gv[i], want, cs[i], max(-1, min(1, cs[i])))
		}
	}
}

// TestCustomForwardOpsCarryNoGradient: forward's x*x would give 2x·g; the
// user's backward says 3·g, and only it counts.
func TestCustomForwardOpsCarryNoGradient(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1, 2, -3}, 3)
	y := Custom("sq", func(in []*Tensor) *Tensor { return Mul(in[0], in[0]) },
		func(_ []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{Scale(g, 3)} }, x)
	if err := Sum(y).Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	if !near(g, []float32{3, 3, 3}, 0) {
		t.Fatalf("grad %v, want [3 3 3]", g)
	}
}

// TestCustomTwoInputsGradcheck: a product whose backward is written by
// hand (reading the inputs and the output) agrees with finite differences.
func TestCustomTwoInputsGradcheck(t *testing.T) {
	dev := open(t)
	a := dev.Param([]float32{0.5, -1.5, 2, 0.25, 1, -0.75}, 2, 3)
	b := dev.Param([]float32{1.25, 0.5, -2}, 3)
	f := func() *Tensor {
		y := Custom("mulExp", func(in []*Tensor) *Tensor { return Exp(Mul(in[0], in[1])) },
			func(in []*Tensor, out, g *Tensor) []*Tensor {
				go_ := Mul(g, out) // d exp(ab) = exp(ab) (b da + a db)
				return []*Tensor{Mul(go_, in[1]), SumTo(Mul(go_, in[0]), 3)}
			}, a, b)
		return Sum(Mul(y, y))
	}
	if err := Gradcheck(f, []*Tensor{a, b}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCustomCheckpointAndSync: the same gradients lazily, under
// Checkpoint, and with a sync between the forward and the backward.
func TestCustomCheckpointAndSync(t *testing.T) {
	dev := open(t)
	xs := []float32{0.3, -1.7, 2.2, 0.9, -0.1, 1.4}
	f := func(x *Tensor) *Tensor { return Tanh(clipGrad(Scale(steRound(Scale(x, 3)), 2))) }
	var got [3][]float32
	for k := range got {
		x := dev.Param(xs, 2, 3)
		var y *Tensor
		if k == 1 {
			y = Checkpoint(f, x)
			if y.ckptSeg() == nil {
				t.Fatal("Checkpoint made no segment: the test would not test it")
			}
		} else {
			y = f(x)
		}
		loss := Sum(Mul(y, dev.Constant([]float32{5, -3, 0.5, 2, -0.2, 4}, 2, 3)))
		if k == 2 {
			if _, err := y.Data(); err != nil {
				t.Fatal(err)
			}
		}
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := x.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		got[k] = g
	}
	// d/dx = clamp(c·tanh'(y), -1, 1)·2·3, with y = 2·round(3x)
	for i, x := range xs {
		y := 2 * math.RoundToEven(3*float64(x))
		c := []float64{5, -3, 0.5, 2, -0.2, 4}[i]
		want := max(-1, min(1, c*(1-math.Tanh(y)*math.Tanh(y)))) * 6
		for k := range got {
			if math.Abs(float64(got[k][i])-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("way %d: grad[%d] = %g, want %g", k, i, got[k][i], want)
			}
		}
	}
}

func TestCustomInCapture(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{0.4, -1.6, 2.5}, 3)
	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		w.ZeroGrad()
		loss := Sum(Mul(steRound(Mul(w, in[0])), in[0]))
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		return []*Tensor{loss, w.Grad()}
	})
	for _, s := range []float32{1, 2, 3} {
		out, err := c.Call(In([]float32{s, s, s}, 3))
		if err != nil {
			t.Fatal(err)
		}
		// d/dw sum(round(w s) s) = s·s straight through
		var wantLoss float64
		for _, wv := range []float64{0.4, -1.6, 2.5} {
			wantLoss += math.RoundToEven(wv*float64(s)) * float64(s)
		}
		if float64(out[0][0]) != wantLoss || !near(out[1], []float32{s * s, s * s, s * s}, 0) {
			t.Errorf("scale %g: loss %g grad %v, want %g and %g", s, out[0][0], out[1], wantLoss, s*s)
		}
	}
	if c.Records() != 1 {
		t.Errorf("%d recordings, want 1 (replays)", c.Records())
	}
}

func TestCustomNoGrad(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1.4}, 1)
	var y *Tensor
	dev.NoGrad(func() { y = steRound(x) })
	if y.RequiresGrad() {
		t.Fatal("a Custom under NoGrad requires grad")
	}
	if v, err := y.Item(); err != nil || v != 1 {
		t.Fatalf("value %v %v, want 1", v, err)
	}
}

func TestCustomPanics(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1, 2}, 2)
	id := func(in []*Tensor) *Tensor { return in[0] }
	cases := []struct {
		name, want string
		f          func()
	}{
		{"two grads for one input", "core.Custom(bad): the backward function returned 2 gradients for 1 inputs", func() {
			y := Custom("bad", id, func(_ []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{g, g} }, x)
			_ = Sum(y).Backward()
		}},
		{"gradient of a wrong shape", "core.Custom(shape): the backward function returned gradient 0 of shape [] for input 0 of shape [2]", func() {
			y := Custom("shape", id, func(_ []*Tensor, _, g *Tensor) []*Tensor { return []*Tensor{Sum(g)} }, x)
			_ = Sum(y).Backward()
		}},
		{"forward returns nil", "core.Custom(nil): the forward function returned nil", func() {
			Custom("nil", func([]*Tensor) *Tensor { return nil }, func(_ []*Tensor, _, g *Tensor) []*Tensor { return nil }, x)
		}},
		{"no name", "core.Custom: empty name", func() { Custom("", id, nil, x) }},
		{"nil backward", "core.Custom(b): nil forward or backward", func() { Custom("b", id, nil, x) }},
		{"no inputs", "core.Custom(n): no inputs", func() {
			Custom("n", id, func(_ []*Tensor, _, g *Tensor) []*Tensor { return nil })
		}},
	}
	for _, c := range cases {
		func() {
			defer func() {
				r := recover()
				s, _ := r.(string)
				if !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestCustomLetsInputsGo: once differentiated and run, a Custom's result
// no longer holds its inputs (its recipe), as any node's.
func TestCustomLetsInputsGo(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1.4, -0.6}, 2)
	y := steRound(x).Keep()
	if y.customOp() == nil {
		t.Fatal("no custom record before the Backward: the test would not test it")
	}
	if err := Sum(y).Backward(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	if y.customOp() != nil {
		t.Error("the run kept the custom op's inputs after its Backward")
	}
}
