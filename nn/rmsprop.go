package nn

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/core"
)

// RMSprop divides each gradient by a running root mean square of its
// recent values (Hinton's lecture 6e), as PyTorch's RMSprop: with g = grad
// + WeightDecay*w (L2 decay), v = Alpha*v + (1-Alpha)*g^2 and a = sqrt(v) +
// Eps; Centered subtracts the square of a running mean of g as well
// (ga = Alpha*ga + (1-Alpha)*g, a = sqrt(v - ga^2) + Eps); then w -=
// LR*g/a, or with Momentum > 0, buf = Momentum*buf + g/a and w -= LR*buf.
//
// Plain RMSprop runs as the fused AdamW op with beta1 = 0 and no bias
// correction, which is exactly that formula (its first moment is then the
// gradient itself), so it is one device op per parameter; the op's
// first-moment slot is a scratch tensor the state file does not hold. With
// Momentum or Centered it is a composite of fused SGD ops (the momentum
// buffer is the SGD op's own velocity) and a few pointwise ops.
type RMSprop struct {
	LR, Alpha, Eps, WeightDecay, Momentum float32
	Centered                              bool

	params  []*core.Tensor
	sq      []*core.Tensor // the running mean of g^2
	scratch []*core.Tensor // the fused op's first moment (= g)
	buf     []*core.Tensor // Momentum: the momentum buffer
	ga      []*core.Tensor // Centered: the running mean of g
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
// L2 weight decay and the momentum.
func (o *RMSprop) Hyper(int) []float32 {
	return []float32{o.LR, 0, o.Alpha, o.Eps, 0, 1, 1, o.WeightDecay, o.Momentum}
}

// Update records the update of every parameter with a gradient.
func (o *RMSprop) Update(hp, scale *core.Tensor) error {
	if hp.Len() != 9 {
		return fmt.Errorf("nn.RMSprop.Update: %d hyperparameters, want 9", hp.Len())
	}
	if _, err := o.State(); err != nil {
		return err
	}
	if o.Momentum != 0 || o.Centered {
		return o.composite(hp, scale)
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

// composite records the momentum or centered update: the fused SGD op
// with hp [1, 0, 1-alpha] and d = -(1-alpha)*x assigns alpha*s +
// (1-alpha)*x to s (the running means); with [lr, momentum, 0] it is
// exactly buf = momentum*buf + g/a; w -= lr*buf, the momentum buffer being
// its velocity (momentum 0: w -= lr*g/a).
func (o *RMSprop) composite(hp, scale *core.Tensor) error {
	dev := hp.Device()
	at := func(i int) *core.Tensor { return core.SliceRows(hp, i, 1) }
	one, zero := dev.Full(1, 1), dev.Full(0, 1)
	ac := core.Affine(at(2), -1, 1) // 1-alpha
	hpAvg := core.Concat(0, one, zero, ac)
	hpW := core.Concat(0, at(0), at(8), zero)
	eps, wd := at(3), at(7)
	for i, p := range o.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		g = core.Add(scaled(g, scale), core.Mul(wd, p))
		core.SGDUpdate(o.sq[i], core.Neg(core.Mul(ac, core.Mul(g, g))), o.scratch[i], hpAvg)
		v := o.sq[i]
		if o.Centered {
			core.SGDUpdate(o.ga[i], core.Neg(core.Mul(ac, g)), o.scratch[i], hpAvg)
			v = core.Sub(v, core.Mul(o.ga[i], o.ga[i]))
		}
		d := core.Div(g, core.Add(core.Sqrt(v), eps))
		vel := o.scratch[i]
		if o.Momentum != 0 {
			vel = o.buf[i]
		}
		core.SGDUpdate(p, d, vel, hpW)
	}
	return nil
}

// State returns the running means of the squared gradients, then with
// Momentum the momentum buffers, then with Centered the running means of
// the gradients.
func (o *RMSprop) State() ([]*core.Tensor, error) {
	if len(o.params) == 0 {
		return nil, fmt.Errorf("nn.RMSprop: no parameters")
	}
	mk := func(ts *[]*core.Tensor) error {
		if *ts != nil {
			return nil
		}
		z, err := zerosLike("RMSprop", o.params)
		*ts = z
		return err
	}
	if err := mk(&o.sq); err != nil {
		return nil, err
	}
	if err := mk(&o.scratch); err != nil {
		return nil, err
	}
	st := o.sq
	if o.Momentum != 0 {
		if err := mk(&o.buf); err != nil {
			return nil, err
		}
		st = append(slices.Clone(st), o.buf...)
	}
	if o.Centered {
		if err := mk(&o.ga); err != nil {
			return nil, err
		}
		st = append(slices.Clone(st), o.ga...)
	}
	return st, nil
}

// StateSlots is ["square_avg"], then "momentum_buffer" with Momentum and
// "grad_avg" with Centered (PyTorch's names).
func (o *RMSprop) StateSlots() []string {
	s := []string{"square_avg"}
	if o.Momentum != 0 {
		s = append(s, "momentum_buffer")
	}
	if o.Centered {
		s = append(s, "grad_avg")
	}
	return s
}

// ZeroGrad drops the gradients.
func (o *RMSprop) ZeroGrad() { ZeroGradOf(o.params) }

// Params returns the optimized parameters.
func (o *RMSprop) Params() []*core.Tensor { return o.params }

// Kind is "rmsprop".
func (o *RMSprop) Kind() string { return "rmsprop" }

// Hyperparameters returns lr, alpha, eps and weight_decay, momentum when
// it is not 0 and centered (1) when it is on: the state file of either
// holds more slots, so it loads only into an RMSprop of the same kind.
func (o *RMSprop) Hyperparameters() map[string]float64 {
	h := map[string]float64{"lr": float64(o.LR), "alpha": float64(o.Alpha), "eps": float64(o.Eps), "weight_decay": float64(o.WeightDecay)}
	if o.Momentum != 0 {
		h["momentum"] = float64(o.Momentum)
	}
	if o.Centered {
		h["centered"] = 1
	}
	return h
}

// SetHyperparameters sets lr, alpha, eps, weight_decay and momentum.
func (o *RMSprop) SetHyperparameters(h map[string]float64) {
	o.LR, o.Alpha, o.Eps, o.WeightDecay = float32(h["lr"]), float32(h["alpha"]), float32(h["eps"]), float32(h["weight_decay"])
	o.Momentum = float32(h["momentum"])
}

// StepCount is the number of updates made.
func (o *RMSprop) StepCount() int { return o.t }

// SetStepCount sets the number of updates made.
func (o *RMSprop) SetStepCount(t int) { o.t = t }

var _ Checkpointer = (*RMSprop)(nil)
