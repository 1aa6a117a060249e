package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// TestElementwiseMatchesTable checks each elementwise op's kernels (its
// specialised loops, where it has them, and the broadcast forms) against
// its row's F32, the generic path, on special values and random ones:
// bit for bit (any NaN matching any NaN), but tanh, whose rational is
// within 6e-8 of math.Tanh (tanh_test.go).
func TestElementwiseMatchesTable(t *testing.T) {
	inf := float32(math.Inf(1))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -0.5, 2, -2, 3, 1e-3, -1e-3, 1e-40, -1e-40,
		0.0004, 7.9, -7.9, 20, -20, 88.8, -104, 65519.996, 65520, 3.4e38, -3.4e38, inf, -inf, float32(math.NaN())}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		vals = append(vals, float32(r.NormFloat64()*3))
	}
	same := func(op backend.Op, got, want float32) bool {
		if got != got && want != want {
			return true
		}
		if op == backend.OpTanh {
			return math.Abs(float64(got)-float64(want)) <= 6e-8
		}
		return math.Float32bits(got) == math.Float32bits(want)
	}
	attrs := [][2]float32{{0, 0}, {1.5, -0.25}, {-0.5, 0.75}, {2, 0}, {3, 0}, {0.5, 0}, {-1, 0}, {-1.5, 0}, {0, inf}}
	n := len(vals)
	o := make([]float32, n)
	for _, op := range backend.Ops() {
		f := op.Info().F32
		switch {
		case op.IsUnary():
			for _, ab := range attrs {
				if op == backend.OpClamp && !(ab[0] <= ab[1]) {
					continue
				}
				unary(op, ab[0], ab[1], o, vals)
				for i, x := range vals {
					if want := f(x, 0, ab[0], ab[1]); !same(op, o[i], want) {
						t.Errorf("%v(%g) a=%g b=%g: kernel %g, table %g", op, x, ab[0], ab[1], o[i], want)
					}
				}
			}
		case op.IsBinary():
			for _, y := range vals {
				ys := make([]float32, n)
				for i := range ys {
					ys[i] = y
				}
				check := func(form string, x, y, got float32) {
					if want := f(x, y, 0, 0); !same(op, got, want) {
						t.Errorf("%v(%g, %g) %s: kernel %g, table %g", op, x, y, form, got, want)
					}
				}
				binRow(op, o, vals, ys, 1, 1)
				for i, x := range vals {
					check("vv", x, y, o[i])
				}
				binRow(op, o, vals, ys, 1, 0)
				for i, x := range vals {
					check("vs", x, y, o[i])
				}
				binRow(op, o, ys, vals, 0, 1)
				for i, x := range vals {
					check("sv", y, x, o[i])
				}
			}
		}
	}
}
