package nn

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

func relClose(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Abs(want)
}

// TestOneCycleMatchesTorch compares OneCycle's rates with PyTorch's
// OneCycleLR (testdata/make_sched_torch.py), in float64 and as the float32
// rate a Scheduled optimizer uses.
func TestOneCycleMatchesTorch(t *testing.T) {
	cases := map[string]struct {
		maxLR float64
		o     OneCycleOptions
	}{
		"cos":         {0.1, OneCycleOptions{}},
		"linear":      {0.1, OneCycleOptions{Linear: true, PctStart: 0.25, DivFactor: 10, FinalDivFactor: 100}},
		"three-phase": {0.5, OneCycleOptions{ThreePhase: true, PctStart: 0.3}},
		"short":       {1.0, OneCycleOptions{PctStart: 0.5}},
	}
	if len(cases) != len(torchOneCycle) {
		t.Fatalf("%d cases, %d fixtures", len(cases), len(torchOneCycle))
	}
	dev := openDev(t)
	for name, c := range cases {
		want := torchOneCycle[name]
		s := OneCycle(len(want), c.o)
		opt := WithSchedule(NewSGD([]*core.Tensor{dev.Param([]float32{0}, 1)}, float32(c.maxLR), 0), s)
		for i, w := range want {
			if got := c.maxLR * s(i); !relClose(got, w, 1e-7) {
				t.Errorf("%s: update %d: rate %.17g, PyTorch %.17g", name, i, got, w)
			}
			// float32: the product is rounded once (2^-24 relative)
			if got := opt.LR(i + 1); !relClose(float64(got), w, 1.2e-7) {
				t.Errorf("%s: Scheduled.LR(%d) = %.9g, PyTorch %.17g", name, i+1, got, w)
			}
		}
		if got := s(len(want) + 5); got != s(len(want)) {
			t.Errorf("%s: factor after the cycle %g, want update total's %g", name, got, s(len(want)))
		}
	}
}

// TestOneCycleMomentumMatchesTorch compares OneCycleMomentum with the
// momentum PyTorch's OneCycleLR sets (testdata/make_sched_torch.py), and
// the momentum WithOneCycle puts into each update's hyperparameters.
func TestOneCycleMomentumMatchesTorch(t *testing.T) {
	cases := map[string]struct {
		adam bool
		o    OneCycleOptions
	}{
		"sgd-cos":          {false, OneCycleOptions{}},
		"adam-three-phase": {true, OneCycleOptions{ThreePhase: true, BaseMomentum: 0.8, MaxMomentum: 0.9}},
		"sgd-linear":       {false, OneCycleOptions{Linear: true, PctStart: 0.25}},
	}
	if len(cases) != len(torchOneCycleMomentum) {
		t.Fatalf("%d cases, %d fixtures", len(cases), len(torchOneCycleMomentum))
	}
	dev := openDev(t)
	for name, c := range cases {
		want := torchOneCycleMomentum[name]
		m := OneCycleMomentum(len(want), c.o)
		p := []*core.Tensor{dev.Param([]float32{0}, 1)}
		var opt Optimizer = NewSGD(p, 0.1, 0)
		if c.adam {
			opt = NewAdam(p, 0.1)
		}
		s := WithOneCycle(opt, len(want), c.o)
		for i, w := range want {
			if got := m(i); !relClose(got, w, 1e-12) {
				t.Errorf("%s: update %d: momentum %.17g, PyTorch %.17g", name, i, got, w)
			}
			if got := s.Hyper(i + 1)[1]; got != float32(m(i)) {
				t.Errorf("%s: Hyper(%d) momentum %.9g, want %.9g", name, i+1, got, float32(m(i)))
			}
		}
		if off := WithOneCycle(opt, len(want), OneCycleOptions{NoCycleMomentum: true}); off.Momentum != nil {
			t.Errorf("%s: NoCycleMomentum set a momentum schedule", name)
		}
	}
	checkPanics(t, []panicCase{
		{"no momentum", "nn.WithOneCycle: optimizer *nn.Adagrad has no momentum to cycle",
			func() {
				WithOneCycle(NewAdagrad([]*core.Tensor{dev.Param([]float32{0}, 1)}, 0.1), 10, OneCycleOptions{})
			}},
		{"base above max", "nn.OneCycleMomentum: base momentum 0.9, max momentum 0.8",
			func() { OneCycleMomentum(10, OneCycleOptions{BaseMomentum: 0.9, MaxMomentum: 0.8}) }},
		{"max 1", "want 0 <= base <= max < 1", func() { OneCycleMomentum(10, OneCycleOptions{MaxMomentum: 1}) }},
		{"total", "nn.OneCycle: total 1", func() { OneCycleMomentum(1, OneCycleOptions{}) }},
	})
	// A momentum schedule over an optimizer without one fails at Step.
	w := dev.Param([]float32{1}, 1)
	s := WithSchedule(NewAdagrad([]*core.Tensor{w}, 0.1), OneCycle(10, OneCycleOptions{}))
	s.Momentum = OneCycleMomentum(10, OneCycleOptions{})
	if err := core.Sum(core.Mul(w, w)).Backward(); err != nil {
		t.Fatal(err)
	}
	if err := s.Step(); err == nil || !strings.Contains(err.Error(), "has no momentum to set") {
		t.Errorf("Step with a momentum schedule over Adagrad: %v", err)
	}
}

// TestReduceLROnPlateauMatchesTorch feeds PyTorch's ReduceLROnPlateau
// cases the same metrics and compares the rates after each epoch.
func TestReduceLROnPlateauMatchesTorch(t *testing.T) {
	neg := make([]float64, len(plateauMetric))
	for i, m := range plateauMetric {
		neg[i] = -m
	}
	cases := map[string]struct {
		set    func(p *ReduceLROnPlateau)
		metric []float64
	}{
		"min": {func(p *ReduceLROnPlateau) { p.Patience = 2 }, plateauMetric},
		"min-abs-cooldown": {func(p *ReduceLROnPlateau) {
			p.Patience, p.Threshold, p.AbsThreshold, p.Cooldown, p.Factor = 1, 0.01, true, 2, 0.5
		}, plateauMetric},
		"max": {func(p *ReduceLROnPlateau) { p.Max, p.Patience, p.Factor = true, 2, 0.3 }, neg},
		"max-abs-minlr": {func(p *ReduceLROnPlateau) {
			p.Max, p.Patience, p.Threshold, p.AbsThreshold, p.MinLR, p.Factor = true, 0, 0.001, true, 0.004, 0.5
		}, neg},
		"rel-threshold": {func(p *ReduceLROnPlateau) { p.Patience, p.Threshold = 1, 0.05 }, plateauMetric},
	}
	if len(cases) != len(torchPlateau) {
		t.Fatalf("%d cases, %d fixtures", len(cases), len(torchPlateau))
	}
	for name, c := range cases {
		p := NewReduceLROnPlateau(0.1)
		c.set(p)
		s := p.Schedule()
		reductions := 0
		for i, m := range c.metric {
			before := p.LR()
			reduced, err := p.Step(m)
			if err != nil {
				t.Fatal(err)
			}
			if reduced != (p.LR() < before) {
				t.Errorf("%s: epoch %d: reduced %t, rate %g -> %g", name, i, reduced, before, p.LR())
			}
			if reduced {
				reductions++
			}
			if w := torchPlateau[name][i]; !relClose(p.LR(), w, 1e-12) {
				t.Errorf("%s: epoch %d (metric %g): rate %.17g, PyTorch %.17g", name, i, m, p.LR(), w)
			}
			if got := 0.1 * s(i); !relClose(got, p.LR(), 1e-15) {
				t.Errorf("%s: epoch %d: Schedule gives %g, rate %g", name, i, got, p.LR())
			}
		}
		if reductions < 2 {
			t.Errorf("%s: %d reductions: the case tests too little", name, reductions)
		}
	}
	p := NewReduceLROnPlateau(0.1)
	p.Factor = 1
	if _, err := p.Step(1); err == nil {
		t.Error("factor 1: no error")
	}
}
