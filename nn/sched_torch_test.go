package nn

import (
	"math"
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
