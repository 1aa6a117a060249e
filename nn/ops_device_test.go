package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestCompareWhereArgDevice runs core's comparisons, Where, ArgMax/ArgMin
// and MaxAxis/MinAxis on the device under test (AG_TEST_DEVICE) over
// tensors long enough for vector paths and workgroup boundaries, with
// ties, NaN, infinities, signed zeros and huge values salted in, against
// host-computed truth, and checks their gradients there with Gradcheck.
func TestCompareWhereArgDevice(t *testing.T) {
	dev := openDev(t)
	const R, C = 37, 53
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	specials := []float32{nan, inf, -inf, 0, float32(math.Copysign(0, -1)), 3e38, -3e38, math.MaxFloat32, 1.5e-38, 1.2e-38}
	r := rand.New(rand.NewPCG(11, 12))
	gen := func() []float32 {
		v := make([]float32, R*C)
		for i := range v {
			v[i] = float32(r.IntN(9)-4) / 2 // many ties
			if r.IntN(7) == 0 {
				v[i] = specials[r.IntN(len(specials))]
			}
		}
		return v
	}
	av, bv := gen(), gen()
	bcol := bv[:R] // b broadcast as a column
	data := func(x *core.Tensor) []float32 {
		t.Helper()
		v, err := x.Data()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	same := func(g, w float32) bool { return g == w || g != g && w != w }

	// comparisons, full and broadcast
	truth := map[string]func(a, b float32) bool{
		"Greater": func(a, b float32) bool { return a > b }, "GreaterEqual": func(a, b float32) bool { return a >= b },
		"Less": func(a, b float32) bool { return a < b }, "LessEqual": func(a, b float32) bool { return a <= b },
		"Equal": func(a, b float32) bool { return a == b }, "NotEqual": func(a, b float32) bool { return a != b },
	}
	ops := map[string]func(a, b *core.Tensor) *core.Tensor{
		"Greater": core.Greater, "GreaterEqual": core.GreaterEqual, "Less": core.Less,
		"LessEqual": core.LessEqual, "Equal": core.Equal, "NotEqual": core.NotEqual,
	}
	for name, f := range ops {
		full := data(f(dev.Tensor(av, R, C), dev.Tensor(bv, R, C)))
		col := data(f(dev.Tensor(av, R, C), dev.Tensor(bcol, R, 1)))
		bad := 0
		for i := range av {
			w := float32(0)
			if truth[name](av[i], bv[i]) {
				w = 1
			}
			wc := float32(0)
			if truth[name](av[i], bcol[i/C]) {
				wc = 1
			}
			if (full[i] != w || col[i] != wc) && bad < 5 {
				bad++
				t.Errorf("%s: element %d: %g vs %g gave %g (want %g), %g vs %g gave %g (want %g)", name, i, av[i], bv[i], full[i], w, av[i], bcol[i/C], col[i], wc)
			}
		}
	}

	// Where on a mask of its own
	cond := gen()
	got := data(core.Where(dev.Tensor(cond, R, C), dev.Tensor(av, R, C), dev.Tensor(bv, R, C)))
	for i := range got {
		w := bv[i]
		if cond[i] != 0 {
			w = av[i]
		}
		if !same(got[i], w) {
			t.Errorf("Where(%g, %g, %g) = %g, want %g", cond[i], av[i], bv[i], got[i], w)
			break
		}
	}

	// ArgMax, ArgMin, MaxAxis, MinAxis along both axes
	type reduce struct {
		name string
		f    func(*core.Tensor, int, bool) *core.Tensor
		max  bool
		arg  bool
	}
	for _, red := range []reduce{{"ArgMax", core.ArgMax, true, true}, {"ArgMin", core.ArgMin, false, true}, {"MaxAxis", core.MaxAxis, true, false}, {"MinAxis", core.MinAxis, false, false}} {
		for axis := range 2 {
			got := data(red.f(dev.Tensor(av, R, C), axis, false))
			outer, inner, n := C, 1, R // axis 0: element (k, j) is av[k*C+j]
			if axis == 1 {
				outer, inner, n = R, C, C
			}
			for o := range outer {
				at := func(k int) float32 {
					if axis == 0 {
						return av[k*C+o]
					}
					return av[o*inner+k]
				}
				best := 0
				for k := 1; k < n && at(best) == at(best); k++ {
					x := at(k)
					if x != x || red.max && x > at(best) || !red.max && x < at(best) {
						best = k
					}
				}
				w := at(best)
				if red.arg {
					w = float32(best)
				}
				if !same(got[o], w) {
					t.Errorf("%s axis %d, slice %d: %g, want %g", red.name, axis, o, got[o], w)
					break
				}
			}
		}
	}

	// Gradients on the device, at values without ties (spaced 0.05 apart,
	// so the finite differences do not cross a comparison).
	perm := r.Perm(4 * 6)
	pv, qv := make([]float32, 4*6), make([]float32, 4*6)
	for i, p := range perm {
		pv[i] = float32(p)*0.05 - 0.6
		qv[i] = float32(perm[(i+7)%len(perm)])*0.05 - 0.575
	}
	p, q := dev.Param(pv, 4, 6), dev.Param(qv, 4, 6)
	w := dev.Tensor(gen()[:4*6], 4, 6)
	w = core.Where(core.Equal(w, w), w, dev.Full(0.5)) // finite weights: the NaNs become 0.5
	w = core.Clamp(w, -2, 2)
	for _, c := range []struct {
		name string
		f    func() *core.Tensor
		ps   []*core.Tensor
	}{
		{"Where", func() *core.Tensor {
			return core.Sum(core.Mul(core.Where(core.Greater(p, q), core.Mul(p, p), core.Scale(q, 3)), w))
		}, []*core.Tensor{p, q}},
		{"MaxAxis", func() *core.Tensor { return core.Sum(core.Mul(core.MaxAxis(p, 1, true), core.Tanh(q))) }, []*core.Tensor{p, q}},
		{"MinAxis", func() *core.Tensor {
			return core.Sum(core.Mul(core.MinAxis(core.Mul(p, q), 0, false), dev.Tensor([]float32{1, -2, 3, 0.5, -1, 2}, 6)))
		}, []*core.Tensor{p, q}},
	} {
		if err := core.Gradcheck(c.f, c.ps, nil); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
