package nn

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/core"
)

// Adagrad scales each gradient by the inverse root of the sum of all its
// past squares (Duchi et al. 2011), as PyTorch's Adagrad: with g = grad +
// WeightDecay*w (L2 decay), sum += g^2 and w -= lr_t*g/(sqrt(sum) + Eps),
// where lr_t = LR/(1 + (t-1)*LRDecay) at update t. The sums start at
// InitialAccumulator.
//
// It is a composite of two fused SGD ops per parameter (the sum, then the
// weights, each used as an in-place assignment) and a few pointwise ops;
// the SGD op's velocity slot is a scratch tensor the state file does not
// hold.
type Adagrad struct {
	LR, LRDecay, WeightDecay, InitialAccumulator, Eps float32

	params  []*core.Tensor
	sum     []*core.Tensor
	scratch []*core.Tensor
	t       int
}

// NewAdagrad makes an Adagrad optimizer with PyTorch's defaults: no
// learning-rate decay, no weight decay, sums starting at 0, eps 1e-10.
func NewAdagrad(params []*core.Tensor, lr float32) *Adagrad {
	return &Adagrad{LR: lr, Eps: 1e-10, params: dedupe("NewAdagrad", params)}
}

// Step records the update of every parameter that has a gradient.
func (o *Adagrad) Step() error {
	if err := checkOptimizer("Adagrad.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

// Hyper returns [lr_t, weight decay, eps] for update t, lr_t = LR/(1 +
// (t-1)*LRDecay) (computed on the host in float64, as PyTorch does).
func (o *Adagrad) Hyper(t int) []float32 {
	clr := float64(o.LR) / (1 + float64(t-1)*float64(o.LRDecay))
	return []float32{float32(clr), o.WeightDecay, o.Eps}
}

// Update records the update of every parameter with a gradient.
func (o *Adagrad) Update(hp, scale *core.Tensor) error {
	if hp.Len() != 3 {
		return fmt.Errorf("nn.Adagrad.Update: %d hyperparameters, want 3", hp.Len())
	}
	if _, err := o.State(); err != nil {
		return err
	}
	dev := hp.Device()
	one, zero := dev.Full(1, 1), dev.Full(0, 1)
	hpSum := core.Concat(0, one, zero, zero) // x -= d: an in-place x - d
	hpW := core.Concat(0, core.SliceRows(hp, 0, 1), zero, zero)
	wd, eps := core.SliceRows(hp, 1, 1), core.SliceRows(hp, 2, 1)
	for i, p := range o.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		g = core.Add(scaled(g, scale), core.Mul(wd, p))
		core.SGDUpdate(o.sum[i], core.Neg(core.Mul(g, g)), o.scratch[i], hpSum)
		core.SGDUpdate(p, core.Div(g, core.Add(core.Sqrt(o.sum[i]), eps)), o.scratch[i], hpW)
	}
	return nil
}

// State returns the sums of squared gradients, one per parameter, made
// on first use filled with InitialAccumulator.
func (o *Adagrad) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.Adagrad: no parameters")
	}
	if o.sum == nil {
		sum, err := zerosLike("Adagrad", o.params)
		if err != nil {
			return nil, err
		}
		scratch, err := zerosLike("Adagrad", o.params)
		if err != nil {
			return nil, err
		}
		if v := o.InitialAccumulator; v != 0 {
			for i, s := range sum {
				if err := s.WriteAt(0, slices.Repeat([]float32{v}, s.Len())); err != nil {
					return nil, fmt.Errorf("nn.Adagrad: initial accumulator of parameter %d: %w", i, err)
				}
			}
		}
		o.sum, o.scratch = sum, scratch
	}
	return o.sum, nil
}

// StateSlots is ["sum"].
func (o *Adagrad) StateSlots() []string { return []string{"sum"} }

// ZeroGrad drops the gradients.
func (o *Adagrad) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *Adagrad) Params() []*core.Tensor { return o.params }

// Kind is "adagrad".
func (o *Adagrad) Kind() string { return "adagrad" }

// Hyperparameters returns lr, lr_decay, weight_decay,
// initial_accumulator_value and eps.
func (o *Adagrad) Hyperparameters() map[string]float64 {
	return map[string]float64{"lr": float64(o.LR), "lr_decay": float64(o.LRDecay), "weight_decay": float64(o.WeightDecay),
		"initial_accumulator_value": float64(o.InitialAccumulator), "eps": float64(o.Eps)}
}

// SetHyperparameters sets lr, lr_decay, weight_decay,
// initial_accumulator_value and eps.
func (o *Adagrad) SetHyperparameters(h map[string]float64) {
	o.LR, o.LRDecay, o.WeightDecay = float32(h["lr"]), float32(h["lr_decay"]), float32(h["weight_decay"])
	o.InitialAccumulator, o.Eps = float32(h["initial_accumulator_value"]), float32(h["eps"])
}

// StepCount is the number of updates made.
func (o *Adagrad) StepCount() int { return o.t }

// SetStepCount sets the number of updates made (lr_t uses it).
func (o *Adagrad) SetStepCount(t int) { o.t = t }

var _ Checkpointer = (*Adagrad)(nil)
