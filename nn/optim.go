package nn

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// Optimizer updates parameters from their gradients. Step records the
// update on the device (fused, in place) as part of the pending graph, so
// forward, backward and update run as one program at the next sync.
type Optimizer interface {
	Step() error
	// ZeroGrad drops the gradients of the optimized parameters.
	ZeroGrad()
	// Params returns the optimized parameters.
	Params() []*core.Tensor

	// kind, hyper and state serve SaveState/LoadState.
	kind() string
	hyper() map[string]float64
	setHyper(map[string]float64)
	state() ([]*core.Tensor, error)
	steps() int
	setSteps(int)
	// nextHyper advances the step count and returns the hyperparameter
	// values of that step (the update op's last input).
	nextHyper() []float32
	// stepWith records the updates with hp as the hyperparameter tensor and,
	// when scale is not nil, every gradient multiplied by it (clipping).
	stepWith(hp, scale *core.Tensor) error
}

// SGD is stochastic gradient descent with momentum and (L2) weight decay:
// vel = Momentum*vel + g + WeightDecay*w; w -= LR*vel.
type SGD struct {
	LR, Momentum, WeightDecay float32

	params []*core.Tensor
	vel    []*core.Tensor
	t      int
}

// NewSGD makes an SGD optimizer over params.
func NewSGD(params []*core.Tensor, lr, momentum float32) *SGD {
	return &SGD{LR: lr, Momentum: momentum, params: dedupe("NewSGD", params)}
}

// Step records the update of every parameter that has a gradient.
func (o *SGD) Step() error {
	if err := o.ensureState(); err != nil {
		return err
	}
	if err := checkHyper(o, o.hyper()); err != nil {
		return fmt.Errorf("nn.SGD.Step: %w", err)
	}
	return o.stepWith(o.params[0].Device().Tensor(o.nextHyper(), 3), nil)
}

func (o *SGD) nextHyper() []float32 {
	o.t++
	return []float32{o.LR, o.Momentum, o.WeightDecay}
}

func (o *SGD) stepWith(hp, scale *core.Tensor) error {
	if err := o.ensureState(); err != nil {
		return err
	}
	for i, p := range o.params {
		if g := p.Grad(); g != nil {
			core.SGDUpdate(p, scaled(g, scale), o.vel[i], hp)
		}
	}
	return nil
}

func (o *SGD) ensureState() error {
	if len(o.params) == 0 {
		return fmt.Errorf("nn.SGD.Step: no parameters")
	}
	if o.vel != nil {
		return nil
	}
	vel, err := zerosLike("SGD", o.params)
	o.vel = vel
	return err
}

// ZeroGrad drops the gradients.
func (o *SGD) ZeroGrad() { zeroGrads(o.params) }

// Params returns the optimized parameters.
func (o *SGD) Params() []*core.Tensor { return o.params }

func (o *SGD) kind() string { return "sgd" }
func (o *SGD) hyper() map[string]float64 {
	return map[string]float64{"lr": float64(o.LR), "momentum": float64(o.Momentum), "weight_decay": float64(o.WeightDecay)}
}
func (o *SGD) setHyper(h map[string]float64) {
	o.LR, o.Momentum, o.WeightDecay = float32(h["lr"]), float32(h["momentum"]), float32(h["weight_decay"])
}
func (o *SGD) state() ([]*core.Tensor, error) {
	if err := o.ensureState(); err != nil {
		return nil, err
	}
	return o.vel, nil
}
func (o *SGD) steps() int     { return o.t }
func (o *SGD) setSteps(t int) { o.t = t }

// Adam is Adam with decoupled weight decay (AdamW when WeightDecay > 0),
// run as one fused device op per parameter (ggml's opt_step_adamw formula).
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32

	params []*core.Tensor
	m, v   []*core.Tensor
	t      int
}

// NewAdam makes an Adam optimizer with betas 0.9, 0.999 and eps 1e-8.
func NewAdam(params []*core.Tensor, lr float32) *Adam {
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, params: dedupe("NewAdam", params)}
}

// NewAdamW is NewAdam with decoupled weight decay wd.
func NewAdamW(params []*core.Tensor, lr, wd float32) *Adam {
	a := NewAdam(params, lr)
	a.WeightDecay = wd
	return a
}

// Step records the update of every parameter that has a gradient. The
// hyperparameters travel as one 7-float input, so changing LR between steps
// reuses the compiled program.
func (o *Adam) Step() error {
	if err := o.ensureState(); err != nil {
		return err
	}
	if err := checkHyper(o, o.hyper()); err != nil {
		return fmt.Errorf("nn.Adam.Step: %w", err)
	}
	return o.stepWith(o.params[0].Device().Tensor(o.nextHyper(), 7), nil)
}

func (o *Adam) nextHyper() []float32 {
	o.t++
	bc1 := 1 / (1 - math.Pow(float64(o.Beta1), float64(o.t)))
	bc2 := 1 / (1 - math.Pow(float64(o.Beta2), float64(o.t)))
	return []float32{o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, float32(bc1), float32(bc2)}
}

func (o *Adam) stepWith(hp, scale *core.Tensor) error {
	if err := o.ensureState(); err != nil {
		return err
	}
	for i, p := range o.params {
		if g := p.Grad(); g != nil {
			core.AdamWUpdate(p, scaled(g, scale), o.m[i], o.v[i], hp)
		}
	}
	return nil
}

func (o *Adam) ensureState() error {
	if len(o.params) == 0 {
		return fmt.Errorf("nn.Adam.Step: no parameters")
	}
	if o.m != nil {
		return nil
	}
	m, err := zerosLike("Adam", o.params)
	if err != nil {
		return err
	}
	v, err := zerosLike("Adam", o.params)
	if err != nil {
		return err
	}
	o.m, o.v = m, v
	return nil
}

// ZeroGrad drops the gradients.
func (o *Adam) ZeroGrad() { zeroGrads(o.params) }

// Params returns the optimized parameters.
func (o *Adam) Params() []*core.Tensor { return o.params }

func (o *Adam) kind() string { return "adam" }
func (o *Adam) hyper() map[string]float64 {
	return map[string]float64{"lr": float64(o.LR), "beta1": float64(o.Beta1), "beta2": float64(o.Beta2),
		"eps": float64(o.Eps), "weight_decay": float64(o.WeightDecay)}
}
func (o *Adam) setHyper(h map[string]float64) {
	o.LR, o.Beta1, o.Beta2 = float32(h["lr"]), float32(h["beta1"]), float32(h["beta2"])
	o.Eps, o.WeightDecay = float32(h["eps"]), float32(h["weight_decay"])
}
func (o *Adam) state() ([]*core.Tensor, error) {
	if err := o.ensureState(); err != nil {
		return nil, err
	}
	return append(append([]*core.Tensor(nil), o.m...), o.v...), nil
}
func (o *Adam) steps() int     { return o.t }
func (o *Adam) setSteps(t int) { o.t = t }

func scaled(g, scale *core.Tensor) *core.Tensor {
	if scale == nil {
		return g
	}
	return core.Mul(g, scale)
}

func zerosLike(who string, ps []*core.Tensor) ([]*core.Tensor, error) {
	out := make([]*core.Tensor, len(ps))
	for i, p := range ps {
		z, err := p.Device().Zeros(p.Shape()...)
		if err != nil {
			return nil, fmt.Errorf("nn.%s: optimizer state for parameter %d %v: %w", who, i, p.Shape(), err)
		}
		out[i] = z
	}
	return out, nil
}

func zeroGrads(ps []*core.Tensor) {
	for _, p := range ps {
		p.ZeroGrad()
	}
}

// dedupe drops repeated parameters (a shared layer listed twice would be
// updated twice per step) and panics on tensors that are not parameters.
func dedupe(fn string, ps []*core.Tensor) []*core.Tensor {
	seen := map[*core.Tensor]bool{}
	out := make([]*core.Tensor, 0, len(ps))
	for i, p := range ps {
		if !p.RequiresGrad() {
			panic(fmt.Sprintf("nn.%s: tensor %d (%v) does not require grad", fn, i, p))
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
