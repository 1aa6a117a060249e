package nn

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// Groups steps each group exactly as its optimizer alone would, with a
// schedule scaling every group's rate, lazily and captured.
func TestGroups(t *testing.T) {
	dev := openDev(t)
	xs, ys := regression(NewRNG(2), 16, 4)
	type run struct {
		model Sequential
		opt   Optimizer
		a, b  Optimizer // the groups' optimizers
	}
	mk := func(grouped bool) run {
		m := MLP(dev, []int{4, 6, 1}, core.Tanh, NewRNG(8))
		var weights, biases []*core.Tensor
		for _, l := range m {
			if l, ok := l.(*Linear); ok {
				weights, biases = append(weights, l.W), append(biases, l.B)
			}
		}
		a := NewAdamW(weights, 0.02, 0.1)
		b := NewSGD(biases, 0.05, 0.9)
		r := run{model: m, a: a, b: b}
		if grouped {
			r.opt = WithSchedule(NewGroups(a, b), StepLR(2, 0.5))
		}
		return r
	}
	sched := StepLR(2, 0.5)
	for _, captured := range []bool{false, true} {
		grouped, apart := mk(true), mk(false)
		var step *StepCapture
		if captured {
			step = CaptureStep(grouped.opt, func(in []*core.Tensor) *core.Tensor {
				return MSELoss(grouped.model.Forward(in[0]), in[1])
			})
		}
		x, y := dev.Tensor(xs, 16, 4), dev.Tensor(ys, 16, 1)
		for k := range 5 {
			if captured {
				if _, err := step.Step(core.In(xs, 16, 4), core.In(ys, 16, 1)); err != nil {
					t.Fatal(err)
				}
			} else {
				grouped.opt.ZeroGrad()
				if err := MSELoss(grouped.model.Forward(x), y).Backward(); err != nil {
					t.Fatal(err)
				}
				if err := grouped.opt.Step(); err != nil {
					t.Fatal(err)
				}
			}
			// the reference: each optimizer on its own, its rate scaled by hand
			apart.a.ZeroGrad()
			apart.b.ZeroGrad()
			if err := MSELoss(apart.model.Forward(x), y).Backward(); err != nil {
				t.Fatal(err)
			}
			f := float32(sched(k))
			apart.a.(*Adam).LR, apart.b.(*SGD).LR = 0.02*f, 0.05*f
			for _, o := range []Optimizer{apart.a, apart.b} {
				if err := o.Step(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, p := range grouped.model.Params() {
			g, err := p.Data()
			if err != nil {
				t.Fatal(err)
			}
			w, err := apart.model.Params()[i].Data()
			if err != nil {
				t.Fatal(err)
			}
			for k := range g {
				if math.Abs(float64(g[k]-w[k])) > 1e-6*(1+math.Abs(float64(w[k]))) {
					t.Fatalf("captured %t: param %d element %d: grouped %g, apart %g", captured, i, k, g[k], w[k])
				}
			}
		}
		if grouped.opt.StepCount() != 5 || grouped.a.StepCount() != 5 {
			t.Errorf("step counts %d, %d; want 5", grouped.opt.StepCount(), grouped.a.StepCount())
		}
	}
}

func TestGroupsState(t *testing.T) {
	dev := openDev(t)
	mk := func(seed uint64, lr float32) (Sequential, *Groups) {
		m := MLP(dev, []int{3, 4, 2}, core.ReLU, NewRNG(seed))
		g := NewGroups(NewAdamW(m.Params()[:2], lr, 0.1), NewAdam(m.Params()[2:], lr))
		return m, g
	}
	sm, so := mk(1, 0.01)
	if err := core.Mean(sm.Forward(dev.Tensor([]float32{1, 2, 3}, 1, 3))).Backward(); err != nil {
		t.Fatal(err)
	}
	if err := so.Step(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := SaveState(&buf, sm, so); err != nil {
		t.Fatal(err)
	}
	dm, do := mk(2, 0.5)
	if err := LoadState(bytes.NewReader(buf.Bytes()), dm, do); err != nil {
		t.Fatal(err)
	}
	if d := snapshot(t, sm, so).diff(snapshot(t, dm, do)); d != "" {
		t.Errorf("after load: %s", d)
	}
	if lr := do.Group(1).(*Adam).LR; lr != 0.01 {
		t.Errorf("group 1 lr after load %g, want 0.01", lr)
	}
	// Groups of different state slots cannot be saved; the error says why.
	m := MLP(dev, []int{3, 2}, nil, NewRNG(3))
	mixed := NewGroups(NewSGD(m.Params()[:1], 0.1, 0), NewAdam(m.Params()[1:], 0.1))
	if err := SaveState(&buf, m, mixed); err == nil || !strings.Contains(err.Error(), "state slots") {
		t.Errorf("mixed groups: err = %v", err)
	}
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "nn.NewGroups: parameter") {
			t.Errorf("a parameter in two groups: panic %q", r)
		}
	}()
	NewGroups(NewSGD(m.Params(), 0.1, 0), NewSGD(m.Params()[:1], 0.1, 0))
}
