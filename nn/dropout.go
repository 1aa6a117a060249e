package nn

import (
	"fmt"
	"reflect"

	"github.com/ag-go/ag/core"
)

// Trainable is a module with training and evaluation modes (Dropout,
// BatchNorm, MultiHeadAttention, and containers that pass the mode on, like
// Sequential). A model of your own need not implement it: Train, Eval and
// SetTraining find the layers in its exported fields (see SetTraining).
// Implement it to pass the mode yourself, e.g. to children in unexported
// fields (with SetTraining on each child; never on the module itself,
// which would call your method again).
type Trainable interface {
	SetTraining(on bool)
}

// Train puts m and every module in it into training mode (dropout drops,
// BatchNorm uses and updates batch statistics), the mode modules start in,
// as in PyTorch. It returns m. See SetTraining for how it finds them.
func Train(m Module) Module {
	modes("Train", m, true)
	return m
}

// Eval puts m and every module in it into evaluation mode (dropout is the
// identity, BatchNorm normalizes with its running statistics). It returns
// m. See SetTraining for how it finds them.
func Eval(m Module) Module {
	modes("Eval", m, false)
	return m
}

// SetTraining sets the mode of m and of every module in it, as PyTorch's
// train(on) does for submodules. A module that implements Trainable is
// given the mode and trusted with its insides (Sequential passes it to its
// elements, a layer sets its flag). Any other value is walked as
// NamedParams walks for parameters - exported struct fields, slices,
// arrays, maps with string keys, pointers and interfaces - so a model
// written as a Go struct of layers needs no method of its own. (A struct
// that embeds a Trainable, e.g. an nn.Sequential, is one too, by Go's
// method promotion: then only the embedded module gets the mode, unless
// the struct declares its own SetTraining.)
//
// A layer with modes the walk cannot reach is not skipped: it panics,
// naming the type and the field, when one is in an unexported field of a
// struct that is walked into (export it, or implement Trainable on the
// struct), in a map whose keys are not strings, or held by value where it
// cannot be set (a struct passed by value, a map's value).
func SetTraining(m Module, on bool) {
	modes("SetTraining", m, on)
}

// modes is SetTraining as fn: a refused tree panics naming fn.
func modes(fn string, m Module, on bool) {
	err := caught(fn, func() {
		w := newWalker(func(v reflect.Value, at place) bool {
			u, ok := implementer(v, trainableType)
			if !ok {
				return false
			}
			if !u.IsValid() || !u.CanInterface() {
				panic(&walkError{"", fmt.Sprintf("%s is a %v that cannot be set: hold it by pointer, in an exported field of a module passed by pointer", where(at), v.Type())})
			}
			u.Interface().(Trainable).SetTraining(on)
			return true
		}, trainableType, "modes (nn.Trainable)")
		w.walk(reflect.ValueOf(m), place{})
	})
	if err != nil {
		panic(err)
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
