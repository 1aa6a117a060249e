package nn

import "github.com/ag-go/ag/core"

// Hooked is a Module with hooks around its Forward, PyTorch's forward
// pre-hooks, forward hooks and full backward hooks as a wrapper: ag's
// modules are plain Go structs with no registry to hang hooks on. The
// wrapped module is embedded, so Params, NamedParams (the same names as
// the module's own), training modes and state files see through it.
//
// Each hook is optional; one returning nil leaves its value as it was.
// Pre is called with the input before Forward and may replace it; Post
// with the (possibly replaced) input and the output after, and may
// replace the output. GradOutput is called by Backward with the gradient
// of the module's output (after Post's replacement) and GradInput with
// the gradient of its input; each may replace the gradient it is given
// (core.HookGrad). GradInput is not called for an input that requires no
// gradient (data).
//
// Hooks are Go functions called when the ops are recorded: lazily, at
// every Forward and Backward; in a captured step (nn.CaptureStep,
// core.Capture) only while the step is recorded, and a replay runs the ops
// they recorded without calling them. A hook that records ops (scales,
// clips, adds noise) acts in every replay; a hook that keeps host state
// (counts calls, appends to a log) sees the recording only; a hook that
// reads a value (Data, Item) fails a captured step with core.ErrCapture,
// because a replay could not call it again.
type Hooked struct {
	Module
	Pre        func(x *core.Tensor) *core.Tensor
	Post       func(x, y *core.Tensor) *core.Tensor
	GradInput  func(grad *core.Tensor) *core.Tensor
	GradOutput func(grad *core.Tensor) *core.Tensor
}

// Forward runs the hooks around the module's Forward.
func (h *Hooked) Forward(x *core.Tensor) *core.Tensor {
	if h.Module == nil {
		panic("nn.Hooked.Forward: no module to hook")
	}
	if x == nil {
		panic("nn.Hooked.Forward: nil input")
	}
	if h.Pre != nil {
		if r := h.Pre(x); r != nil {
			x = r
		}
	}
	in := x
	if h.GradInput != nil {
		in = core.HookGrad(x, h.GradInput)
	}
	y := h.Module.Forward(in)
	if h.Post != nil {
		if r := h.Post(x, y); r != nil {
			y = r
		}
	}
	if h.GradOutput != nil {
		y = core.HookGrad(y, h.GradOutput)
	}
	return y
}
