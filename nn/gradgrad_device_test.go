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
	for _, tc := range []struct {
		name string
		m    Module
		loss func(y *core.Tensor) *core.Tensor
	}{
		{"MLP tanh MSE", mlp(core.Tanh), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }},
		{"MLP sigmoid MSE", mlp(core.Sigmoid), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }},
		{"MLP relu MSE", mlp(core.ReLU), func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }},
		{"MLP gelu SoftmaxCrossEntropy", mlp(core.GELU), func(y *core.Tensor) *core.Tensor { return SoftmaxCrossEntropy(y, labels) }},
		{"MLP GELUErf CrossEntropyLoss", mlp(core.GELUErf), func(y *core.Tensor) *core.Tensor { return CrossEntropyLoss(y, labels, ClassOptions{}) }},
		{"LayerNorm softmax CrossEntropy", Sequential{NewLinear(dev, 3, 2, true, r), NewLayerNorm(dev, 2, 1e-5, true)},
			func(y *core.Tensor) *core.Tensor { return CrossEntropy(core.Softmax(y), core.Softmax(target)) }},
		{"RMSNorm MSE", Sequential{NewLinear(dev, 3, 2, true, r), NewRMSNorm(dev, 2, 1e-5)}, func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }},
		{"BatchNorm1d MSE", Sequential{NewLinear(dev, 3, 2, true, r), NewBatchNorm1d(dev, 2, 1e-5, 0.1, true)}, func(y *core.Tensor) *core.Tensor { return MSELoss(y, target) }},
	} {
		x := dev.Param(data(5, 3), 5, 3)
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
// with PyTorch 1.13's in float64 (testdata/make_gradpen_torch.py).
func TestGradientPenaltyTorch(t *testing.T) {
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
	real, fake := dev.Tensor(f32(gpReal), gpB, gpIn), dev.Tensor(f32(gpFake), gpB, gpIn)
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
	for step := range gpSteps {
		opt.ZeroGrad()
		x := dev.Param(xhat, gpB, gpIn)
		g, err := core.Grad(core.Sum(critic.Forward(x)), []*core.Tensor{x}, &core.GradOptions{CreateGraph: true})
		if err != nil {
			t.Fatal(err)
		}
		norm := core.Sqrt(core.SumAxis(core.Mul(g[0], g[0]), 1, false))
		pen := core.Mean(core.Pow(core.AddScalar(norm, -1), 2))
		loss := core.Add(core.Sub(core.Mean(critic.Forward(fake)), core.Mean(critic.Forward(real))), core.Scale(pen, gpLambda))
		pen.Keep()
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
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
		lv, err := loss.Item()
		if err != nil {
			t.Fatal(err)
		}
		pv, err := pen.Item()
		if err != nil {
			t.Fatal(err)
		}
		check("loss", []float32{lv}, gpLosses[step:step+1], 1e-5)
		check("penalty", []float32{pv}, gpPenalties[step:step+1], 1e-5)
	}
	for name, p := range named {
		v, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		check("final "+name, v, gpFinal[name], 1e-5)
	}
}
