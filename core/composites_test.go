package core

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The gradients of the composites of composites.go, checked by
// TestGradients like every op's (float64 finite differences of the same
// lowered graph).
func init() {
	away := func(r *rand.Rand) float64 { // |x| in [0.1, 1.1], both signs: no kinks at 0
		return (0.1 + r.Float64()) * float64(1-2*r.IntN(2))
	}
	gradCases = append(gradCases,
		gradCase{name: "leaky-relu", shapes: [][]int{{4, 5}}, gen: away, f: func(p []*Tensor) *Tensor { return LeakyReLU(p[0], 0.1) }},
		gradCase{name: "elu", shapes: [][]int{{4, 5}}, gen: away, f: func(p []*Tensor) *Tensor { return ELU(Scale(p[0], 2), 1.5) }},
		gradCase{name: "softplus", shapes: [][]int{{4, 5}}, f: func(p []*Tensor) *Tensor { return Softplus(Scale(p[0], 4)) }},
		gradCase{name: "softplus-large", shapes: [][]int{{6}}, f: func(p []*Tensor) *Tensor { return Softplus(AddScalar(p[0], 25)) }},
		gradCase{name: "log1p", shapes: [][]int{{3, 3}}, f: func(p []*Tensor) *Tensor { return Log1p(Scale(p[0], 0.5)) }},
		gradCase{name: "erf", shapes: [][]int{{4, 5}}, gen: away, f: func(p []*Tensor) *Tensor { return Erf(Scale(p[0], 2)) }},
		gradCase{name: "gelu-erf", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return GELUErf(Scale(p[0], 3)) }},
		gradCase{name: "var-axis0", shapes: [][]int{{5, 3}}, f: func(p []*Tensor) *Tensor { return Var(p[0], 0, 1, false) }},
		gradCase{name: "var-last-keep", shapes: [][]int{{2, 3, 4}}, f: func(p []*Tensor) *Tensor { return Var(p[0], -1, 0, true) }},
		gradCase{name: "std", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Std(p[0], 1, 1, false) }},
		gradCase{name: "softmax-axis0", shapes: [][]int{{4, 3}}, f: func(p []*Tensor) *Tensor { return SoftmaxAxis(p[0], 0) }},
		gradCase{name: "log-softmax-axis1", shapes: [][]int{{2, 4, 3}}, f: func(p []*Tensor) *Tensor { return LogSoftmaxAxis(p[0], 1) }},
		gradCase{name: "cumsum-axis1", shapes: [][]int{{2, 5, 3}}, f: func(p []*Tensor) *Tensor { return Cumsum(p[0], 1) }},
		gradCase{name: "concat-axis1", shapes: [][]int{{2, 3, 2}, {2, 1, 2}, {2, 2, 2}}, f: func(p []*Tensor) *Tensor { return Concat(1, p[0], p[1], p[2]) }},
		gradCase{name: "stack-last", shapes: [][]int{{3, 2}, {3, 2}}, f: func(p []*Tensor) *Tensor { return Stack(-1, p[0], p[1]) }},
	)
}

// x[i, j, k] of a row-major [a, b, c] tensor.
func at3(x []float64, b, c, i, j, k int) float64 { return x[(i*b+j)*c+k] }

func TestCompositeValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	xs := []float64{-30, -5, -1, -0.25, -1e-3, 0, 1e-3, 0.5, 2, 7, 19.5, 25, 100, nan, inf, -inf}
	leaky := func(x float64) float64 {
		if x > 0 {
			return x
		}
		return 0.1 * x
	}
	elu := func(x float64) float64 {
		if x > 0 {
			return x
		}
		return 1.5 * math.Expm1(x)
	}
	softplus := func(x float64) float64 {
		if x > 0 {
			return x + math.Log1p(math.Exp(-x))
		}
		return math.Log1p(math.Exp(x))
	}
	gelu := func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }
	cases := []struct {
		name string
		f    func(*Tensor) *Tensor
		want func(float64) float64
		abs  float64 // absolute tolerance, besides 1e-6 relative
		skip func(float64) bool
	}{
		{"LeakyReLU", func(x *Tensor) *Tensor { return LeakyReLU(x, 0.1) }, leaky, 0, nil},
		{"ELU", func(x *Tensor) *Tensor { return ELU(x, 1.5) }, elu, 1e-7, nil},
		// Through a log of 1+y: y's rounding (2^-24) plus the log's own
		// error near 1, which WGSL allows up to 2^-21 absolute (NVIDIA
		// gave 8e-8 at 1.001, lavapipe 1e-9).
		{"Softplus", Softplus, softplus, 0x1p-24 + 0x1p-21, nil},
		{"Log1p", Log1p, math.Log1p, 0x1p-24 + 0x1p-21, func(x float64) bool { return x < -1 }},
		// A&S's 1.5e-7, f32 rounding, and the GPU's exp (2.9e-7 on NVIDIA).
		{"Erf", Erf, math.Erf, 4e-7, nil},
		// GELUErf is 0.5*x*(1+erf): its error is |x| times erf's.
		{"GELUErf", GELUErf, gelu, 0, func(x float64) bool { return math.IsInf(x, 0) }},
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, c := range cases {
			got, err := c.f(dev.Tensor(f32s(xs), len(xs))).Data()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i, x := range xs {
				if c.skip != nil && c.skip(x) {
					continue
				}
				w := c.want(x)
				abs := c.abs
				if c.name == "GELUErf" {
					abs = 1.5e-7 * math.Abs(x)
				}
				g := float64(got[i])
				ok := math.IsNaN(w) && math.IsNaN(g) || w == g ||
					math.Abs(g-w) <= abs+1e-6*math.Abs(w)
				if !ok {
					t.Errorf("%s(%g) = %g, want %g (tolerance %g absolute + 1e-6 relative)", c.name, x, g, w, abs)
				}
			}
		}
	})
}

// Cumsum propagates infinities and NaN as a sequential sum, row by row:
// never into the outputs before them (the matmul's 0*Inf would).
func TestCumsumNonFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	rows := [][]float64{
		{1, inf, 2, nan, 3},
		{-0.0, 2, -inf, 1, 4},
		{1, inf, 5, -inf, 2},
		{1, 2, 3, 4, 5},
	}
	var xs []float64
	for _, r := range rows {
		xs = append(xs, r...)
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, axis := range []int{1, 0} {
			x := dev.Tensor(f32s(xs), 4, 5)
			if axis == 0 {
				x = Transpose(x)
			}
			got, err := Cumsum(x, axis).Data()
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rows {
				s := 0.0
				for j, v := range r {
					s += v
					g := float64(got[i*5+j])
					if axis == 0 {
						g = float64(got[j*4+i])
					}
					if !(math.IsNaN(s) && math.IsNaN(g) || s == g && math.Signbit(s) == math.Signbit(g)) {
						t.Errorf("Cumsum(%v, axis %d)[%d] = %g, want %g", r, axis, j, g, s)
					}
				}
			}
		}
	})
}

func TestReductionComposites(t *testing.T) {
	eachDevice(t, testReductionComposites)
}

func testReductionComposites(t *testing.T, dev *Device) {
	r := rand.New(rand.NewPCG(3, 4))
	const a, b, c = 2, 5, 3
	x := make([]float64, a*b*c)
	for i := range x {
		x[i] = 1000 + r.Float64() // a large mean: a one-pass variance would lose most digits
	}
	xt := dev.Tensor(f32s(x), a, b, c)
	xf := make([]float64, len(x)) // the f32 values, in float64
	for i, v := range f32s(x) {
		xf[i] = float64(v)
	}
	// references along axis 1
	variance := make([]float64, a*c)
	softmax := make([]float64, a*b*c)
	cumsum := make([]float64, a*b*c)
	for i := range a {
		for k := range c {
			mean, mx := 0.0, math.Inf(-1)
			for j := range b {
				mean += at3(xf, b, c, i, j, k) / b
				mx = math.Max(mx, at3(xf, b, c, i, j, k))
			}
			ss, z, run := 0.0, 0.0, 0.0
			for j := range b {
				d := at3(xf, b, c, i, j, k) - mean
				ss += d * d
				z += math.Exp(at3(xf, b, c, i, j, k) - mx)
			}
			variance[i*c+k] = ss / (b - 1)
			for j := range b {
				softmax[(i*b+j)*c+k] = math.Exp(at3(xf, b, c, i, j, k)-mx) / z
				run += at3(xf, b, c, i, j, k) - 1000
				cumsum[(i*b+j)*c+k] = run
			}
		}
	}
	check := func(name string, y *Tensor, want []float64, shape []int, tol float64) {
		t.Helper()
		if !slices.Equal(y.Shape(), shape) {
			t.Errorf("%s: shape %v, want %v", name, y.Shape(), shape)
		}
		got, err := y.Data()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > tol*(1+math.Abs(want[i])) {
				t.Errorf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	// The variance of values near 1000 that differ by < 1 is ~0.08: two
	// passes keep it to f32 rounding of the deviations (~6e-5 absolute).
	check("Var", Var(xt, 1, 1, false), variance, []int{a, c}, 1e-3)
	std := make([]float64, len(variance))
	for i, v := range variance {
		std[i] = math.Sqrt(v)
	}
	check("Std", Std(xt, -2, 1, true), std, []int{a, 1, c}, 1e-3)
	check("SoftmaxAxis", SoftmaxAxis(xt, 1), softmax, []int{a, b, c}, 1e-5)
	logsm := make([]float64, len(softmax))
	for i, v := range softmax {
		logsm[i] = math.Log(v)
	}
	check("LogSoftmaxAxis", LogSoftmaxAxis(xt, 1), logsm, []int{a, b, c}, 1e-5)
	check("Cumsum", Cumsum(AddScalar(xt, -1000), 1), cumsum, []int{a, b, c}, 1e-5)
}

func TestConcatStack(t *testing.T) {
	eachDevice(t, testConcatStack)
}

func testConcatStack(t *testing.T, dev *Device) {
	p := dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	q := dev.Tensor([]float32{7, 8}, 2, 1)
	cases := []struct {
		name  string
		y     *Tensor
		shape []int
		want  []float32
	}{
		{"concat-axis1", Concat(1, p, q), []int{2, 4}, []float32{1, 2, 3, 7, 4, 5, 6, 8}},
		{"concat-axis-1", Concat(-1, q, p, q), []int{2, 5}, []float32{7, 1, 2, 3, 7, 8, 4, 5, 6, 8}},
		{"concat-axis0", Concat(0, p, p), []int{4, 3}, []float32{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}},
		{"stack-axis0", Stack(0, p, Scale(p, 10)), []int{2, 2, 3}, []float32{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}},
		{"stack-axis1", Stack(1, p, Scale(p, 10)), []int{2, 2, 3}, []float32{1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60}},
		{"stack-axis2", Stack(2, p, Scale(p, 10)), []int{2, 3, 2}, []float32{1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60}},
	}
	for _, c := range cases {
		got, err := c.y.Data()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(c.y.Shape(), c.shape) || !near(got, c.want, 0) {
			t.Errorf("%s: %v %v, want %v %v", c.name, c.y.Shape(), got, c.shape, c.want)
		}
	}
}

func TestCompositePanics(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	cases := []struct {
		name, want string
		f          func()
	}{
		{"var-correction", "core.Var: correction 2 for 2 elements", func() { Var(x, 0, 2, false) }},
		{"var-axis", "core.Var: axis 2 out of range", func() { Var(x, 2, 0, false) }},
		{"concat-shapes", "core.Concat: tensor 1 of shape [3 2]", func() { Concat(1, x, Transpose(x)) }},
		{"stack-shapes", "core.Stack: tensor 1 of shape [3 2]", func() { Stack(0, x, Transpose(x)) }},
		{"stack-axis", "core.Stack: axis 3 out of range", func() { Stack(3, x, x) }},
		{"leaky-slope", "core.LeakyReLU: slope NaN", func() { LeakyReLU(x, float32(math.NaN())) }},
		{"softmax-axis", "core.SoftmaxAxis: axis -3 out of range", func() { SoftmaxAxis(x, -3) }},
	}
	for _, c := range cases {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The composites' gradients against the true derivatives, at the points
// where a composite could go wrong: 0 (Softplus's 0.5, GELUErf's 0.5,
// Erf's 2/sqrt(pi), ELU's alpha), the Softplus threshold and its
// neighbourhood, and the stated precision of the derivative of Erf's
// approximation. (backend/backendtest/edge checks the same points on every
// backend against PyTorch's values.)
func TestCompositeDerivatives(t *testing.T) {
	dev := open(t)
	xs := []float64{-3, -0.7, -1e-3, 0, 1e-3, 0.4, 1.3, 19.9, 20, 20.1, 30}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	phi := func(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
	cases := []struct {
		name string
		f    func(*Tensor) *Tensor
		want func(float64) float64
		tol  float64
	}{
		{"Softplus", Softplus, sig, 1e-6},
		{"Erf", Erf, func(x float64) float64 { return 2 / math.SqrtPi * math.Exp(-x*x) }, 1e-5},
		{"ELU", func(x *Tensor) *Tensor { return ELU(x, 1.5) }, func(x float64) float64 {
			if x > 0 {
				return 1
			}
			return 1.5 * math.Exp(x) // 1.5 at 0, as PyTorch's
		}, 1e-6},
		{"GELUErf", GELUErf, func(x float64) float64 { return 0.5*math.Erfc(-x/math.Sqrt2) + x*phi(x) }, 2e-6},
		{"LeakyReLU", func(x *Tensor) *Tensor { return LeakyReLU(x, 0.2) }, func(x float64) float64 {
			if x > 0 {
				return 1
			}
			return 0.2
		}, 1e-7},
	}
	for _, c := range cases {
		x := dev.Param(f32s(xs), len(xs))
		if err := Sum(c.f(x)).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := x.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range xs {
			if w := c.want(v); math.Abs(float64(g[i])-w) > c.tol {
				t.Errorf("%s'(%g) = %g, want %g (tolerance %g)", c.name, v, g[i], w, c.tol)
			}
		}
	}
}
