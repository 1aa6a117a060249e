package nn

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// RMSprop divides each gradient by a running root mean square of its
// recent values (Hinton's lecture 6e), as PyTorch's RMSprop without
// momentum and not centered: v = Alpha*v + (1-Alpha)*g^2; w -= LR*g/(sqrt(v)
// + Eps), with g = grad + WeightDecay*w (L2 decay, as PyTorch's).
//
// It runs as the fused AdamW op with beta1 = 0 and no bias correction,
// which is exactly that formula (its first moment is then the gradient
// itself), so it is one device op per parameter; the op's first-moment
// slot is a scratch tensor the state file does not hold. Momentum and the
// centered variant are not provided.
type RMSprop struct {
	LR, Alpha, Eps, WeightDecay float32

	params  []*core.Tensor
	sq      []*core.Tensor // the running mean of g^2
	scratch []*core.Tensor // the fused op's first moment (= g)
	t       int
}

// NewRMSprop makes an RMSprop optimizer with PyTorch's defaults alpha 0.99
// and eps 1e-8.
func NewRMSprop(params []*core.Tensor, lr float32) *RMSprop {
	return &RMSprop{LR: lr, Alpha: 0.99, Eps: 1e-8, params: dedupe("NewRMSprop", params)}
}

// Step records the update of every parameter that has a gradient.
func (o *RMSprop) Step() error {
	if err := checkOptimizer("RMSprop.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

// Hyper returns the fused op's [lr, 0, alpha, eps, 0, 1, 1] followed by the
// L2 weight decay.
func (o *RMSprop) Hyper(int) []float32 {
	return []float32{o.LR, 0, o.Alpha, o.Eps, 0, 1, 1, o.WeightDecay}
}

// Update records the update of every parameter with a gradient.
func (o *RMSprop) Update(hp, scale *core.Tensor) error {
	if hp.Len() != 8 {
		return fmt.Errorf("nn.RMSprop.Update: %d hyperparameters, want 8", hp.Len())
	}
	if _, err := o.State(); err != nil {
		return err
	}
	fused, wd := core.SliceRows(hp, 0, 7), core.SliceRows(hp, 7, 1)
	for i, p := range o.params {
		if g := p.Grad(); g != nil {
			g = core.Add(scaled(g, scale), core.Mul(wd, p))
			core.AdamWUpdate(p, g, o.scratch[i], o.sq[i], fused)
		}
	}
	return nil
}

// State returns the running means of the squared gradients.
func (o *RMSprop) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.RMSprop: no parameters")
	}
	if o.sq == nil {
		sq, err := zerosLike("RMSprop", o.params)
		if err != nil {
			return nil, err
		}
		scratch, err := zerosLike("RMSprop", o.params)
		if err != nil {
			return nil, err
		}
		o.sq, o.scratch = sq, scratch
	}
	return o.sq, nil
}

// StateSlots is ["square_avg"].
func (o *RMSprop) StateSlots() []string { return []string{"square_avg"} }

// ZeroGrad drops the gradients.
func (o *RMSprop) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *RMSprop) Params() []*core.Tensor { return o.params }

// Kind is "rmsprop".
func (o *RMSprop) Kind() string { return "rmsprop" }

// Hyperparameters returns lr, alpha, eps and weight_decay.
func (o *RMSprop) Hyperparameters() map[string]float64 {
	return map[string]float64{"lr": float64(o.LR), "alpha": float64(o.Alpha), "eps": float64(o.Eps), "weight_decay": float64(o.WeightDecay)}
}

// SetHyperparameters sets lr, alpha, eps and weight_decay.
func (o *RMSprop) SetHyperparameters(h map[string]float64) {
	o.LR, o.Alpha, o.Eps, o.WeightDecay = float32(h["lr"]), float32(h["alpha"]), float32(h["eps"]), float32(h["weight_decay"])
}

// StepCount is the number of updates made.
func (o *RMSprop) StepCount() int { return o.t }

// SetStepCount sets the number of updates made.
func (o *RMSprop) SetStepCount(t int) { o.t = t }

var _ Checkpointer = (*RMSprop)(nil)
