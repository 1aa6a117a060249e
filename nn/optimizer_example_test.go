package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// NormSGD is an optimizer written outside package nn: plain SGD on the
// gradient divided by its norm, w -= lr * g/(|g|+1e-8). Its update is
// ops of core (the normalization) plus the fused in-place SGD op with
// momentum 0; its hyperparameters travel as the usual [lr, momentum, wd]
// tensor, so CaptureStep and a changing LR need nothing more.
type NormSGD struct {
	LR     float32
	params []*core.Tensor
	vel    []*core.Tensor // SGDUpdate's velocity slot (holds the last step)
	steps  int
}

func (o *NormSGD) Params() []*core.Tensor   { return o.params }
func (o *NormSGD) ZeroGrad()                { nn.ZeroGradOf(o.params) }
func (o *NormSGD) Hyper(step int) []float32 { return []float32{o.LR, 0, 0} }
func (o *NormSGD) StepCount() int           { return o.steps }
func (o *NormSGD) SetStepCount(n int)       { o.steps = n }
func (o *NormSGD) Step() error              { return nn.DefaultStep(o) }
func (o *NormSGD) Update(hp, scale *core.Tensor) error {
	for i, p := range o.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		if scale != nil {
			g = core.Mul(g, scale)
		}
		norm := core.AddScalar(core.Sqrt(core.Sum(core.Mul(g, g))), 1e-8)
		if o.vel == nil {
			o.vel = make([]*core.Tensor, len(o.params))
		}
		if o.vel[i] == nil {
			v, err := p.Device().Zeros(p.Shape()...)
			if err != nil {
				return err
			}
			o.vel[i] = v
		}
		core.SGDUpdate(p, core.Div(g, norm), o.vel[i], hp)
	}
	return nil
}

// An optimizer of your own: implement nn.Optimizer (and nn.Checkpointer for
// state files) and it trains like the built-in ones.
func ExampleOptimizer() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	model := nn.MLP(dev, []int{1, 8, 1}, core.Tanh, rand.New(rand.NewPCG(2, 2)))
	var opt nn.Optimizer = &NormSGD{LR: 0.05, params: model.Params()}
	x := dev.Tensor([]float32{-1, 0, 1}, 3, 1)
	y := dev.Tensor([]float32{-1, 0, 1}, 3, 1)
	first, last := float32(0), float32(0)
	for step := range 100 {
		opt.ZeroGrad()
		l := nn.MSELoss(model.Forward(x), y)
		if err := l.Backward(); err != nil {
			panic(err)
		}
		if err := opt.Step(); err != nil {
			panic(err)
		}
		v, err := l.Item()
		if err != nil {
			panic(err)
		}
		if step == 0 {
			first = v
		}
		last = v
	}
	fmt.Println(last < first/10, opt.StepCount())
	// Output: true 100
}
