package nn

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestCaptureStepAccumulated: k captured micro-batches of 8/k rows give
// the parameters and mean loss of one lazy batch of 8, step after step:
// SGD (whose step scales with the gradient, so a wrong sum shows), and
// Adam with clipping in the step's one run.
func TestCaptureStepAccumulated(t *testing.T) {
	dev := openDev(t)
	const rows, in = 8, 3
	xs, ys := regression(NewRNG(4), rows, in)
	mk := func(adam bool) (Sequential, Optimizer) {
		m := MLP(dev, []int{in, 5, 1}, core.Tanh, NewRNG(1))
		if adam {
			return m, NewAdam(m.Params(), 0.05)
		}
		return m, NewSGD(m.Params(), 0.1, 0.9)
	}
	for _, k := range []int{2, 4} {
		for _, clip := range []bool{false, true} {
			whole, wholeOpt := mk(clip)
			acc, accOpt := mk(clip)
			step := CaptureStepAccumulated(accOpt, k, func(in []*core.Tensor) *core.Tensor {
				return MSELoss(acc.Forward(in[0]), in[1])
			})
			if clip {
				step.MaxGradNorm, step.OneRun = 0.05, true // small enough to clip
			}
			b := rows / k
			for range 3 {
				wholeOpt.ZeroGrad()
				l := MSELoss(whole.Forward(dev.Tensor(xs, rows, in)), dev.Tensor(ys, rows, 1))
				if err := l.Backward(); err != nil {
					t.Fatal(err)
				}
				if clip {
					if _, err := ClipGradNorm(wholeOpt, 0.05); err != nil {
						t.Fatal(err)
					}
				} else if err := wholeOpt.Step(); err != nil {
					t.Fatal(err)
				}
				want, err := l.Item()
				if err != nil {
					t.Fatal(err)
				}
				var ins []core.Input
				for i := range k {
					ins = append(ins, core.In(xs[i*b*in:(i+1)*b*in], b, in), core.In(ys[i*b:(i+1)*b], b, 1))
				}
				got, err := step.Step(ins...)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(float64(got-want)) > 1e-5*(1+math.Abs(float64(want))) {
					t.Errorf("k %d clip %t: loss %g, whole batch %g", k, clip, got, want)
				}
			}
			if clip && step.GradNorm <= 0.05 {
				t.Errorf("k %d: gradient norm %g: the test does not clip", k, step.GradNorm)
			}
			for i, p := range whole.Params() {
				a, err := p.Data()
				if err != nil {
					t.Fatal(err)
				}
				c, err := acc.Params()[i].Data()
				if err != nil {
					t.Fatal(err)
				}
				for j := range a {
					if math.Abs(float64(a[j]-c[j])) > 1e-5 {
						t.Fatalf("k %d clip %t: param %d element %d: whole batch %g, %d micro-batches %g", k, clip, i, j, a[j], k, c[j])
					}
				}
			}
		}
	}
	_, opt := mk(false)
	step := CaptureStepAccumulated(opt, 2, func(in []*core.Tensor) *core.Tensor { return core.Sum(in[0]) })
	if _, err := step.Step(core.In([]float32{1}, 1)); err == nil || !strings.Contains(err.Error(), "1 inputs for 2 micro-batches") {
		t.Errorf("1 input for 2 micro-batches: err = %v", err)
	}
}
