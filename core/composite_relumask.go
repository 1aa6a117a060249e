package core

import "github.com/ag-go/ag/backend"

// reluMask is ReLU's derivative as PyTorch's: 1 where x > 0, +Inf and
// subnormals included, 0 where x <= 0, and NaN at NaN (x may be ReLU's
// input or its output: the mask is the same). One composite op of the IR
// (backend.OpReLUMask): ggml runs it as one sign step.
func reluMask(x *Tensor) *Tensor {
	return x.dev.record("ReLUMask", backend.OpReLUMask, x.shape, attrs{}, x)
}

// A step: its gradient is 0 almost everywhere, none flows (as PyTorch's).
var _ = defineComposite(backend.OpReLUMask, composite{
	grad: func(*Tensor, []*Tensor, *Tensor, int) *Tensor { return nil },
})
