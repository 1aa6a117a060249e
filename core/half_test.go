package core

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

func TestRoundHalfOps(t *testing.T) {
	dev := open(t)
	xs := []float32{1.00048828125, 65520, -70000, 3e-8, 0.1, float32(math.NaN())}
	x := dev.Param(xs, len(xs))
	y := Add(RoundF16(x), RoundBF16(x))
	got, err := y.Keep().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range xs {
		w := backend.RoundF16(v) + backend.RoundBF16(v)
		if got[i] != w && !(math.IsNaN(float64(w)) && math.IsNaN(float64(got[i]))) {
			t.Errorf("RoundF16+RoundBF16(%g) = %g, want %g", v, got[i], w)
		}
	}
	if err := Sum(y).Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range g {
		if v != 2 {
			t.Errorf("gradient %d = %g, want 2 (straight through, twice)", i, v)
		}
	}
}

// Under PrecisionF16 a product is the f32 product of the f16-rounded
// operands, forward and backward (autocast's semantics).
func TestMatMulPrecision(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(5, 5))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	av, bv := vals(3*5), vals(5*4)
	round := func(v []float32, f func(float32) float32) []float32 {
		out := make([]float32, len(v))
		for i := range v {
			out[i] = f(v[i])
		}
		return out
	}
	for _, c := range []struct {
		p Precision
		f func(float32) float32
	}{{PrecisionF16, backend.RoundF16}, {PrecisionBF16, backend.RoundBF16}, {PrecisionF32, func(x float32) float32 { return x }}} {
		prev := dev.SetMatMulPrecision(c.p)
		a, b := dev.Param(av, 3, 5), dev.Param(bv, 5, 4)
		y := MatMul(a, b).Keep()
		if err := Sum(Mul(y, y)).Backward(); err != nil {
			t.Fatal(err)
		}
		dev.SetMatMulPrecision(prev)
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := hostMatMul(round(av, c.f), []int{3, 5}, round(bv, c.f), []int{5, 4}, false, false)
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Fatalf("%v: y[%d] = %g, want %g (rounded operands)", c.p, i, got[i], want[i])
			}
		}
		// dL/da = 2y · round(b)ᵀ with the gradient 2y rounded too
		ga, err := a.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		g2 := make([]float32, len(got))
		for i, v := range got {
			g2[i] = c.f(2 * v)
		}
		wantGA, _ := hostMatMul(g2, []int{3, 4}, round(bv, c.f), []int{5, 4}, false, true)
		for i := range wantGA {
			if math.Abs(float64(ga[i])-wantGA[i]) > 1e-5*(1+math.Abs(wantGA[i])) {
				t.Fatalf("%v: da[%d] = %g, want %g", c.p, i, ga[i], wantGA[i])
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("SetMatMulPrecision(7) did not panic")
			}
		}()
		dev.SetMatMulPrecision(7)
	}()
}
