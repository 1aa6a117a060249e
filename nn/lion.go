package nn

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// Lion is the sign-momentum optimizer of Chen et al. 2023 ("Symbolic
// Discovery of Optimization Algorithms"), with decoupled weight decay:
// w = w*(1 - LR*WeightDecay) - LR*sign(Beta1*m + (1-Beta1)*g), then
// m = Beta2*m + (1-Beta2)*g. PyTorch has no Lion; this is the paper's
// algorithm, as the lion-pytorch package writes it. sign(0) is 0.
//
// Its step has the same size LR in every coordinate, so it wants a
// learning rate 3-10x smaller than AdamW's. It is a composite of two fused
// SGD ops per parameter (the weights, then the momentum, each used as an
// in-place assignment) and a few pointwise ops, with a scratch tensor the
// state file does not hold.
type Lion struct {
	LR, Beta1, Beta2, WeightDecay float32

	params  []*core.Tensor
	m       []*core.Tensor
	scratch []*core.Tensor
	t       int
}

// NewLion makes a Lion optimizer with the paper's betas 0.9, 0.99 and no
// weight decay.
func NewLion(params []*core.Tensor, lr float32) *Lion {
	return &Lion{LR: lr, Beta1: 0.9, Beta2: 0.99, params: dedupe("NewLion", params)}
}

// Step records the update of every parameter that has a gradient.
func (o *Lion) Step() error {
	if err := checkOptimizer("Lion.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

// Hyper returns [lr, beta1, beta2, weight decay].
func (o *Lion) Hyper(int) []float32 {
	return []float32{o.LR, o.Beta1, o.Beta2, o.WeightDecay}
}

// Update records the update of every parameter with a gradient: with hp
// [lr, 0, wd] the fused SGD op computes w - lr*(sign(c) + wd*w), the
// decoupled decay; with [1, 0, 1-b2] and d = -(1-b2)*g it assigns
// m - (d + (1-b2)*m) = b2*m + (1-b2)*g to m. The direction c reads the
// old m: it is recorded before m's update.
func (o *Lion) Update(hp, scale *core.Tensor) error {
	if hp.Len() != 4 {
		return fmt.Errorf("nn.Lion.Update: %d hyperparameters, want 4", hp.Len())
	}
	if _, err := o.State(); err != nil {
		return err
	}
	dev := hp.Device()
	at := func(i int) *core.Tensor { return core.SliceRows(hp, i, 1) }
	one, zero := dev.Full(1, 1), dev.Full(0, 1)
	b1, b1c, b2c := at(1), core.Affine(at(1), -1, 1), core.Affine(at(2), -1, 1)
	hpW := core.Concat(0, at(0), zero, at(3))
	hpM := core.Concat(0, one, zero, b2c)
	for i, p := range o.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		g = scaled(g, scale)
		m := o.m[i]
		c := core.Add(core.Mul(b1, m), core.Mul(b1c, g))
		core.SGDUpdate(p, core.Sign(c), o.scratch[i], hpW)
		core.SGDUpdate(m, core.Neg(core.Mul(b2c, g)), o.scratch[i], hpM)
	}
	return nil
}

// State returns the momenta, one per parameter.
func (o *Lion) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.Lion: no parameters")
	}
	if o.m == nil {
		m, err := zerosLike("Lion", o.params)
		if err != nil {
			return nil, err
		}
		scratch, err := zerosLike("Lion", o.params)
		if err != nil {
			return nil, err
		}
		o.m, o.scratch = m, scratch
	}
	return o.m, nil
}

// StateSlots is ["exp_avg"].
func (o *Lion) StateSlots() []string { return []string{"exp_avg"} }

// ZeroGrad drops the gradients.
func (o *Lion) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *Lion) Params() []*core.Tensor { return o.params }

// Kind is "lion".
func (o *Lion) Kind() string { return "lion" }

// Hyperparameters returns lr, beta1, beta2 and weight_decay.
func (o *Lion) Hyperparameters() map[string]float64 {
	return map[string]float64{"lr": float64(o.LR), "beta1": float64(o.Beta1), "beta2": float64(o.Beta2), "weight_decay": float64(o.WeightDecay)}
}

// SetHyperparameters sets lr, beta1, beta2 and weight_decay.
func (o *Lion) SetHyperparameters(h map[string]float64) {
	o.LR, o.Beta1, o.Beta2, o.WeightDecay = float32(h["lr"]), float32(h["beta1"]), float32(h["beta2"]), float32(h["weight_decay"])
}

// StepCount is the number of updates made.
func (o *Lion) StepCount() int { return o.t }

// SetStepCount sets the number of updates made.
func (o *Lion) SetStepCount(t int) { o.t = t }

var _ Checkpointer = (*Lion)(nil)
