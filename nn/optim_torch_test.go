package nn

import (
	"bytes"
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// torchOptimCases make the optimizers of torchOptimFinal (see
// testdata/make_optim_torch.py) with the same hyperparameters.
var torchOptimCases = map[string]func(p []*core.Tensor) Optimizer{
	"adagrad": func(p []*core.Tensor) Optimizer {
		o := NewAdagrad(p, 0.1)
		o.LRDecay, o.WeightDecay, o.InitialAccumulator = 0.05, 0.02, 0.1
		return o
	},
	"adam-l2": func(p []*core.Tensor) Optimizer { return NewAdamL2(p, 0.05, 0.1) },
	"adam-l2-amsgrad": func(p []*core.Tensor) Optimizer {
		o := NewAdamL2(p, 0.05, 0.1)
		o.AMSGrad = true
		return o
	},
	"adamw": func(p []*core.Tensor) Optimizer { return NewAdamW(p, 0.05, 0.1) },
	"rmsprop": func(p []*core.Tensor) Optimizer {
		o := NewRMSprop(p, 0.01)
		o.WeightDecay = 0.02
		return o
	},
	"rmsprop-momentum": func(p []*core.Tensor) Optimizer {
		o := NewRMSprop(p, 0.01)
		o.Alpha, o.WeightDecay, o.Momentum = 0.9, 0.02, 0.8
		return o
	},
	"rmsprop-centered": func(p []*core.Tensor) Optimizer {
		o := NewRMSprop(p, 0.01)
		o.Centered = true
		return o
	},
	"rmsprop-centered-momentum": func(p []*core.Tensor) Optimizer {
		o := NewRMSprop(p, 0.01)
		o.Alpha, o.WeightDecay, o.Momentum, o.Centered = 0.95, 0.01, 0.9, true
		return o
	},
	"lion": func(p []*core.Tensor) Optimizer {
		o := NewLion(p, 0.02)
		o.WeightDecay = 0.1
		return o
	},
	"adamw-onecycle": func(p []*core.Tensor) Optimizer {
		return WithOneCycle(NewAdamW(p, 0.05, 0.1), 8, OneCycleOptions{})
	},
	"sgd-nesterov-onecycle": func(p []*core.Tensor) Optimizer {
		o := NewSGD(p, 0.05, 0.9)
		o.Nesterov = true
		return WithOneCycle(o, 8, OneCycleOptions{PctStart: 0.4, BaseMomentum: 0.8, MaxMomentum: 0.9, Linear: true})
	},
}

var optimGoldenW0 = []float64{0.5, -0.3, 1.2, 0.0, -2.0, 0.8}

// quadCoef is quadLoss's linear coefficient at step k (0, 1, ...).
func quadCoef(n, k int) []float32 {
	cs := make([]float32, n)
	for i := range cs {
		cs[i] = float32(float64(i+1) * float64(1-2*(i%2)) * 0.5)
		if k >= 3 {
			cs[i] = float32(float64(cs[i]) * 0.1)
		}
	}
	return cs
}

// trainQuad makes steps updates of opt on quadLoss from step from on,
// lazily or through CaptureStep.
func trainQuad(t *testing.T, w *core.Tensor, opt Optimizer, from, steps int, captured bool) {
	t.Helper()
	var step *StepCapture
	if captured {
		step = CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
			return core.Add(core.Sum(core.Mul(w, in[0])), core.Scale(core.Sum(core.Mul(w, w)), 0.35))
		})
	}
	for k := from; k < from+steps; k++ {
		if captured {
			if _, err := step.Step(core.In(quadCoef(w.Len(), k), w.Len())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		opt.ZeroGrad()
		if err := quadLoss(w, k).Backward(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
}

func checkTorchFinal(t *testing.T, what string, w *core.Tensor, want []float64) {
	t.Helper()
	got, err := w.Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
			t.Errorf("%s: w[%d] = %.7g, PyTorch %.7g", what, i, got[i], want[i])
		}
	}
}

// TestOptimizersMatchTorch trains each optimizer 8 steps on the quadratic
// loss, lazily, captured, and resumed from a state file after 4 steps,
// and compares the parameters with PyTorch's.
func TestOptimizersMatchTorch(t *testing.T) {
	dev := openDev(t)
	n := len(optimGoldenW0)
	if len(torchOptimFinal) != len(torchOptimCases) {
		t.Fatalf("%d fixtures, %d cases", len(torchOptimFinal), len(torchOptimCases))
	}
	for name, mk := range torchOptimCases {
		want, ok := torchOptimFinal[name]
		if !ok {
			t.Fatalf("no fixture for %s", name)
		}
		for _, captured := range []bool{false, true} {
			w := dev.Param(f32s(optimGoldenW0), n)
			trainQuad(t, w, mk([]*core.Tensor{w}), 0, 8, captured)
			checkTorchFinal(t, name+map[bool]string{false: " lazy", true: " captured"}[captured], w, want)
		}
		// 4 steps, a state file, 4 more steps by a fresh optimizer.
		w := dev.Param(f32s(optimGoldenW0), n)
		opt := mk([]*core.Tensor{w})
		trainQuad(t, w, opt, 0, 4, false)
		var buf bytes.Buffer
		if err := SaveState(&buf, Sequential{&Linear{W: w}}, opt); err != nil {
			t.Fatalf("%s: SaveState: %v", name, err)
		}
		w2 := dev.Param(make([]float32, n), n)
		opt2 := mk([]*core.Tensor{w2})
		if err := LoadState(&buf, Sequential{&Linear{W: w2}}, opt2); err != nil {
			t.Fatalf("%s: LoadState: %v", name, err)
		}
		if opt2.StepCount() != 4 {
			t.Errorf("%s: step count %d after LoadState, want 4", name, opt2.StepCount())
		}
		trainQuad(t, w2, opt2, 4, 4, true)
		checkTorchFinal(t, name+" resumed", w2, want)
	}
}
