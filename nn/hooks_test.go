package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// near reports whether a and b agree to tol relative to b.
func near(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol*(1+math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}

func data(t *testing.T, x *core.Tensor) []float32 {
	t.Helper()
	v, err := x.Data()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHookedForwardAndBackward: each hook against the same model without
// it, on the device under test.
func TestHookedForwardAndBackward(t *testing.T) {
	dev := openDev(t)
	xs := []float32{0.5, -1, 2, 0.25, -0.75, 1.5}
	var runOn func(xs []float32, h func(l1, l2 *Linear) Module) (out, g1, g2 []float32)
	run := func(h func(l1, l2 *Linear) Module) (out, g1, g2 []float32) { return runOn(xs, h) }
	runOn = func(xs []float32, h func(l1, l2 *Linear) Module) (out, g1, g2 []float32) {
		r := NewRNG(3)
		l1, l2 := NewLinear(dev, 3, 4, true, r), NewLinear(dev, 4, 2, true, r)
		m := h(l1, l2)
		y := m.Forward(dev.Tensor(xs, 2, 3))
		y.Keep()
		if err := core.Sum(core.Mul(y, y)).Backward(); err != nil {
			t.Fatal(err)
		}
		return data(t, y), data(t, l1.W.Grad()), data(t, l2.W.Grad())
	}
	scaled := func(v []float32, s float32) []float32 {
		o := slices.Clone(v)
		for i := range o {
			o[i] *= s
		}
		return o
	}
	plain := func(l1, l2 *Linear) Module { return Sequential{l1, Func(core.Tanh), l2} }
	y0, a0, b0 := run(plain)
	// the output doubled by Post: values x2, gradients x4 (loss y^2)
	y, a, b := run(func(l1, l2 *Linear) Module {
		return Sequential{l1, Func(core.Tanh), &Hooked{Module: l2, Post: func(_, y *core.Tensor) *core.Tensor { return core.Scale(y, 2) }}}
	})
	if !near(y, scaled(y0, 2), 1e-6) || !near(a, scaled(a0, 4), 1e-5) || !near(b, scaled(b0, 4), 1e-5) {
		t.Errorf("Post: got %v %v %v", y, a, b)
	}
	// the gradient of l2's input tripled: l1's gradient x3, l2's unchanged
	y, a, b = run(func(l1, l2 *Linear) Module {
		return Sequential{l1, Func(core.Tanh), &Hooked{Module: l2, GradInput: func(g *core.Tensor) *core.Tensor { return core.Scale(g, 3) }}}
	})
	if !near(y, y0, 0) || !near(a, scaled(a0, 3), 1e-5) || !near(b, b0, 0) {
		t.Errorf("GradInput: got %v %v %v", y, a, b)
	}
	// the gradient of l1's output halved; a Pre hook that returns nil
	// changes nothing
	y, a, b = run(func(l1, l2 *Linear) Module {
		return Sequential{&Hooked{Module: l1, Pre: func(*core.Tensor) *core.Tensor { return nil }, GradOutput: func(g *core.Tensor) *core.Tensor { return core.Scale(g, 0.5) }}, Func(core.Tanh), l2}
	})
	if !near(y, y0, 0) || !near(a, scaled(a0, 0.5), 1e-5) || !near(b, b0, 0) {
		t.Errorf("GradOutput: got %v %v %v", y, a, b)
	}
	// Pre replaces the input: the same as feeding 2x
	y, a, b = run(func(l1, l2 *Linear) Module {
		return Sequential{&Hooked{Module: l1, Pre: func(x *core.Tensor) *core.Tensor { return core.Scale(x, 2) }}, Func(core.Tanh), l2}
	})
	y2, a2, b2 := runOn(scaled(xs, 2), plain)
	if !near(y, y2, 1e-6) || !near(a, a2, 1e-5) || !near(b, b2, 1e-5) || near(y, y0, 1e-3) {
		t.Errorf("Pre: got %v %v %v, want %v %v %v", y, a, b, y2, a2, b2)
	}
}

func TestHookedNames(t *testing.T) {
	dev := openDev(t)
	inner := Sequential{NewLinear(dev, 2, 3, true, NewRNG(1))}
	a, err := NamedParams(inner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NamedParams(&Hooked{Module: inner})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 2 {
		t.Errorf("names through Hooked %v, want the module's own %v", b, a)
	}
}

// TestHookedCaptured: in a captured step hooks run while it records; the
// ops they record act in every replay (the same weights as a lazy loop);
// a hook that reads a value is an error (core.ErrCapture).
func TestHookedCaptured(t *testing.T) {
	dev := openDev(t)
	x := []float32{0.5, -1, 2, 0.25, -0.75, 1.5}
	tgt := []float32{1, 0, -1, 0.5}
	calls := 0
	model := func() (Module, *Linear) {
		l := NewLinear(dev, 3, 2, true, NewRNG(5))
		return &Hooked{Module: l, GradOutput: func(g *core.Tensor) *core.Tensor {
			calls++
			return core.Clamp(g, -0.1, 0.1)
		}}, l
	}
	mc, lc := model()
	opt := NewSGD(mc.Params(), 0.1, 0)
	step := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return MSELoss(mc.Forward(in[0]), in[1]) })
	for range 4 {
		if _, err := step.Step(core.In(x, 2, 3), core.In(tgt, 2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if calls != step.Records() {
		t.Errorf("the hook ran %d times in 4 captured steps, want once per recording (%d)", calls, step.Records())
	}
	ml, ll := model()
	lazy := NewSGD(ml.Params(), 0.1, 0)
	for range 4 {
		lazy.ZeroGrad()
		if err := MSELoss(ml.Forward(dev.Tensor(x, 2, 3)), dev.Tensor(tgt, 2, 2)).Backward(); err != nil {
			t.Fatal(err)
		}
		if err := lazy.Step(); err != nil {
			t.Fatal(err)
		}
	}
	w0 := NewLinear(dev, 3, 2, true, NewRNG(5))
	if wc, wl := data(t, lc.W), data(t, ll.W); !near(wc, wl, 1e-6) || near(wc, data(t, w0.W), 1e-3) {
		t.Errorf("captured weights %v, lazy %v: want equal, and trained", wc, wl)
	}
	// reading a value inside a hook of a captured step
	mr := &Hooked{Module: NewLinear(dev, 3, 2, true, NewRNG(5)), Post: func(_, y *core.Tensor) *core.Tensor {
		if _, err := y.Data(); err != nil {
			panic(err)
		}
		return nil
	}}
	bad := CaptureStep(NewSGD(mr.Params(), 0.1, 0), func(in []*core.Tensor) *core.Tensor { return MSELoss(mr.Forward(in[0]), in[1]) })
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err, _ = r.(error)
			}
		}()
		_, err = bad.Step(core.In(x, 2, 3), core.In(tgt, 2, 2))
		return err
	}()
	if !errors.Is(err, core.ErrCapture) {
		t.Errorf("a hook reading a value in a captured step: error %v, want core.ErrCapture", err)
	}
}
