package nn

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// Optimizer updates parameters from their gradients. Its update is a few
// ops recorded on the device (in place, fused), so forward, backward and
// update run as one program at the next sync.
//
// The interface is open: an optimizer of your own implements these methods
// and works with Step, CaptureStep and the training loops of this package;
// implementing Checkpointer as well lets SaveState and LoadState keep its
// state. SGD and Adam are written on this same surface.
type Optimizer interface {
	// Params returns the optimized parameters.
	Params() []*core.Tensor
	// ZeroGrad drops the gradients of the optimized parameters.
	ZeroGrad()
	// Hyper returns the hyperparameters of update number step (1, 2, ...)
	// as the values Update reads from its hp tensor (for Adam: lr, the
	// betas, eps, weight decay and the two bias corrections of that step).
	// It changes nothing; Step and CaptureStep call it, then Update, then
	// SetStepCount.
	Hyper(step int) []float32
	// Update records the update of every parameter that has a gradient.
	// The hyperparameters come from hp, a tensor of Hyper's values: a
	// program input, so that a new learning rate never recompiles. Unless
	// scale is nil, every gradient is multiplied by it first (clipping).
	Update(hp, scale *core.Tensor) error
	// StepCount is the number of updates made; SetStepCount sets it.
	StepCount() int
	SetStepCount(n int)
	// Step records the next update: usually `return nn.DefaultStep(o)`.
	Step() error
}

// Checkpointer is implemented by optimizers whose state SaveState and
// LoadState write and read.
type Checkpointer interface {
	Optimizer
	// Kind names the optimizer in state files ("adam", "sgd").
	Kind() string
	// Hyperparameters returns the named hyperparameters ("lr", ...); each
	// name needs a range in SaveState's checks (see LoadState).
	Hyperparameters() map[string]float64
	// SetHyperparameters sets them (LoadState, after checking them).
	SetHyperparameters(h map[string]float64)
	// StateSlots names the per-parameter state tensors, each of its
	// parameter's shape ("m", "v" for Adam); State returns them slot by
	// slot, creating them (zeros, as the first Step would) on first use.
	StateSlots() []string
	State() ([]*core.Tensor, error)
}

// DefaultStep records o's next update: the hyperparameters of step
// StepCount()+1 as one tensor, Update, and the step count advanced.
func DefaultStep(o Optimizer) error {
	ps := o.Params()
	if len(ps) == 0 {
		return fmt.Errorf("nn: %T.Step: no parameters", o)
	}
	return stepWith(o, nil)
}

// stepWith records o's next update with the gradients multiplied by scale
// (nil: as they are): the hyperparameters of step StepCount()+1 as one
// input, then Update, in the device's update pass (core.Device.UpdatePass,
// so that a profile attributes the step's host work to the update).
func stepWith(o Optimizer, scale *core.Tensor) (err error) {
	dev := o.Params()[0].Device()
	dev.UpdatePass(func() {
		next := o.StepCount() + 1
		h := o.Hyper(next)
		if err = o.Update(dev.Tensor(h, len(h)), scale); err == nil {
			o.SetStepCount(next)
		}
	})
	return err
}

// checkOptimizer checks that o's hyperparameters are usable, where it can
// name them (Checkpointer): a NaN or negative learning rate would silently
// turn every weight NaN.
func checkOptimizer(fn string, o Optimizer) error {
	if s, ok := o.(*Scheduled); ok {
		return checkOptimizer(fn, s.Optimizer)
	}
	if c, ok := o.(Checkpointer); ok {
		if f, ok := c.(interface{ hyperInRange() bool }); ok && f.hyperInRange() {
			return nil // without making the map, at every step
		}
		// c's own hyperparameters have its names: only their values are
		// checked, unless one is out of range (checkHyper then names it).
		h := c.Hyperparameters()
		if hyperOK(h, h) {
			return nil
		}
		if err := checkHyper(c, h); err != nil {
			return fmt.Errorf("nn.%s: %w", fn, err)
		}
	}
	return nil
}

// SGD is stochastic gradient descent with momentum and (L2) weight decay:
// vel = Momentum*vel + g + WeightDecay*w; w -= LR*vel, PyTorch's formula.
// With Nesterov set, the step looks ahead along the new velocity: w -=
// LR*(g + WeightDecay*w + Momentum*vel), PyTorch's nesterov=True.
//
// Plain SGD is one fused device op per parameter. Nesterov is two of them
// (the velocity, then the weights) plus a few pointwise ops, and a scratch
// tensor of the parameter's size that the state file does not hold; a
// fused Nesterov kernel is not written (it would be a new backend op).
type SGD struct {
	LR, Momentum, WeightDecay float32
	Nesterov                  bool

	params  []*core.Tensor
	vel     []*core.Tensor
	scratch []*core.Tensor // Nesterov: the fused op's velocity slot, unused
	t       int
}

// NewSGD makes an SGD optimizer over params.
func NewSGD(params []*core.Tensor, lr, momentum float32) *SGD {
	return &SGD{LR: lr, Momentum: momentum, params: dedupe("NewSGD", params)}
}

// Step records the update of every parameter that has a gradient.
func (o *SGD) Step() error {
	if err := checkOptimizer("SGD.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

// Hyper returns [lr, momentum, weight decay]; with Nesterov, followed by
// the hyperparameters of its two fused ops: [1, 0, 1-momentum] (the
// velocity's) and [lr, 0, 0] (the weights').
func (o *SGD) Hyper(step int) []float32 { return o.HyperMomentum(step, float64(o.Momentum)) }

// HyperMomentum is Hyper with momentum m (Scheduled.Momentum).
func (o *SGD) HyperMomentum(_ int, m float64) []float32 {
	mom := float32(m)
	if o.Nesterov {
		return []float32{o.LR, mom, o.WeightDecay, 1, 0, 1 - mom, o.LR, 0, 0}
	}
	return []float32{o.LR, mom, o.WeightDecay}
}

// LRIndices are the positions of the learning rate in Hyper's values.
func (o *SGD) LRIndices() []int {
	if o.Nesterov {
		return []int{0, 6}
	}
	return []int{0}
}

// Update records the fused SGD update of every parameter with a gradient.
func (o *SGD) Update(hp, scale *core.Tensor) error {
	vel, err := o.State()
	if err != nil {
		return err
	}
	if o.Nesterov {
		return o.nesterov(hp, scale, vel)
	}
	for i, p := range o.params {
		if g := p.Grad(); g != nil {
			core.SGDUpdate(p, scaled(g, scale), vel[i], hp)
		}
	}
	return nil
}

// nesterov records, per parameter, with d = g + wd*w: vel = mu*vel + d as
// the fused SGD op on vel itself (vel -= 1*(-d + (1-mu)*vel)), then w -=
// lr*(d + mu*vel) as the fused op with momentum 0. Both write a scratch
// velocity nobody reads (0*scratch: it stays finite while the gradients
// are).
func (o *SGD) nesterov(hp, scale *core.Tensor, vel []*core.Tensor) error {
	if hp.Len() != 9 {
		return fmt.Errorf("nn.SGD.Update: Nesterov needs 9 hyperparameters, got %d", hp.Len())
	}
	if o.scratch == nil {
		s, err := zerosLike("SGD", o.params)
		if err != nil {
			return err
		}
		o.scratch = s
	}
	mu, wd := core.SliceRows(hp, 1, 1), core.SliceRows(hp, 2, 1)
	hpVel, hpW := core.SliceRows(hp, 3, 3), core.SliceRows(hp, 6, 3)
	for i, p := range o.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		d := core.Add(scaled(g, scale), core.Mul(wd, p))
		core.SGDUpdate(vel[i], core.Neg(d), o.scratch[i], hpVel)
		core.SGDUpdate(p, core.Add(d, core.Mul(mu, vel[i])), o.scratch[i], hpW)
	}
	return nil
}

// State returns the velocities, one per parameter.
func (o *SGD) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.SGD: no parameters")
	}
	if o.vel == nil {
		vel, err := zerosLike("SGD", o.params)
		if err != nil {
			return nil, err
		}
		o.vel = vel
	}
	return o.vel, nil
}

// StateSlots is ["vel"].
func (o *SGD) StateSlots() []string { return []string{"vel"} }

// ZeroGrad drops the gradients.
func (o *SGD) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *SGD) Params() []*core.Tensor { return o.params }

// Kind is "sgd".
func (o *SGD) Kind() string { return "sgd" }

// Hyperparameters returns lr, momentum and weight_decay, and nesterov (1)
// when it is on: a state file of a Nesterov SGD loads only into one.
func (o *SGD) Hyperparameters() map[string]float64 {
	h := map[string]float64{"lr": float64(o.LR), "momentum": float64(o.Momentum), "weight_decay": float64(o.WeightDecay)}
	if o.Nesterov {
		h["nesterov"] = 1
	}
	return h
}

// SetHyperparameters sets lr, momentum and weight_decay.
func (o *SGD) SetHyperparameters(h map[string]float64) {
	o.LR, o.Momentum, o.WeightDecay = float32(h["lr"]), float32(h["momentum"]), float32(h["weight_decay"])
}

// StepCount is the number of updates made.
func (o *SGD) StepCount() int { return o.t }

// SetStepCount sets the number of updates made.
func (o *SGD) SetStepCount(t int) { o.t = t }

// Adam is Adam with decoupled weight decay (AdamW when WeightDecay > 0),
// run as one fused device op per parameter (ggml's opt_step_adamw formula).
//
// With AMSGrad set, the denominator uses the running maximum of the second
// moment (Reddi et al. 2018; PyTorch's amsgrad=True): vmax = max(vmax, v),
// w -= lr*m̂/(sqrt(vmax*bc2) + eps). That variant is a composite: four
// fused SGD ops used as in-place assignments (m, v, vmax, then w) and a few
// pointwise ops, with one scratch tensor per parameter besides the three
// moments; a fused AMSGrad kernel is not written (a new backend op).
//
// With L2 set, WeightDecay is coupled instead, PyTorch's Adam(weight_decay):
// g = grad + WeightDecay*w goes into the moments, and the weights are not
// decayed apart (the fused op, with its own decay 0, and one Add more).
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	AMSGrad, L2                        bool

	params        []*core.Tensor
	m, v          []*core.Tensor
	vmax, scratch []*core.Tensor // AMSGrad
	t             int
}

// NewAdam makes an Adam optimizer with betas 0.9, 0.999 and eps 1e-8.
func NewAdam(params []*core.Tensor, lr float32) *Adam {
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, params: dedupe("NewAdam", params)}
}

// NewAdamL2 is NewAdam with coupled (L2) weight decay wd: PyTorch's
// torch.optim.Adam(params, lr, weight_decay=wd).
func NewAdamL2(params []*core.Tensor, lr, wd float32) *Adam {
	a := NewAdam(params, lr)
	a.WeightDecay, a.L2 = wd, true
	return a
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
	if err := checkOptimizer("Adam.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

// Hyper returns [lr, beta1, beta2, eps, weight decay, 1/(1-beta1^t),
// 1/(1-beta2^t)] for step t; with L2, the decoupled decay (index 4) is 0
// and the L2 decay follows as an 8th value.
func (o *Adam) Hyper(t int) []float32 { return o.HyperMomentum(t, float64(o.Beta1)) }

// HyperMomentum is Hyper with beta1 = m (Scheduled.Momentum), the first
// bias correction 1/(1-m^t) with it, as PyTorch's Adam computes it from
// the beta1 of the step (OneCycleLR changes it every step).
func (o *Adam) HyperMomentum(t int, m float64) []float32 {
	bc1 := 1 / (1 - math.Pow(m, float64(t)))
	bc2 := 1 / (1 - math.Pow(float64(o.Beta2), float64(t)))
	if o.L2 {
		return []float32{o.LR, float32(m), o.Beta2, o.Eps, 0, float32(bc1), float32(bc2), o.WeightDecay}
	}
	return []float32{o.LR, float32(m), o.Beta2, o.Eps, o.WeightDecay, float32(bc1), float32(bc2)}
}

// Update records the fused AdamW update of every parameter with a gradient.
// A one-value scale (clipping) rides as the update's 8th hyperparameter,
// so the gradients are not multiplied by it first.
func (o *Adam) Update(hp, scale *core.Tensor) error {
	if o.m == nil || o.AMSGrad && o.vmax == nil { // made once: State's list is not needed here
		if _, err := o.State(); err != nil {
			return err
		}
	}
	want := 7
	if o.L2 {
		want = 8
	}
	if hp.Len() != want {
		return fmt.Errorf("nn.Adam.Update: %d hyperparameters, want %d", hp.Len(), want)
	}
	grad := func(p *core.Tensor) *core.Tensor { return scaled(p.Grad(), scale) }
	if o.L2 {
		// g = scale*grad + wd*w: the decay is not clipped (PyTorch clips
		// .grad before the optimizer adds it), so scale is applied here.
		wd, sc := core.SliceRows(hp, 7, 1), scale
		hp, scale = core.SliceRows(hp, 0, 7), nil
		grad = func(p *core.Tensor) *core.Tensor { return core.Add(scaled(p.Grad(), sc), core.Mul(wd, p)) }
	}
	if o.AMSGrad {
		return o.amsgrad(hp, grad)
	}
	if scale != nil && scale.Len() == 1 {
		// The fused update takes the scale as its 8th hyperparameter: one
		// concat per step instead of a product per gradient.
		hp, scale = core.Concat(0, hp, core.Reshape(scale, 1)), nil
	}
	for i, p := range o.params {
		if p.Grad() != nil {
			core.AdamWUpdate(p, grad(p), o.m[i], o.v[i], hp)
		}
	}
	return nil
}

// amsgrad records the AMSGrad update: with G the scaled gradient, the fused
// SGD op with momentum 0 and hp [1, 0, k] assigns x - (d + k*x) to x, so
// d = -(1-b1)*G and k = 1-b1 give m = b1*m + (1-b1)*G, likewise v, and
// d = -relu(v - vmax), k = 0 give vmax = max(vmax, v); the weights take
// hp [lr, 0, wd]: w = w - lr*(step + wd*w), AdamW's decoupled decay.
// grad gives G of a parameter that has a gradient.
func (o *Adam) amsgrad(hp *core.Tensor, grad func(p *core.Tensor) *core.Tensor) error {
	dev := hp.Device()
	at := func(i int) *core.Tensor { return core.SliceRows(hp, i, 1) }
	one, zero := dev.Full(1, 1), dev.Full(0, 1)
	b1c, b2c := core.Affine(at(1), -1, 1), core.Affine(at(2), -1, 1) // 1-b1, 1-b2
	hpM := core.Concat(0, one, zero, b1c)
	hpV := core.Concat(0, one, zero, b2c)
	hpMax := core.Concat(0, one, zero, zero)
	hpW := core.Concat(0, at(0), zero, at(4))
	eps, bc1, bc2 := at(3), at(5), at(6)
	for i, p := range o.params {
		if p.Grad() == nil {
			continue
		}
		g := grad(p)
		m, v, vmax, s := o.m[i], o.v[i], o.vmax[i], o.scratch[i]
		core.SGDUpdate(m, core.Neg(core.Mul(b1c, g)), s, hpM)
		core.SGDUpdate(v, core.Neg(core.Mul(b2c, core.Mul(g, g))), s, hpV)
		core.SGDUpdate(vmax, core.Neg(core.ReLU(core.Sub(v, vmax))), s, hpMax)
		step := core.Div(core.Mul(m, bc1), core.Add(core.Sqrt(core.Mul(vmax, bc2)), eps))
		core.SGDUpdate(p, step, s, hpW)
	}
	return nil
}

// State returns the first moments, then the second moments (then, with
// AMSGrad, their running maxima).
func (o *Adam) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.Adam: no parameters")
	}
	if o.m == nil {
		m, err := zerosLike("Adam", o.params)
		if err != nil {
			return nil, err
		}
		v, err := zerosLike("Adam", o.params)
		if err != nil {
			return nil, err
		}
		o.m, o.v = m, v
	}
	st := append(append([]*core.Tensor(nil), o.m...), o.v...)
	if !o.AMSGrad {
		return st, nil
	}
	if o.vmax == nil {
		vmax, err := zerosLike("Adam", o.params)
		if err != nil {
			return nil, err
		}
		scratch, err := zerosLike("Adam", o.params)
		if err != nil {
			return nil, err
		}
		o.vmax, o.scratch = vmax, scratch
	}
	return append(st, o.vmax...), nil
}

// StateSlots is ["m", "v"], and "vmax" with AMSGrad.
func (o *Adam) StateSlots() []string {
	if o.AMSGrad {
		return []string{"m", "v", "vmax"}
	}
	return []string{"m", "v"}
}

// ZeroGrad drops the gradients.
func (o *Adam) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *Adam) Params() []*core.Tensor { return o.params }

// Kind is "adam".
func (o *Adam) Kind() string { return "adam" }

// Hyperparameters returns lr, beta1, beta2, eps and weight_decay, and
// amsgrad (1) and l2 (1) when they are on.
func (o *Adam) Hyperparameters() map[string]float64 {
	h := map[string]float64{"lr": float64(o.LR), "beta1": float64(o.Beta1), "beta2": float64(o.Beta2),
		"eps": float64(o.Eps), "weight_decay": float64(o.WeightDecay)}
	if o.AMSGrad {
		h["amsgrad"] = 1
	}
	if o.L2 {
		h["l2"] = 1
	}
	return h
}

// hyperInRange reports whether every value Hyperparameters returns is in
// range (see checkOptimizer).
func (o *Adam) hyperInRange() bool {
	return hyperRange("lr", float64(o.LR)) == nil && hyperRange("beta1", float64(o.Beta1)) == nil &&
		hyperRange("beta2", float64(o.Beta2)) == nil && hyperRange("eps", float64(o.Eps)) == nil &&
		hyperRange("weight_decay", float64(o.WeightDecay)) == nil
}

// SetHyperparameters sets lr, beta1, beta2, eps and weight_decay.
func (o *Adam) SetHyperparameters(h map[string]float64) {
	o.LR, o.Beta1, o.Beta2 = float32(h["lr"]), float32(h["beta1"]), float32(h["beta2"])
	o.Eps, o.WeightDecay = float32(h["eps"]), float32(h["weight_decay"])
}

// StepCount is the number of updates made.
func (o *Adam) StepCount() int { return o.t }

// SetStepCount sets the number of updates made (the bias corrections use it).
func (o *Adam) SetStepCount(t int) { o.t = t }

var (
	_ Checkpointer = (*SGD)(nil)
	_ Checkpointer = (*Adam)(nil)
)

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

// ZeroGradOf drops the gradients of ps: the usual ZeroGrad of an optimizer.
func ZeroGradOf(ps []*core.Tensor) {
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
		if p == nil {
			panic(fmt.Sprintf("nn.%s: parameter %d is nil", fn, i))
		}
		// A frozen parameter (SetRequiresGrad(false)) is welcome: it has no
		// gradient, so no update, until it is thawed.
		if !p.IsParam() {
			panic(fmt.Sprintf("nn.%s: tensor %d (%v) is not a parameter (core.Device.Param)", fn, i, p))
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
