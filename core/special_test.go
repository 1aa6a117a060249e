package core

import (
	"math"
	"testing"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/backend/backendtest/testenv" // every backend the special-value tests run on
)

// Special values through core, on every backend registered here (cpu,
// webgpu, and ggml-cpu / ggml-vulkan in builds with -tags ggml): a NaN input
// must give a NaN loss and NaN gradients, never finite ones, and the edge
// gradients of Pow and ReLU are the same everywhere (backend.Op's table).

var (
	nan  = math.NaN()
	pinf = math.Inf(1)
)

// eachDevice runs f on a fresh device of every registered backend,
// skipping loudly the ones this machine cannot open.
func eachDevice(t *testing.T, f func(t *testing.T, dev *Device)) {
	for _, d := range backend.Drivers() {
		t.Run(d.Name, func(t *testing.T) {
			if !d.OK {
				testenv.SkipDevice(t, d.Name, d.Why)
			}
			dev, err := Open(d.Name)
			if err != nil {
				t.Fatalf("Open(%q), available (%s): %v", d.Name, d.Why, err)
			}
			t.Cleanup(func() {
				if err := dev.Close(); err != nil {
					t.Errorf("Close(%q): %v", d.Name, err)
				}
			})
			f(t, dev)
		})
	}
}

// same reports whether got equals want: NaN matching NaN, infinities
// exactly, finite values within tol relative.
func same(got float32, want, tol float64) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		return math.IsNaN(want) && math.IsNaN(g)
	case math.IsInf(want, 0) || math.IsInf(g, 0):
		return g == want
	}
	return math.Abs(g-want) <= tol*(1+math.Abs(want))
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// TestSpecialForward checks the values issue 10 found wrong on webgpu
// (ReLU(NaN) = 0, Tanh(NaN) = -1, Clamp(NaN) = -1, a MaxAxis skipping NaN)
// and their neighbours, through core's ops.
func TestSpecialForward(t *testing.T) {
	x := []float64{nan, pinf, -pinf, 0, -2, 3}
	cases := []struct {
		name string
		f    func(x *Tensor) *Tensor
		want []float64
	}{
		{"relu", ReLU, []float64{nan, pinf, 0, 0, 0, 3}},
		{"tanh", Tanh, []float64{nan, 1, -1, 0, math.Tanh(-2), math.Tanh(3)}},
		{"sigmoid", Sigmoid, []float64{nan, 1, 0, 0.5, 1 / (1 + math.Exp(2)), 1 / (1 + math.Exp(-3))}},
		{"clamp", func(x *Tensor) *Tensor { return Clamp(x, -1, 1) }, []float64{nan, 1, -1, 0, -1, 1}},
		{"max-axis", func(x *Tensor) *Tensor { return MaxAxis(Reshape(x, 2, 3), 1, false) }, []float64{nan, 3}},
		{"softmax", func(x *Tensor) *Tensor { return Softmax(Reshape(x, 2, 3)) },
			[]float64{nan, nan, nan, 1 / (1 + math.Exp(-2) + math.Exp(3)), math.Exp(-2) / (1 + math.Exp(-2) + math.Exp(3)), math.Exp(3) / (1 + math.Exp(-2) + math.Exp(3))}},
		{"pow0", func(x *Tensor) *Tensor { return Pow(x, 0) }, []float64{1, 1, 1, 1, 1, 1}},
		{"pow0.5", func(x *Tensor) *Tensor { return Pow(x, 0.5) }, []float64{nan, pinf, nan, 0, nan, math.Sqrt(3)}},
		{"log", Log, []float64{nan, pinf, nan, -pinf, nan, math.Log(3)}},
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, c := range cases {
			got, err := c.f(dev.Tensor(f32s(x), len(x))).Data()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i, w := range c.want {
				if !same(got[i], w, 1e-5) {
					t.Errorf("%s: element %d: got %v, want %v (all: %v)", c.name, i, got[i], w, got)
				}
			}
		}
	})
}

// TestSpecialGradients checks the edge gradients, identical on every
// backend and as PyTorch gives them: d/dx x^0 = 0 everywhere (NaN and 0
// included), d/dx x^0.5 = +Inf at 0, relu' = NaN at NaN. The loss weights
// each element by w, so the gradient is w times the derivative.
func TestSpecialGradients(t *testing.T) {
	w := []float64{0.5, -2, 3, 1.5, -1, 2, 0.25}
	cases := []struct {
		name string
		x    []float64
		f    func(x *Tensor) *Tensor
		dfdx []float64
	}{
		{"pow0", []float64{nan, pinf, -pinf, 0, -2, 3, 1}, func(x *Tensor) *Tensor { return Pow(x, 0) }, []float64{0, 0, 0, 0, 0, 0, 0}},
		{"pow0.5", []float64{0, 4, 1, 0.25, 9, nan, pinf}, func(x *Tensor) *Tensor { return Pow(x, 0.5) },
			[]float64{pinf, 0.25, 0.5, 1, 1.0 / 6, nan, 0}},
		{"sqrt", []float64{0, 4, 1, 0.25, 9, nan, pinf}, Sqrt, []float64{pinf, 0.25, 0.5, 1, 1.0 / 6, nan, 0}},
		{"pow1", []float64{nan, pinf, -pinf, 0, -2, 3, 1}, func(x *Tensor) *Tensor { return Pow(x, 1) }, []float64{1, 1, 1, 1, 1, 1, 1}},
		{"pow2", []float64{nan, pinf, -pinf, 0, -2, 3, 1}, func(x *Tensor) *Tensor { return Pow(x, 2) }, []float64{nan, pinf, -pinf, 0, -4, 6, 2}},
		{"relu", []float64{nan, pinf, -pinf, 0, -2, 3, 1e-40}, ReLU, []float64{nan, 1, 0, 0, 0, 1, 1}},
		// 1 at a bound (x = -1), as PyTorch's clamp_backward.
		{"clamp", []float64{nan, pinf, -pinf, 0, -2, 0.5, -1}, func(x *Tensor) *Tensor { return Clamp(x, -1, 1) }, []float64{nan, 0, 0, 1, 0, 1, 1}},
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, c := range cases {
			x := dev.Param(f32s(c.x), len(c.x))
			loss := Sum(Mul(c.f(x), dev.Tensor(f32s(w), len(w))))
			if err := loss.Backward(); err != nil {
				t.Fatalf("%s: Backward: %v", c.name, err)
			}
			got, err := x.Grad().Data()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i, d := range c.dfdx {
				// A device may flush a subnormal x to 0 (backend.Op).
				flushed := c.x[i] != 0 && math.Abs(c.x[i]) < 0x1p-126 && got[i] == 0
				if want := w[i] * d; !same(got[i], want, 1e-5) && !flushed {
					t.Errorf("%s: d/dx at x = %v: got %v, want %v (all: %v)", c.name, c.x[i], got[i], want, got)
				}
			}
		}
	})
}

// TestNaNInputGivesNaNLoss trains a small MLP one step on a batch with a NaN
// in one input: the loss must be NaN (issue 10: webgpu gave a finite loss
// while the weights turned NaN), and so must the weights after the update,
// on every backend. The same batch without the NaN gives a finite loss.
func TestNaNInputGivesNaNLoss(t *testing.T) {
	const batch, in, hid, out = 4, 3, 5, 2
	r := func(n int, seed float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(seed + float64(i)*1.7))
		}
		return v
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, poison := range []bool{false, true} {
			w1, b1 := dev.Param(r(in*hid, 1), in, hid), dev.Param(r(hid, 2), hid)
			w2 := dev.Param(r(hid*out, 3), hid, out)
			xs := r(batch*in, 4)
			if poison {
				xs[4] = float32(nan)
			}
			x := dev.Tensor(xs, batch, in)
			y := dev.Tensor(r(batch*out, 5), batch, out)
			h := ReLU(Add(MatMul(x, w1), b1))
			pred := MatMul(Tanh(h), w2)
			d := Sub(Clamp(pred, -10, 10), y)
			loss := Add(Mean(Mul(d, d)), Scale(Sum(MaxAxis(pred, 1, false)), 0))
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*Tensor{w1, b1, w2} {
				vel, err := dev.Zeros(p.Shape()...)
				if err != nil {
					t.Fatal(err)
				}
				SGDUpdate(p, p.Grad(), vel, dev.Tensor([]float32{0.1, 0, 0}, 3))
			}
			lv, err := loss.Item()
			if err != nil {
				t.Fatal(err)
			}
			w, err := w1.Data()
			if err != nil {
				t.Fatal(err)
			}
			if poison != math.IsNaN(float64(lv)) {
				t.Errorf("NaN in the input %t: loss %v", poison, lv)
			}
			// Input row 1 holds the NaN (x[4] is row 1, column 1): every
			// weight of w1 meets it in the gradient X^T (dL/dh).
			nans := 0
			for _, v := range w {
				if math.IsNaN(float64(v)) {
					nans++
				}
			}
			if want := map[bool]int{false: 0, true: len(w)}[poison]; nans != want {
				t.Errorf("NaN in the input %t: %d of %d weights of w1 NaN after the step, want %d: %v", poison, nans, len(w), want, w)
			}
		}
	})
}
