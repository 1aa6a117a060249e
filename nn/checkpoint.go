package nn

import "github.com/ag-go/ag/core"

// Checkpointed wraps a module so that its forward is recomputed in the
// backward instead of keeping its activations (core.Checkpoint): less
// memory, one more forward of the module per step.
type Checkpointed struct{ Module }

// Forward is core.Checkpoint of the module's Forward.
func (c Checkpointed) Forward(x *core.Tensor) *core.Tensor {
	return core.Checkpoint(c.Module.Forward, x)
}

// SetTraining passes the mode to the wrapped module.
func (c Checkpointed) SetTraining(on bool) { SetTraining(c.Module, on) }
