package core

import (
	"fmt"
	"strings"
	"testing"
)

func TestGradcheck(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{0.3, -1.2, 0.8, 2.0, -0.1, 0.5}, 2, 3)
	b := dev.Param([]float32{0.1, -0.2, 0.3}, 3)
	good := func() *Tensor { return Sum(Softplus(Add(Mul(w, w), b))) }
	if err := Gradcheck(good, []*Tensor{w, b}, nil); err != nil {
		t.Errorf("a correct gradient: %v", err)
	}
	if w.Grad() != nil {
		t.Errorf("Gradcheck left a gradient on w")
	}
	// A factor taken without gradient: a loss through it has a wrong one.
	bad := func() *Tensor { return Sum(Mul(w, detach("test", w))) }
	err := Gradcheck(bad, []*Tensor{w}, nil)
	if err == nil || !strings.Contains(err.Error(), "core.Gradcheck: ") || !strings.Contains(err.Error(), "parameter 0 [2 3] element") {
		t.Errorf("a wrong gradient: err = %v, want a list of mismatches", err)
	}
	// The device still works, and the params are unchanged.
	if v, err := Sum(w).Item(); err != nil || v < 2.29 || v > 2.31 {
		t.Errorf("after Gradcheck: Sum(w) = %v, %v; want 2.3", v, err)
	}
	if err := Gradcheck(func() *Tensor { return Mul(w, w) }, []*Tensor{w}, nil); err == nil || !strings.Contains(err.Error(), "one-element") {
		t.Errorf("a non-scalar f: err = %v", err)
	}
	if err := Gradcheck(good, []*Tensor{dev.Tensor([]float32{1}, 1)}, nil); err == nil || !strings.Contains(err.Error(), "not a leaf that requires grad") {
		t.Errorf("a non-parameter: err = %v", err)
	}
}

// Checking the gradient of an op of your own, here a "squareplus"
// activation (x + sqrt(x^2 + b))/2 built from core's ops.
func ExampleGradcheck() {
	dev, _ := Open("cpu")
	defer dev.Close()
	squareplus := func(x *Tensor, b float32) *Tensor {
		return Scale(Add(x, Sqrt(AddScalar(Mul(x, x), b))), 0.5)
	}
	x := dev.Param([]float32{-2, -0.5, 0, 0.5, 2}, 5)
	err := Gradcheck(func() *Tensor { return Sum(Mul(squareplus(x, 4), x)) }, []*Tensor{x}, nil)
	fmt.Println(err)
	// Output: <nil>
}

// TestGradcheckSharedGradient: two parameters summed get one gradient
// tensor; reading the second must not find it released by the first's
// ZeroGrad.
func TestGradcheckSharedGradient(t *testing.T) {
	dev := open(t)
	a, b := dev.Param([]float32{1, 2}, 2), dev.Param([]float32{3, -1}, 2)
	x := dev.Tensor([]float32{0.5, -2}, 2)
	f := func() *Tensor { return Sum(Mul(Tanh(Add(a, b)), x)) }
	if err := Gradcheck(f, []*Tensor{a, b}, nil); err != nil {
		t.Fatal(err)
	}
}
