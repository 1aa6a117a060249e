package core

import (
	"fmt"
	"time"

	"github.com/ag-go/ag/profile"
)

// GradOptions tunes Grad; the zero value is the defaults.
type GradOptions struct {
	// CreateGraph records the gradients with gradients of their own, as
	// PyTorch's create_graph: the returned tensors require grad, and a loss
	// built from them (a gradient penalty) differentiates through them with
	// Backward or another Grad. It implies RetainGraph. Composites whose
	// gradient is one fused op (LayerNorm, GELU, MaskedSoftmax, ...) are
	// differentiated through their decompositions then, as the backends
	// without a native lowering run them. A Checkpoint segment under y is
	// an error.
	CreateGraph bool
	// RetainGraph leaves the nodes under y differentiable again: without
	// it, as Backward, Grad marks them differentiated, and a later Backward
	// or Grad through them is an error.
	RetainGraph bool
}

// Grad returns the gradients of y (a one-element tensor) with respect to
// each of xs, as PyTorch's torch.autograd.grad: appended to the pending
// graph like Backward's, but returned rather than accumulated, so no
// leaf's Grad changes. Each x must require grad (a parameter, or a value
// computed from one); an x that y depends on only through ops without a
// gradient (OneHot, a comparison) gets zeros; one that y does not depend
// on at all is an error. The returned tensors are kept (see Keep) by the
// next run.
//
// With opt.CreateGraph they are differentiable: Backward of a loss built
// from them (loss + lambda*||dy/dx||^2) reaches the parameters through
// both. Recorded inside NoGrad, CreateGraph is an error.
func Grad(y *Tensor, xs []*Tensor, opt *GradOptions) ([]*Tensor, error) {
	if y == nil {
		return nil, fmt.Errorf("core.Grad: nil output")
	}
	if y.Len() != 1 {
		return nil, fmt.Errorf("core.Grad: output of shape %v: want one element", y.shape)
	}
	if len(xs) == 0 {
		return nil, fmt.Errorf("core.Grad: no inputs")
	}
	var o GradOptions
	if opt != nil {
		o = *opt
	}
	d := y.dev
	r := &gradRun{fn: "core.Grad", user: "Grad", stop: make(map[*Tensor]bool, len(xs)), got: map[*Tensor]*Tensor{},
		retain: o.RetainGraph || o.CreateGraph, create: o.CreateGraph}
	for i, x := range xs {
		switch {
		case x == nil:
			return nil, fmt.Errorf("core.Grad: input %d is nil", i)
		case x.dev != d:
			return nil, fmt.Errorf("core.Grad: input %d is on %v, the output on %v", i, x.dev, d)
		}
		r.stop[x] = true
	}
	inNoGrad := false
	m, restore := d.withMode(func(m *gmode) {
		inNoGrad = m.noGrad > 0
		if o.CreateGraph {
			m.createGraph = true
		} else {
			m.noGrad++
		}
		m.pass = profile.PassBackward
		if profiling() {
			m.timed, m.mark = true, time.Now()
		}
	})
	defer restore()
	if inNoGrad && o.CreateGraph {
		return nil, fmt.Errorf("core.Grad: CreateGraph inside NoGrad (or Backward): the gradient's graph would not be recorded")
	}
	d.lock()
	for i, x := range xs {
		if !x.requiresGrad {
			d.mu.Unlock()
			return nil, fmt.Errorf("core.Grad: input %d (%v) does not require grad: make it a parameter (Device.Param) or compute it from one", i, x)
		}
	}
	if !y.requiresGrad {
		d.mu.Unlock()
		return nil, fmt.Errorf("core.Grad: output %v does not depend on any tensor that requires grad", y)
	}
	order, err := topo(y, r)
	if err == nil {
		for i, x := range xs {
			if x.consumedGen != d.markGen || !x.gradLive {
				err = fmt.Errorf("core.Grad: output %v does not depend on input %d (%v)", y, i, x)
				break
			}
		}
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r.walk(y, order, m)
	out := make([]*Tensor, len(xs))
	for i, x := range xs {
		g := r.got[x]
		if g == nil {
			g = d.Full(0, x.shape...) // reached only through ops without a gradient
		}
		d.lock()
		g.keep = true
		d.mu.Unlock()
		out[i] = g
	}
	return out, nil
}
