package nn

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// Trainable is a module with training and evaluation modes (Dropout, and
// containers that pass the mode on, like Sequential). Train and Eval set
// the mode of a whole model through it; a container of your own implements
// it by passing the mode to its children with SetTraining.
type Trainable interface {
	SetTraining(on bool)
}

// Train puts m and every module in it into training mode (dropout drops),
// the mode modules start in, as in PyTorch. It returns m.
func Train(m Module) Module {
	SetTraining(m, true)
	return m
}

// Eval puts m and every module in it into evaluation mode (dropout is the
// identity). It returns m.
func Eval(m Module) Module {
	SetTraining(m, false)
	return m
}

// SetTraining sets the mode of m when it has modes (Trainable); other
// modules have none and are left as they are.
func SetTraining(m Module, on bool) {
	if t, ok := m.(Trainable); ok {
		t.SetTraining(on)
	}
}

// SetTraining passes the mode to every module of the sequence.
func (s Sequential) SetTraining(on bool) {
	for _, m := range s {
		SetTraining(m, on)
	}
}

// Dropout is the dropout layer: in training mode it zeroes each element
// with probability P and scales the others by 1/(1-P) (core.Dropout: the
// mask is drawn on the device from its random stream, see Device.Seed, and
// the gradient goes through the same mask); in evaluation mode it is the
// identity.
//
// The mode is read when Forward records the op, through Device.Guard: a
// Capture (or StepCapture) called after Eval records the evaluation step
// once and from then on replays the recording of whichever mode the layer
// is in; in training mode each replay draws new masks.
type Dropout struct {
	P        float32
	Training bool
}

// NewDropout makes a Dropout layer of probability p in training mode. It
// panics unless 0 <= p < 1.
func NewDropout(p float32) *Dropout {
	if !(p >= 0 && p < 1) {
		panic(fmt.Sprintf("nn.NewDropout: probability %g outside [0, 1)", p))
	}
	return &Dropout{P: p, Training: true}
}

// Forward applies dropout in training mode and returns x itself otherwise.
func (d *Dropout) Forward(x *core.Tensor) *core.Tensor {
	if x == nil {
		panic("nn.Dropout.Forward: nil input")
	}
	// (guarded: a Capture records again under the other mode)
	if !x.Device().Guard(d.training) || d.P == 0 {
		return x
	}
	var y *core.Tensor
	x.Device().Scope("Dropout", func() { y = core.Dropout(x, d.P) })
	return y
}

// Params returns nil: dropout has no parameters.
func (d *Dropout) Params() []*core.Tensor { return nil }

// SetTraining switches between training (true) and evaluation mode.
func (d *Dropout) SetTraining(on bool) { d.Training = on }

func (d *Dropout) training() bool { return d.Training }
