package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func init() {
	gradCases = append(gradCases,
		gradCase{name: "where", shapes: [][]int{{4, 5}, {4, 5}}, f: func(p []*Tensor) *Tensor {
			return Where(Greater(p[0], p[1]), Mul(p[0], p[0]), Scale(p[1], 3))
		}},
		gradCase{name: "where-broadcast", shapes: [][]int{{3, 1}, {1, 4}}, f: func(p []*Tensor) *Tensor {
			c := p[0].dev.Tensor([]float32{1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1}, 3, 4)
			return Where(c, Exp(p[0]), p[1])
		}},
		gradCase{name: "max-axis", shapes: [][]int{{4, 5}}, f: func(p []*Tensor) *Tensor { return MaxAxis(p[0], 1, false) }},
		gradCase{name: "max-axis0-keep", shapes: [][]int{{4, 3, 2}}, f: func(p []*Tensor) *Tensor { return MaxAxis(p[0], 0, true) }},
		gradCase{name: "min-axis", shapes: [][]int{{3, 6}}, f: func(p []*Tensor) *Tensor { return MinAxis(Mul(p[0], p[0]), -1, false) }},
		gradCase{name: "min-axis-middle", shapes: [][]int{{2, 5, 3}}, f: func(p []*Tensor) *Tensor { return MinAxis(p[0], 1, false) }},
	)
}

var (
	nan64  = math.NaN()
	inf64  = math.Inf(1)
	negZ64 = math.Copysign(0, -1)
)

// compareOps are the six comparisons with their float64 truth (Go's
// operators are IEEE's).
var compareOps = []struct {
	name   string
	f      func(a, b *Tensor) *Tensor
	scalar func(x *Tensor, c float32) *Tensor
	truth  func(a, b float64) bool
}{
	{"Greater", Greater, GreaterScalar, func(a, b float64) bool { return a > b }},
	{"GreaterEqual", GreaterEqual, GreaterEqualScalar, func(a, b float64) bool { return a >= b }},
	{"Less", Less, LessScalar, func(a, b float64) bool { return a < b }},
	{"LessEqual", LessEqual, LessEqualScalar, func(a, b float64) bool { return a <= b }},
	{"Equal", Equal, EqualScalar, func(a, b float64) bool { return a == b }},
	{"NotEqual", NotEqual, NotEqualScalar, func(a, b float64) bool { return a != b }},
}

// compareVals are paired with each other: NaN, the infinities, signed
// zeros, the largest finite values (whose differences overflow), normals
// whose difference is subnormal (1.5e-38 - 1.2e-38), values past the
// 2^64 scaling of cmpSign, ties and ordinary values.
var compareVals = []float64{
	nan64, inf64, -inf64, 0, negZ64, 3e38, -3e38, math.MaxFloat32, -math.MaxFloat32,
	1.5e-38, 1.2e-38, -1.2e-38, 1e20, 2e20, 1, -1, 0.5, 1 + 0x1p-23, -2.5, 7,
}

func mask(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

func TestCompareValues(t *testing.T) {
	n := len(compareVals)
	col := make([]float32, n) // a as a column against b as a row: every pair
	for i, v := range compareVals {
		col[i] = float32(v)
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		a, b := dev.Tensor(col, n, 1), dev.Tensor(col, n)
		for _, op := range compareOps {
			y := op.f(a, b)
			if !slices.Equal(y.Shape(), []int{n, n}) {
				t.Fatalf("%s: shape %v, want [%d %d]", op.name, y.Shape(), n, n)
			}
			got, err := y.Data()
			if err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			for i, x := range compareVals {
				for j, z := range compareVals {
					if want := mask(op.truth(float64(float32(x)), float64(float32(z)))); got[i*n+j] != want {
						t.Errorf("%s(%g, %g) = %g, want %g", op.name, x, z, got[i*n+j], want)
					}
				}
			}
			for _, c := range []float32{0, 1, -2.5, 3e38, float32(inf64), float32(-inf64), float32(nan64)} {
				got, err := op.scalar(dev.Tensor(col, n), c).Data()
				if err != nil {
					t.Fatalf("%sScalar: %v", op.name, err)
				}
				for i, x := range compareVals {
					if want := mask(op.truth(float64(float32(x)), float64(c))); got[i] != want {
						t.Errorf("%sScalar(%g, %g) = %g, want %g", op.name, x, c, got[i], want)
					}
				}
			}
		}
		// Random values, many of them tied, over a 3-D broadcast.
		r := rand.New(rand.NewPCG(3, 4))
		av, bv := make([]float32, 2*3*4), make([]float32, 3*1)
		for i := range av {
			av[i] = float32(r.IntN(5) - 2)
		}
		for i := range bv {
			bv[i] = float32(r.IntN(5) - 2)
		}
		got, err := LessEqual(dev.Tensor(av, 2, 3, 4), dev.Tensor(bv, 3, 1)).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if want := mask(av[i] <= bv[(i/4)%3]); got[i] != want {
				t.Errorf("LessEqual element %d: %g <= %g gave %g", i, av[i], bv[(i/4)%3], got[i])
			}
		}
	})
}

// TestCompareSubnormal: on cpu, which keeps subnormals, they compare as
// what they are.
func TestCompareSubnormal(t *testing.T) {
	dev := open(t)
	tiny := float32(math.SmallestNonzeroFloat32)
	got, err := Greater(dev.Tensor([]float32{tiny, 2 * tiny, -tiny, tiny}, 4), dev.Tensor([]float32{0, tiny, 0, -tiny}, 4)).Data()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []float32{1, 1, 0, 1}) {
		t.Errorf("Greater on subnormals: %v, want [1 1 0 1]", got)
	}
}

func TestCompareNoGradient(t *testing.T) {
	dev := open(t)
	x := dev.Param([]float32{1, -2, 3}, 3)
	y := dev.Param([]float32{0, 0, 5}, 3)
	for _, op := range compareOps {
		if m := op.f(x, y); m.RequiresGrad() {
			t.Errorf("%s requires grad", op.name)
		}
	}
	if ArgMax(x, 0, false).RequiresGrad() || ArgMin(x, 0, false).RequiresGrad() {
		t.Errorf("ArgMax or ArgMin requires grad")
	}
	// A loss through a mask and Where: the mask contributes nothing.
	loss := Sum(Mul(Where(Greater(x, y), x, y), Greater(x, y)))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	gx, _ := x.Grad().Data()
	gy, _ := y.Grad().Data()
	if !slices.Equal(gx, []float32{1, 0, 0}) || !slices.Equal(gy, []float32{0, 0, 0}) {
		t.Errorf("gradients %v and %v, want [1 0 0] and [0 0 0]", gx, gy)
	}
}

// bitsEqual: NaN matches NaN; otherwise equal values, and on cpu the same
// sign of zero (GPUs may change it, see backend.Op).
func bitsEqual(dev *Device, got, want float32) bool {
	if got != got || want != want {
		return got != got && want != want
	}
	if dev.Name() == "cpu" && got == 0 && want == 0 {
		return math.Signbit(float64(got)) == math.Signbit(float64(want))
	}
	return got == want
}

func TestWhere(t *testing.T) {
	nan, inf := float32(nan64), float32(inf64)
	nz := float32(negZ64)
	cond := []float32{1, 0, nz, nan, -3, 0.5, 0, 1, 0, 1}
	a := []float32{1, 2, 3, 4, nz, inf, nan, -inf, 9, 0}
	b := []float32{inf, nan, -inf, 0, 5, 6, nz, 8, 0, nan}
	want := []float32{1, nan, -inf, 4, nz, inf, nz, -inf, 0, 0}
	eachDevice(t, func(t *testing.T, dev *Device) {
		got, err := Where(dev.Tensor(cond, 10), dev.Tensor(a, 10), dev.Tensor(b, 10)).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !bitsEqual(dev, got[i], want[i]) {
				t.Errorf("Where(%g, %g, %g) = %g, want %g", cond[i], a[i], b[i], got[i], want[i])
			}
		}
		// Broadcast: cond [3 1], a [4], b a scalar.
		y := Where(dev.Tensor([]float32{1, 0, 1}, 3, 1), dev.Tensor([]float32{1, 2, 3, 4}, 4), dev.Full(-1))
		got, err = y.Data()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(y.Shape(), []int{3, 4}) || !slices.Equal(got, []float32{1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4}) {
			t.Errorf("Where broadcast: %v %v", y.Shape(), got)
		}
		// Gradients go to the selected side only, whatever the other
		// side and the upstream gradient hold.
		c := dev.Tensor([]float32{1, 0, 1, 0, 1, 0}, 6)
		pa := dev.Param([]float32{2, inf, nan, 1, -inf, 3}, 6)
		pb := dev.Param([]float32{nan, 4, inf, -inf, 5, 6}, 6)
		up := dev.Tensor([]float32{10, 20, 30, 40, nan, 60}, 6)
		if err := Sum(Mul(Where(c, pa, pb), up)).Backward(); err != nil {
			t.Fatal(err)
		}
		ga, err := pa.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := pb.Grad().Data()
		wantA := []float32{10, 0, 30, 0, nan, 0}
		wantB := []float32{0, 20, 0, 40, 0, 60}
		for i := range ga {
			if !bitsEqual(dev, ga[i], wantA[i]) && !(ga[i] == 0 && wantA[i] == 0) || !bitsEqual(dev, gb[i], wantB[i]) && !(gb[i] == 0 && wantB[i] == 0) {
				t.Errorf("Where gradients element %d: a %g b %g, want %g and %g", i, ga[i], gb[i], wantA[i], wantB[i])
			}
		}
	})
}

// argTruth is the index of the first maximum (or minimum) of xs, NaN
// counting as the extreme.
func argTruth(xs []float64, less func(a, b float64) bool) int {
	best := 0
	for i, x := range xs {
		if math.IsNaN(xs[best]) {
			break
		}
		if math.IsNaN(x) || less(xs[best], x) {
			best = i
		}
	}
	return best
}

func TestArgMaxMinMaxAxis(t *testing.T) {
	nan := nan64
	rows := [][]float64{
		{1, 3, 3, 2},
		{nan, 1, nan, 2},
		{1, 2, nan, 7},
		{-inf64, -inf64, -inf64, -inf64},
		{inf64, 1, inf64, -inf64},
		{negZ64, 0, -1, negZ64},
		{3e38, -3e38, math.MaxFloat32, 1},
		{-1e-3, -2e-3, -1e-3, -5},
	}
	const R, C = 8, 4
	flat := make([]float32, 0, R*C)
	for _, r := range rows {
		for _, v := range r {
			flat = append(flat, float32(v))
		}
	}
	greater := func(a, b float64) bool { return b > a }
	smaller := func(a, b float64) bool { return b < a }
	eachDevice(t, func(t *testing.T, dev *Device) {
		x := dev.Tensor(flat, R, C)
		check := func(name string, y *Tensor, shape []int, want []float32) {
			t.Helper()
			got, err := y.Data()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !slices.Equal(y.Shape(), shape) {
				t.Errorf("%s: shape %v, want %v", name, y.Shape(), shape)
			}
			for i := range want {
				if !bitsEqual(dev, got[i], want[i]) && !(got[i] == 0 && want[i] == 0) {
					t.Errorf("%s: element %d = %g, want %g", name, i, got[i], want[i])
				}
			}
		}
		var amax, amin, vmax, vmin []float32
		for _, r := range rows {
			i, j := argTruth(r, greater), argTruth(r, smaller)
			amax, amin = append(amax, float32(i)), append(amin, float32(j))
			vmax, vmin = append(vmax, float32(r[i])), append(vmin, float32(r[j]))
		}
		check("ArgMax", ArgMax(x, 1, false), []int{R}, amax)
		check("ArgMin", ArgMin(x, -1, true), []int{R, 1}, amin)
		check("MaxAxis", MaxAxis(x, 1, false), []int{R}, vmax)
		check("MinAxis", MinAxis(x, 1, false), []int{R}, vmin)
		// along axis 0 of the transpose: the same answers
		check("ArgMax axis 0", ArgMax(Transpose(x), 0, true), []int{1, R}, amax)
		check("ArgMin axis 0", ArgMin(Transpose(x), 0, false), []int{R}, amin)

		// With a gradient: the same values, and the whole upstream
		// gradient on the first maximum (minimum).
		p := dev.Param(flat, R, C)
		check("MaxAxis with grad", MaxAxis(p, 1, false), []int{R}, vmax)
		check("MinAxis with grad", MinAxis(p, 1, true), []int{R, 1}, vmin)
		for _, c := range []struct {
			name string
			f    func(*Tensor, int, bool) *Tensor
			arg  []float32
		}{{"MaxAxis", MaxAxis, amax}, {"MinAxis", MinAxis, amin}} {
			up := make([]float32, R)
			for i := range up {
				up[i] = float32(i + 1)
			}
			if err := Sum(Mul(c.f(p, 1, false), dev.Tensor(up, R))).Backward(); err != nil {
				t.Fatal(err)
			}
			g, err := p.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			p.ZeroGrad()
			for i := range R {
				for j := range C {
					want := float32(0)
					if j == int(c.arg[i]) {
						want = up[i]
					}
					if g[i*C+j] != want {
						t.Errorf("%s gradient [%d %d] = %g, want %g (row %v)", c.name, i, j, g[i*C+j], want, rows[i])
					}
				}
			}
		}
	})
}

func TestComparePanics(t *testing.T) {
	dev := open(t)
	x, y := dev.Full(1, 2, 3), dev.Full(1, 4)
	for _, c := range []struct {
		name string
		f    func()
		want []string
	}{
		{"Greater nil", func() { Greater(nil, x) }, []string{"core.Greater"}},
		{"Equal shapes", func() { Equal(x, y) }, []string{"core.Equal", "[2 3]", "[4]"}},
		{"NotEqual shapes", func() { NotEqual(y, x) }, []string{"core.NotEqual", "[4]", "[2 3]"}},
		{"LessScalar nil", func() { LessScalar(nil, 1) }, []string{"core.LessScalar"}},
		{"Where nil", func() { Where(x, nil, x) }, []string{"core.Where"}},
		{"Where shapes", func() { Where(x, y, x) }, []string{"core.Where", "[2 3]", "[4]"}},
		{"ArgMax axis", func() { ArgMax(x, 2, false) }, []string{"core.ArgMax", "axis 2", "[2 3]"}},
		{"ArgMin axis", func() { ArgMin(x, -3, false) }, []string{"core.ArgMin", "axis -3"}},
		{"ArgMax long", func() { ArgMax(dev.Full(0, 1<<24), 0, false) }, []string{"core.ArgMax", "16777216", "2^24"}},
		{"MinAxis axis", func() { MinAxis(x, 5, true) }, []string{"core.MinAxis", "axis 5"}},
		{"MaxAxis nil", func() { MaxAxis(nil, 0, true) }, []string{"core.MaxAxis"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := mustPanic(t, c.f)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("panic %q does not name %q", msg, w)
				}
			}
		})
	}
}

func ExampleWhere() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{-2, 0.5, 3, float32(math.Inf(1))}, 4)
	// x where x > 0, else 0: the infinity does not turn into NaN as
	// mask*x + (1-mask)*0 would.
	y, _ := Where(GreaterScalar(x, 0), x, dev.Full(0)).Data()
	fmt.Println(y)
	// Output: [0 0.5 3 +Inf]
}

func ExampleArgMax() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{
		1, 5, 5, 2,
		float32(math.NaN()), 1, 9, 0,
	}, 2, 4)
	i, _ := ArgMax(x, 1, false).Data() // the first maximum; a NaN counts as the maximum
	fmt.Println(i)
	// Output: [1 0]
}
