package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
)

// custom is what Custom remembers of a user op on its result: Backward
// differentiates it by calling backward, not through forward's ops.
type custom struct {
	name     string
	ins      []*Tensor // the op's inputs, as the user passed them
	backward func(ins []*Tensor, out, grad *Tensor) []*Tensor
}

// customOp is the Custom op t is the result of, or nil.
func (t *Tensor) customOp() *custom {
	if t.x == nil {
		return nil
	}
	return t.x.custom
}

// Custom returns forward(ins), recorded as one op whose gradient is given
// by backward rather than by forward's own ops, as PyTorch's
// torch.autograd.Function: a straight-through estimator (a rounding in the
// forward, the identity in the backward), a clipped or rescaled gradient,
// a gradient known in closed form that is cheaper than the forward's.
//
// forward records ops on ins, which it receives detached (Tensor.Detach):
// its ops carry no gradient of their own, so values it reads besides ins
// (parameters) get none either: pass them as inputs. backward is called by
// Backward with the inputs (as passed to Custom), the output and the
// output's gradient, and returns one gradient per input, each of that
// input's shape, recorded in core ops (nil for an input that gets none).
// Both record ops, so they work lazily, in a Capture or nn.CaptureStep
// (called once, at recording time: a replay runs the ops they recorded,
// not the Go functions, so they must not branch on values) and under
// Checkpoint. name names the op in panics and profiles.
//
// A forward that returns nil or a value of another device, or a backward
// that returns the wrong number of gradients or a gradient of the wrong
// shape, panics naming the op.
func Custom(name string, forward func(ins []*Tensor) *Tensor, backward func(ins []*Tensor, out, grad *Tensor) []*Tensor, ins ...*Tensor) *Tensor {
	fn := "Custom(" + name + ")"
	if name == "" {
		panic("core.Custom: empty name: name the op (it names it in panics and profiles)")
	}
	if forward == nil || backward == nil {
		panic(fmt.Sprintf("core.%s: nil forward or backward function", fn))
	}
	if len(ins) == 0 {
		panic(fmt.Sprintf("core.%s: no inputs", fn))
	}
	needTensors(fn, ins...)
	d := ins[0].dev
	det := make([]*Tensor, len(ins))
	for i, x := range ins {
		det[i] = detach(fn, x)
	}
	y := func() *Tensor {
		defer d.composite(name)()
		return forward(det)
	}()
	if y == nil {
		panic(fmt.Sprintf("core.%s: the forward function returned nil", fn))
	}
	if y.dev != d {
		panic(fmt.Sprintf("core.%s: the forward function returned a value on %s for inputs on %s", fn, y.dev.label(), d.label()))
	}
	// A node of its own (a view of y, no kernel), which Backward
	// differentiates through backward: y may be an input or a value forward
	// did not make.
	out := d.recordGrad(fn, backend.OpReshape, slices.Clone(y.shape), attrs{}, false, y)
	d.lock()
	defer d.mu.Unlock()
	m := d.modeOf(out.g)
	if m != nil && m.noGrad > 0 {
		return out
	}
	for _, x := range ins {
		out.requiresGrad = out.requiresGrad || x.requiresGrad
	}
	if out.requiresGrad {
		out.more().custom = &custom{name: name, ins: slices.Clone(ins), backward: backward}
	}
	return out
}

// grads calls the user's backward for node n (inputs ins, the custom's
// own or a Checkpoint's copies of them) and checks what it returns.
func (c *custom) grads(n *Tensor, ins []*Tensor, g *Tensor) []*Tensor {
	fn := "Custom(" + c.name + ")"
	gs := c.backward(slices.Clone(ins), n, g)
	if len(gs) != len(ins) {
		panic(fmt.Sprintf("core.%s: the backward function returned %d gradients for %d inputs", fn, len(gs), len(ins)))
	}
	for k, gk := range gs {
		if gk == nil {
			continue
		}
		if gk.dev != n.dev {
			panic(fmt.Sprintf("core.%s: the backward function returned gradient %d on %s for inputs on %s", fn, k, gk.dev.label(), n.dev.label()))
		}
		if !slices.Equal(gk.shape, ins[k].shape) {
			panic(fmt.Sprintf("core.%s: the backward function returned gradient %d of shape %v for input %d of shape %v", fn, k, gk.shape, k, ins[k].shape))
		}
	}
	return gs
}

// HookGrad returns x, unchanged, with a backward hook on it (PyTorch's
// Tensor.register_hook, as a new tensor rather than a change to x):
// Backward calls fn with the gradient that flows into x through the
// result, and passes on what fn returns instead (nil passes the gradient
// on unchanged), which must have x's shape. fn records ops: like any
// Backward it runs once per Backward lazily, and once per recording in a
// Capture or nn.CaptureStep, whose replays run the ops it recorded
// without calling it (reading a value there fails the step with
// ErrCapture). When x requires no gradient fn is never called.
func HookGrad(x *Tensor, fn func(grad *Tensor) *Tensor) *Tensor {
	if fn == nil {
		panic("core.HookGrad: nil hook")
	}
	return Custom("HookGrad",
		func(in []*Tensor) *Tensor { return in[0] },
		func(_ []*Tensor, _, g *Tensor) []*Tensor {
			if r := fn(g); r != nil {
				return []*Tensor{r}
			}
			return []*Tensor{g}
		}, x)
}
