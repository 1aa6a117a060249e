package nn

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// freezeData is a small regression set: 8 rows of 4 inputs, 2 targets.
func freezeData(dev *core.Device) (x, y *core.Tensor) {
	r := NewRNG(11)
	xv, yv := make([]float32, 32), make([]float32, 16)
	for i := range xv {
		xv[i] = float32(2*r.Float64() - 1)
	}
	for i := range yv {
		yv[i] = float32(2*r.Float64() - 1)
	}
	return dev.Tensor(xv, 8, 4), dev.Tensor(yv, 8, 2)
}

func values(t *testing.T, ps []*core.Tensor) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, p := range ps {
		v, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// checkFrozen fails t unless the parameters in frozen kept the values
// was0 bit for bit and have no gradient, and every other one moved away
// from was1.
func checkFrozen(t *testing.T, name string, frozen, trained []*core.Tensor, was0, was1 [][]float32) {
	t.Helper()
	for i, v := range values(t, frozen) {
		if !slices.Equal(v, was0[i]) {
			t.Errorf("%s: frozen parameter %d changed: %v -> %v", name, i, was0[i], v)
		}
		if g := frozen[i].Grad(); g != nil {
			t.Errorf("%s: frozen parameter %d has a gradient %v", name, i, g)
		}
	}
	for i, v := range values(t, trained) {
		if slices.Equal(v, was1[i]) {
			t.Errorf("%s: trained parameter %d did not change", name, i)
		}
	}
}

// A frozen first layer stays bit-identical across steps of every optimizer
// and step helper (weight decay and momentum on, so that an optimizer that
// updated it from a zero gradient would move it), lazy and captured, while
// the rest trains.
func TestFreezeFirstLayer(t *testing.T) {
	dev := openDev(t)
	x, y := freezeData(dev)
	type stepper func(m Sequential, opt Optimizer) error
	lazy := func(step func(opt Optimizer) error) stepper {
		return func(m Sequential, opt Optimizer) error {
			opt.ZeroGrad()
			if err := MSELoss(m.Forward(x), y).Backward(); err != nil {
				return err
			}
			return step(opt)
		}
	}
	plain := lazy(func(opt Optimizer) error { return opt.Step() })
	cases := []struct {
		name string
		opt  func(ps []*core.Tensor) Optimizer
		step stepper
	}{
		{"adam", func(ps []*core.Tensor) Optimizer { return NewAdam(ps, 0.05) }, plain},
		{"adamw-amsgrad", func(ps []*core.Tensor) Optimizer {
			o := NewAdamW(ps, 0.05, 0.1)
			o.AMSGrad = true
			return o
		}, plain},
		{"sgd-nesterov-wd", func(ps []*core.Tensor) Optimizer {
			o := NewSGD(ps, 0.1, 0.9)
			o.WeightDecay, o.Nesterov = 0.1, true
			return o
		}, plain},
		{"rmsprop", func(ps []*core.Tensor) Optimizer { return NewRMSprop(ps, 0.01) }, plain},
		{"groups", func(ps []*core.Tensor) Optimizer {
			return NewGroups(NewAdamW(ps[:3], 0.05, 0.1), NewSGD(ps[3:], 0.1, 0.9))
		}, plain},
		{"schedule-clip", func(ps []*core.Tensor) Optimizer {
			return WithSchedule(NewAdamW(ps, 0.05, 0.1), WarmupCosine(1, 10, 0.1))
		}, lazy(func(opt Optimizer) error { _, err := ClipGradNorm(opt, 0.5); return err })},
		{"scaler", func(ps []*core.Tensor) Optimizer { return NewAdamW(ps, 0.05, 0.1) }, func(m Sequential, opt Optimizer) error {
			opt.ZeroGrad()
			s := NewGradScaler(64)
			if err := s.Backward(MSELoss(m.Forward(x), y)); err != nil {
				return err
			}
			_, _, err := s.Step(opt, 1)
			return err
		}},
	}
	for _, c := range cases {
		for _, captured := range []bool{false, true} {
			name := fmt.Sprintf("%s/captured=%t", c.name, captured)
			if captured && c.name != "adam" && c.name != "sgd-nesterov-wd" && c.name != "groups" {
				continue
			}
			m := MLP(dev, []int{4, 8, 8, 2}, core.Tanh, NewRNG(3))
			first := m[0].Params()
			for _, p := range first {
				p.SetRequiresGrad(false)
			}
			rest := m.Params()[2:]
			opt := c.opt(m.Params()) // frozen parameters are welcome
			was0, was1 := values(t, first), values(t, rest)
			step := func() error { return c.step(m, opt) }
			if captured {
				sc := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return MSELoss(m.Forward(in[0]), in[1]) })
				xv, _ := x.Data()
				yv, _ := y.Data()
				step = func() error {
					_, err := sc.Step(core.In(xv, 8, 4), core.In(yv, 8, 2))
					return err
				}
			}
			for range 3 {
				if err := step(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			checkFrozen(t, name, first, rest, was0, was1)
		}
	}
}

// A captured step recorded with the first layer trainable is not replayed
// once it is frozen (it would update the layer), and the one recorded
// frozen is not replayed once it is thawed.
func TestFreezeAfterCapture(t *testing.T) {
	dev := openDev(t)
	x, y := freezeData(dev)
	xv, _ := x.Data()
	yv, _ := y.Data()
	m := MLP(dev, []int{4, 8, 2}, core.Tanh, NewRNG(5))
	opt := NewAdamW(m.Params(), 0.05, 0.1)
	sc := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return MSELoss(m.Forward(in[0]), in[1]) })
	step := func() {
		t.Helper()
		if _, err := sc.Step(core.In(xv, 8, 4), core.In(yv, 8, 2)); err != nil {
			t.Fatal(err)
		}
	}
	first, rest := m[0].Params(), m.Params()[2:]
	step()
	step()
	for _, p := range first {
		p.SetRequiresGrad(false)
	}
	was0, was1 := values(t, first), values(t, rest)
	step()
	step()
	checkFrozen(t, "frozen after capture", first, rest, was0, was1)
	for _, p := range first {
		p.SetRequiresGrad(true)
	}
	step()
	for i, v := range values(t, first) {
		if slices.Equal(v, was0[i]) {
			t.Errorf("thawed parameter %d did not train", i)
		}
	}
}
