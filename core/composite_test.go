package core

import (
	"math"
	"testing"
)

// The composite ops (built from primitives, gradients for free) and the
// primitive Abs agree with their float64 definitions on every backend,
// special values included.
func TestComposites(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	xs := []float64{-3, -1, -0.25, 0, 0.5, 2, 7, nan, inf, -inf}
	gelu := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	sign := func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x // 0 and NaN
	}
	cases := []struct {
		name string
		f    func(*Tensor) *Tensor
		want func(float64) float64
		tol  float64
	}{
		{"Abs", Abs, math.Abs, 0},
		{"Sign", Sign, sign, 0},
		{"SiLU", SiLU, func(x float64) float64 { return x / (1 + math.Exp(-x)) }, 1e-5},
		{"GELU", GELU, gelu, 1e-5},
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, c := range cases {
			got, err := c.f(dev.Tensor(f32s(xs), len(xs))).Data()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i, x := range xs {
				w := c.want(x)
				if c.name != "Abs" && c.name != "Sign" && math.IsInf(x, 0) {
					continue // x*sigmoid(x) and GELU at ±Inf are Inf*0 forms in IEEE arithmetic
				}
				if !same(got[i], w, c.tol) {
					t.Errorf("%s(%g) = %g, want %g", c.name, x, got[i], w)
				}
			}
		}
	})
}

// SumTo sums the leading and the size-1 axes of its target (the values
// the conformance suite checks; here the function and its gradient): the
// gradient of sum(SumTo(x)*w) is w broadcast over x, and a broadcast's
// gradient (unbroadcast) goes through it.
func TestSumTo(t *testing.T) {
	dev := open(t)
	xs := make([]float32, 2*3*4)
	for i := range xs {
		xs[i] = float32(i%7) - 2.5
	}
	x := dev.Param(xs, 2, 3, 4)
	w := dev.Param([]float32{0.5, -1, 2}, 3, 1)
	got, err := SumTo(x, 3, 1).Data()
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 3; j++ {
		want := 0.0
		for i := 0; i < 2; i++ {
			for k := 0; k < 4; k++ {
				want += float64(xs[i*12+j*4+k])
			}
		}
		if !same(got[j], want, 1e-6) {
			t.Errorf("SumTo(x, 3, 1)[%d] = %g, want %g", j, got[j], want)
		}
	}
	if err := Gradcheck(func() *Tensor { return Sum(Mul(SumTo(x, 3, 1), w)) }, []*Tensor{x, w}, nil); err != nil {
		t.Errorf("SumTo: %v", err)
	}
	// a broadcast add: b's gradient is a sum_to over axes 0 and 2
	b := dev.Param([]float32{0.3, -0.7, 1.1}, 3, 1)
	if err := Gradcheck(func() *Tensor { return Sum(Mul(Add(x, b), x)) }, []*Tensor{x, b}, nil); err != nil {
		t.Errorf("unbroadcast: %v", err)
	}
}
