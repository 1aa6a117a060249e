package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestGradGradDevice checks second derivatives (core.GradGradcheck: the
// gradient of the gradient, from Grad with CreateGraph, against finite
// differences of the gradient in float64) through the layers and losses
// nn builds, on the device under test (AG_TEST_DEVICE), with respect to
// the parameters and the input together (a gradient penalty's mixed
// derivatives).
func TestGradGradDevice(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(11)
	data := func(shape ...int) []float32 {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.Float64()*2 - 1)
		}
		return v
	}
	target := dev.Tensor(data(5, 2), 5, 2)
	labels := dev.Tensor([]float32{1, 0, 1, 1, 0}, 5)
	mlp := func(act func(*core.Tensor) *core.Tensor) Module {
		return MLP(dev, []int{3, 4, 2}, act, r)
	}
	seqTarget := dev.Tensor(data(2, 3, 4), 2, 3, 4)
	for _, tc := range []struct {
		name string
		m    Module
		loss func(y *core.Tensor) *core.Tensor
		in   []int // the input's shape; nil: [5 3]
	}{
		{"MLP tanh MSE", mlp(core.Tanh), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }, nil},
		{"MLP sigmoid MSE", mlp(core.Sigmoid), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }, nil},
		{"MLP relu MSE", mlp(core.ReLU), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }, nil},
		{"MLP gelu SoftmaxCrossEntropy", mlp(core.GELU), func(y *core.Tensor) *core.Tensor { return SoftmaxCrossEntropy(y, labels) }, nil},
		{"MLP GELUErf CrossEntropyLoss", mlp(core.GELUErf), func(y *core.Tensor) *core.Tensor { return CrossEntropyLoss(y, labels, ClassOptions{}) }, nil},
		{"LayerNorm softmax CrossEntropy", Sequential{NewLinear(dev, 3, 2, true, r), NewLayerNorm(dev, 2, 1e-5, true)},
			func(y *core.Tensor) *core.Tensor { return CrossEntropy(core.Softmax(y), core.Softmax(target)) }, nil},
		{"RMSNorm MSE", Sequential{NewLinear(dev, 3, 2, true, r), NewRMSNorm(dev, 2, 1e-5)}, func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }, nil},
		{"BatchNorm1d MSE", Sequential{NewLinear(dev, 3, 2, true, r), NewBatchNorm1d(dev, 2, 1e-5, 0.1, true)}, func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }, nil},
		{"MultiHeadAttention causal MSE", NewMultiHeadAttention(dev, 4, 2, true, 0, r), func(y *core.Tensor) *core.Tensor { return MSELoss(y, seqTarget) }, []int{2, 3, 4}},
	} {
		shape := tc.in
		if shape == nil {
			shape = []int{5, 3}
		}
		x := dev.Param(data(shape...), shape...)
		params := append(tc.m.Params(), x)
		f := func() *core.Tensor { return tc.loss(tc.m.Forward(x)) }
		if err := core.GradGradcheck(f, params, &core.GradcheckOptions{Tol: 5e-3}); err != nil {
			t.Errorf("%s on %s: %v", tc.name, testDevice(), err)
		}
	}
}

// TestGradientPenaltyTorch trains a WGAN-GP critic (loss = D(fake) -
// D(real) + lambda*(||grad_x D(xhat)|| - 1)^2, the gradient by Grad with
// CreateGraph) for a few SGD steps on the device under test and compares
// losses, penalties, the first step's gradients and the final parameters
// with PyTorch 1.13's in float64 (testdata/make_gradpen_torch.py): xhat a
// parameter, a WithGrad view of data, and the same in a CaptureStep.
func TestGradientPenaltyTorch(t *testing.T) {
	for _, mode := range []string{"param", "WithGrad", "captured"} {
		t.Run(mode, func(t *testing.T) { gradientPenaltyTorch(t, mode) })
	}
}

func gradientPenaltyTorch(t *testing.T, mode string) {
	dev := openDev(t)
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	l1 := &Linear{W: dev.Param(f32(gpInit["w1"]), gpIn, gpHid), B: dev.Param(f32(gpInit["b1"]), gpHid)}
	l2 := &Linear{W: dev.Param(f32(gpInit["w2"]), gpHid, 1), B: dev.Param(f32(gpInit["b2"]), 1)}
	critic := Sequential{l1, Func(core.Tanh), l2}
	named := map[string]*core.Tensor{"w1": l1.W, "b1": l1.B, "w2": l2.W, "b2": l2.B}
	opt := NewSGD(critic.Params(), gpLR, 0)
	real, fake := f32(gpReal), f32(gpFake)
	xhat := make([]float32, len(gpReal))
	for i := range xhat {
		e := gpEps[i/gpIn]
		xhat[i] = float32(e*gpReal[i] + (1-e)*gpFake[i])
	}
	check := func(what string, got []float32, want []float64, tol float64) {
		t.Helper()
		for i := range want {
			if len(got) != len(want) || math.Abs(float64(got[i])-want[i]) > tol*(1+math.Abs(want[i])) {
				t.Errorf("%s on %s: got %v, PyTorch %v", what, testDevice(), got, want)
				return
			}
		}
	}
	var pen *core.Tensor
	loss := func(in []*core.Tensor) *core.Tensor {
		x := in[2]
		if mode != "param" {
			x = x.WithGrad()
		}
		g, err := core.Grad(core.Sum(critic.Forward(x)), []*core.Tensor{x}, &core.GradOptions{CreateGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		norm := core.Sqrt(core.SumAxis(core.Mul(g[0], g[0]), 1, false))
		pen = core.Mean(core.Pow(core.AddScalar(norm, -1), 2))
		return core.Add(core.Sub(core.Mean(critic.Forward(in[1])), core.Mean(critic.Forward(in[0]))), core.Scale(pen, gpLambda))
	}
	step := CaptureStep(opt, loss)
	for i := range gpSteps {
		if mode == "captured" {
			lv, err := step.Step(core.In(real, gpB, gpIn), core.In(fake, gpB, gpIn), core.In(xhat, gpB, gpIn))
			if err != nil {
				t.Fatal(err)
			}
			check("loss", []float32{lv}, gpLosses[i:i+1], 1e-5)
			continue
		}
		opt.ZeroGrad()
		x := dev.Tensor(xhat, gpB, gpIn)
		if mode == "param" {
			x = dev.Param(xhat, gpB, gpIn)
		}
		l := loss([]*core.Tensor{dev.Tensor(real, gpB, gpIn), dev.Tensor(fake, gpB, gpIn), x})
		pen.Keep()
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for name, p := range named {
				pg, err := p.Grad().Data()
				if err != nil {
					t.Fatal(err)
				}
				check("gradient "+name, pg, gpGrads[name], 1e-4)
			}
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		lv, err := l.Item()
		if err != nil {
			t.Fatal(err)
		}
		pv, err := pen.Item()
		if err != nil {
			t.Fatal(err)
		}
		check("loss", []float32{lv}, gpLosses[i:i+1], 1e-5)
		check("penalty", []float32{pv}, gpPenalties[i:i+1], 1e-5)
	}
	for name, p := range named {
		v, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		check("final "+name, v, gpFinal[name], 1e-5)
	}
}

// TestGradPenaltyCaptured: a loss with a penalty on its own gradient
// (Grad with CreateGraph, here with respect to the weights) trains the
// same lazily and in a CaptureStep, which records the Grad once and
// replays it, on the device under test.
func TestGradPenaltyCaptured(t *testing.T) {
	dev := openDev(t)
	xs := []float32{0.3, -1, 0.8, 0.1, -0.4, 1.2, 0.9, -0.7}
	ys := []float32{0.5, -0.2, 0.1, 0.7}
	run := func(captured bool) []float32 {
		m := Sequential{
			&Linear{W: dev.Param([]float32{0.4, -0.6, 0.2, 0.9, 0.3, -0.5}, 2, 3), B: dev.Param([]float32{0.1, 0, -0.1}, 3)},
			Func(core.Tanh),
			&Linear{W: dev.Param([]float32{0.7, -0.3, 0.5}, 3, 1), B: dev.Param([]float32{0.2}, 1)},
		}
		opt := NewSGD(m.Params(), 0.1, 0)
		loss := func(in []*core.Tensor) *core.Tensor {
			l := MSELoss(m.Forward(in[0]), in[1])
			g, err := core.Grad(l, []*core.Tensor{m[0].(*Linear).W}, &core.GradOptions{CreateGraph: true})
			if err != nil {
				t.Fatal(err)
			}
			return core.Add(l, core.Scale(core.SumSquares(g[0]), 0.5))
		}
		step := CaptureStep(opt, loss)
		for range 3 {
			if captured {
				if _, err := step.Step(core.In(xs, 4, 2), core.In(ys, 4, 1)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			opt.ZeroGrad()
			if err := loss([]*core.Tensor{dev.Tensor(xs, 4, 2), dev.Tensor(ys, 4, 1)}).Backward(); err != nil {
				t.Fatal(err)
			}
			if err := opt.Step(); err != nil {
				t.Fatal(err)
			}
		}
		v, err := m[0].(*Linear).W.Data()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	lazy, capt := run(false), run(true)
	start := []float32{0.4, -0.6, 0.2, 0.9, 0.3, -0.5}
	moved := false
	for i := range lazy {
		if math.Abs(float64(lazy[i]-capt[i])) > 1e-5 {
			t.Fatalf("on %s: lazily %v, captured %v", testDevice(), lazy, capt)
		}
		moved = moved || math.Abs(float64(lazy[i]-start[i])) > 1e-3
	}
	if !moved {
		t.Errorf("on %s: the weights %v did not move from %v", testDevice(), lazy, start)
	}
}
