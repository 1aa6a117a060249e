package nn

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// hostOpt is a float64 reference of one optimizer's update, PyTorch's
// formulas written out.
type hostOpt func(w, g []float64, t int)

// quadGrad is the gradient of sum(c*w) + 0.5*a*sum(w^2), the loss the
// optimizer tests train on: c changes per step (large, then small, so
// AMSGrad's maximum matters).
func quadGrad(w []float64, step int) []float64 {
	g := make([]float64, len(w))
	for i := range w {
		c := float64(i+1) * float64(1-2*(i%2)) * 0.5
		if step >= 3 {
			c *= 0.1
		}
		g[i] = c + 0.7*w[i]
	}
	return g
}

func quadLoss(w *core.Tensor, step int) *core.Tensor {
	n := w.Len()
	c := make([]float32, n)
	for i := range c {
		c[i] = float32(float64(i+1) * float64(1-2*(i%2)) * 0.5)
		if step >= 3 {
			c[i] = float32(float64(c[i]) * 0.1)
		}
	}
	lin := core.Sum(core.Mul(w, w.Device().Tensor(c, n)))
	return core.Add(lin, core.Scale(core.Sum(core.Mul(w, w)), 0.35))
}

func TestOptimizerFormulas(t *testing.T) {
	dev := openDev(t)
	const n, steps = 6, 8
	w0 := []float64{0.5, -0.3, 1.2, 0.0, -2.0, 0.8}
	type mk func(p []*core.Tensor) Optimizer
	sgdRef := func(lr, mu, wd float64, nesterov bool) hostOpt {
		vel := make([]float64, n)
		return func(w, g []float64, _ int) {
			for i := range w {
				d := g[i] + wd*w[i]
				vel[i] = mu*vel[i] + d
				if nesterov {
					d += mu * vel[i]
				} else {
					d = vel[i]
				}
				w[i] -= lr * d
			}
		}
	}
	adamRef := func(lr, b1, b2, eps, wd float64, amsgrad bool) hostOpt {
		m, v, vmax := make([]float64, n), make([]float64, n), make([]float64, n) // vmax is v without AMSGrad
		return func(w, g []float64, t int) {
			bc1, bc2 := 1/(1-math.Pow(b1, float64(t))), 1/(1-math.Pow(b2, float64(t)))
			for i := range w {
				m[i] = b1*m[i] + (1-b1)*g[i]
				v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
				if amsgrad {
					vmax[i] = math.Max(vmax[i], v[i])
				} else {
					vmax[i] = v[i]
				}
				w[i] = w[i]*(1-lr*wd) - lr*m[i]*bc1/(math.Sqrt(vmax[i]*bc2)+eps)
			}
		}
	}
	rmsRef := func(lr, alpha, eps, wd float64) hostOpt {
		v := make([]float64, n)
		return func(w, g []float64, _ int) {
			for i := range w {
				d := g[i] + wd*w[i]
				v[i] = alpha*v[i] + (1-alpha)*d*d
				w[i] -= lr * d / (math.Sqrt(v[i]) + eps)
			}
		}
	}
	cases := []struct {
		name string
		make mk
		ref  func() hostOpt // a fresh reference per run: it has state
	}{
		{"sgd", func(p []*core.Tensor) Optimizer {
			o := NewSGD(p, 0.05, 0.9)
			o.WeightDecay = 0.01
			return o
		}, func() hostOpt { return sgdRef(0.05, 0.9, 0.01, false) }},
		{"sgd-nesterov", func(p []*core.Tensor) Optimizer {
			o := NewSGD(p, 0.05, 0.9)
			o.WeightDecay, o.Nesterov = 0.01, true
			return o
		}, func() hostOpt { return sgdRef(0.05, 0.9, 0.01, true) }},
		{"adam-amsgrad", func(p []*core.Tensor) Optimizer {
			o := NewAdamW(p, 0.05, 0.1)
			o.AMSGrad = true
			return o
		}, func() hostOpt { return adamRef(0.05, 0.9, 0.999, 1e-8, 0.1, true) }},
		{"adamw", func(p []*core.Tensor) Optimizer { return NewAdamW(p, 0.05, 0.1) },
			func() hostOpt { return adamRef(0.05, 0.9, 0.999, 1e-8, 0.1, false) }},
		{"rmsprop", func(p []*core.Tensor) Optimizer {
			o := NewRMSprop(p, 0.01)
			o.WeightDecay = 0.02
			return o
		}, func() hostOpt { return rmsRef(0.01, 0.99, 1e-8, 0.02) }},
	}
	for _, c := range cases {
		for _, captured := range []bool{false, true} {
			w := dev.Param(f32s(w0), n)
			opt := c.make([]*core.Tensor{w})
			var step *StepCapture
			if captured {
				step = CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
					return core.Add(core.Sum(core.Mul(w, in[0])), core.Scale(core.Sum(core.Mul(w, w)), 0.35))
				})
			}
			ref, update := append([]float64(nil), w0...), c.ref()
			for k := range steps {
				g := quadGrad(ref, k)
				update(ref, g, k+1)
				if captured {
					cs := make([]float32, n)
					for i := range cs {
						cs[i] = float32(float64(i+1) * float64(1-2*(i%2)) * 0.5)
						if k >= 3 {
							cs[i] = float32(float64(cs[i]) * 0.1)
						}
					}
					if _, err := step.Step(core.In(cs, n)); err != nil {
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
			got, err := w.Data()
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(float64(got[i])-ref[i]) > 2e-5*(1+math.Abs(ref[i])) {
					t.Errorf("%s (captured %t): w[%d] = %.7g after %d steps, want %.7g", c.name, captured, i, got[i], steps, ref[i])
				}
			}
		}
	}
}

func TestOptimizerHyperChecks(t *testing.T) {
	dev := openDev(t)
	p := dev.Param([]float32{1, 2}, 2)
	o := NewRMSprop([]*core.Tensor{p}, 0.01)
	o.Alpha = 1
	if err := core.Sum(p).Backward(); err != nil {
		t.Fatal(err)
	}
	if err := o.Step(); err == nil || !strings.Contains(err.Error(), `"alpha" is 1, want in [0, 1)`) {
		t.Errorf("alpha 1: err = %v", err)
	}
	// A Nesterov SGD's state loads only into a Nesterov SGD.
	m := Sequential{&Linear{W: p}}
	src := NewSGD(m.Params(), 0.1, 0.9)
	src.Nesterov = true
	var buf bytes.Buffer
	if err := SaveState(&buf, m, src); err != nil {
		t.Fatal(err)
	}
	err := LoadState(bytes.NewReader(buf.Bytes()), m, NewSGD(m.Params(), 0.1, 0.9))
	if err == nil || !strings.Contains(err.Error(), "nesterov") {
		t.Errorf("loading a Nesterov state into plain SGD: err = %v", err)
	}
	// A Scheduled optimizer saves and loads as the one it wraps.
	buf.Reset()
	if err := SaveState(&buf, m, WithSchedule(src, StepLR(1, 0.5))); err != nil {
		t.Errorf("SaveState of a Scheduled optimizer: %v", err)
	}
}
