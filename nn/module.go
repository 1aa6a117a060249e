// Package nn holds layers, losses and optimizers built on core, and saving
// and loading of model and optimizer state.
//
//   - Layers (Module): Linear, Sequential, Func, LayerNorm, RMSNorm,
//     Embedding, Flatten, Conv1d, Conv2d, MaxPool1d/2d, AvgPool1d/2d,
//     BatchNorm (1d and 2d, with running statistics as Buffers), LSTM
//     and GRU; Hooked, for forward and gradient hooks around a module;
//     initializers (Initializer: GlorotUniform,
//     GlorotNormal, KaimingUniform, KaimingNormal, Normal, Uniform,
//     Constant, Values), drawn on the host from a seeded NewRNG.
//   - Losses: MSELoss, CrossEntropy, SoftmaxCrossEntropy, CrossEntropyLoss
//     and NLLLoss (label smoothing, an ignored label), BCEWithLogits, BCE,
//     Huber, SmoothL1.
//   - Optimizers (Optimizer): SGD (momentum, Nesterov), Adam/AdamW
//     (AMSGrad, coupled L2 decay), RMSprop (momentum, centered), Adagrad,
//     Lion, as fused update ops on the device; Groups for
//     parameter groups; WithSchedule for learning-rate schedules (StepLR,
//     ExponentialLR, CosineAnnealing, CosineAnnealingWarmRestarts,
//     LinearWarmup, WarmupCosine, OneCycle, Sequence, Chain;
//     WithOneCycle, which also cycles the momentum as PyTorch's OneCycleLR;
//     ReduceLROnPlateau, fed a metric each epoch, whose state
//     WithReduceLROnPlateau keeps in state files); EMA, a moving average
//     of the weights to evaluate with; ClipGradNorm for
//     clipping in any step, CaptureStep for captured steps. Each updates
//     the parameters that have a gradient: one frozen with
//     core.Tensor.SetRequiresGrad(false) has none, and is left as it is.
//   - State: SaveState/LoadState (ag's own positional file of a model and
//     its optimizer); safetensors model files by name: NamedParams and
//     NamedState (PyTorch-style dotted names from the module tree),
//     SaveSafetensors/LoadSafetensors (weights only; loads strict by
//     default as PyTorch's, LoadOptions.NonStrict for a LoadReport of
//     missing and unexpected keys; F32, F16, BF16; KeyMap and PyTorchKeys
//     for PyTorch's state_dict keys), and the optimizer's state
//     in a file of its own (SaveOptimizerSafetensors,
//     LoadOptimizerSafetensors; hyperparameters restored only when asked).
//
// # Models written as Go structs
//
// A model of your own is a struct whose exported fields hold its layers,
// with its own Forward and Params (see Example_structModel). It needs
// nothing more: as PyTorch's submodules register themselves, NamedParams,
// Train/Eval/SetTraining and Buffers (and so NamedState, SaveState,
// SaveSafetensors and the loads) walk its exported fields, slices,
// arrays, maps with string keys, pointers and interfaces. A layer with
// modes or buffers the walk cannot reach (an unexported field) is refused
// with an error or panic naming the type and field, never skipped;
// implement Trainable or Buffered (or Namer for names) to take over.
//
// # Gradient accumulation
//
// Backward adds into the gradients it finds, so accumulating over k
// micro-batches is: ZeroGrad once, then for each micro-batch Backward of
// its loss divided by k, then one Step. For a mean loss over equal
// micro-batches that is the step of the whole batch (TestGradientAccumulation
// checks it), at the memory of one micro-batch. CaptureStepAccumulated
// does the same in a captured step.
package nn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"

	"github.com/ag-go/ag/core"
)

// Module is a layer or a model: a function of one tensor with parameters.
type Module interface {
	Forward(x *core.Tensor) *core.Tensor
	// Params lists the trainable tensors, in a stable order (state files
	// and optimizers rely on it).
	Params() []*core.Tensor
}

// Linear computes x·W + b for x of shape [..., in] (a batch of rows, or of
// sequences of rows): W is [in, out], b is [out] (broadcast over the rest).
type Linear struct {
	W, B *core.Tensor // B is nil without bias
}

// NewLinear makes a Linear layer on dev initialized as PyTorch's
// nn.Linear: W ~ U(-b, b) with b = 1/sqrt(in) (kaiming_uniform_ with
// a = sqrt(5)) and, when bias is set, b ~ U(-b, b) too, drawn from rng in
// that order. (Glorot with a zero bias, ag's earlier default, left a tanh
// MLP on two spirals at 62% accuracy where this reaches 100%, as PyTorch
// does; pass GlorotUniform(1) to NewLinearInit for it.)
func NewLinear(dev *core.Device, in, out int, bias bool, rng *rand.Rand) *Linear {
	checkRNG("NewLinear", rng)
	return NewLinearInit(dev, in, out, bias, nil, rng)
}

// NewLinearInit is NewLinear with the weights from init (see Initializer),
// e.g. KaimingNormal(ReLUGain) before a ReLU; the bias then starts at zero.
// A nil init is NewLinear's default, bias included.
func NewLinearInit(dev *core.Device, in, out int, bias bool, init Initializer, rng *rand.Rand) *Linear {
	if in < 1 || out < 1 {
		panic(fmt.Sprintf("nn.NewLinear: in %d, out %d: both must be >= 1", in, out))
	}
	checkDevice("NewLinear", dev)
	checkShape("NewLinear", dev, fmt.Sprintf("in %d, out %d", in, out), "weight", in, out)
	def := init == nil
	if def {
		init = defaultInit()
	}
	l := &Linear{W: NewParam(dev, init, rng, in, out)}
	switch {
	case !bias:
	case def: // PyTorch's bias, drawn after W (rng checked by NewParam)
		l.B = dev.Param(defaultBias(out, in, rng), out)
	default:
		l.B = dev.Param(make([]float32, out), out)
	}
	return l
}

// Forward returns x·W (+ b).
func (l *Linear) Forward(x *core.Tensor) *core.Tensor {
	if x == nil {
		panic("nn.Linear.Forward: nil input")
	}
	if in := l.W.Dim(0); x.Rank() < 1 || x.Dim(x.Rank()-1) != in {
		panic(fmt.Sprintf("nn.Linear.Forward: input of shape %v, want [..., %d]", x.Shape(), in))
	}
	var y *core.Tensor
	x.Device().Scope("Linear", func() {
		y = core.MatMul(x, l.W)
		if l.B != nil {
			y = core.Add(y, l.B) // the bias add: "Add" in the Linear's row of a profile
		}
	})
	return y
}

// weightBias is a layer's parameters: w and, unless nil, its bias b.
func weightBias(w, b *core.Tensor) []*core.Tensor {
	if b == nil {
		return []*core.Tensor{w}
	}
	return []*core.Tensor{w, b}
}

// Params returns W and, with a bias, b.
func (l *Linear) Params() []*core.Tensor { return weightBias(l.W, l.B) }

// Func makes a parameterless Module of an op, e.g. nn.Func(core.ReLU).
type Func func(*core.Tensor) *core.Tensor

// Forward applies the function.
func (f Func) Forward(x *core.Tensor) *core.Tensor { return f(x) }

// Params returns nil.
func (f Func) Params() []*core.Tensor { return nil }

// Sequential applies its modules in order.
type Sequential []Module

// Forward runs x through every module.
func (s Sequential) Forward(x *core.Tensor) *core.Tensor {
	if x == nil {
		panic("nn.Sequential.Forward: nil input")
	}
	for i, m := range s {
		// Profiles group by layer: "0.Linear", "1" (a Func), ...
		x.Device().Scope(strconv.Itoa(i), func() { x = m.Forward(x) })
	}
	return x
}

// Params concatenates the modules' parameters in order.
func (s Sequential) Params() []*core.Tensor {
	var ps []*core.Tensor
	for _, m := range s {
		ps = append(ps, m.Params()...)
	}
	return ps
}

// MLP builds Linear layers of the given sizes (sizes[0] inputs, sizes[len-1]
// outputs) with act between them (not after the last), e.g.
// MLP(dev, []int{784, 256, 10}, core.ReLU, rng). Each layer is a
// NewLinear with a bias: PyTorch's default initialization.
func MLP(dev *core.Device, sizes []int, act func(*core.Tensor) *core.Tensor, rng *rand.Rand) Sequential {
	return MLPInit(dev, sizes, act, nil, rng)
}

// MLPInit is MLP with every layer's weights drawn from init and its bias
// starting at zero (NewLinearInit); a nil init is MLP's default. E.g.
// MLPInit(dev, sizes, core.ReLU, KaimingNormal(ReLUGain), rng), or
// GlorotUniform(1) for the MLP ag built before it followed PyTorch.
func MLPInit(dev *core.Device, sizes []int, act func(*core.Tensor) *core.Tensor, init Initializer, rng *rand.Rand) Sequential {
	if len(sizes) < 2 {
		panic(fmt.Sprintf("nn.MLP: sizes %v: need at least inputs and outputs", sizes))
	}
	checkDevice("MLP", dev)
	checkRNG("MLP", rng)
	for i := 0; i+1 < len(sizes); i++ { // every layer before any is made
		checkShape("MLP", dev, fmt.Sprintf("sizes %v", sizes), fmt.Sprintf("layer %d's weight", i), sizes[i], sizes[i+1])
	}
	var s Sequential
	for i := 0; i+1 < len(sizes); i++ {
		s = append(s, NewLinearInit(dev, sizes[i], sizes[i+1], true, init, rng))
		if i+2 < len(sizes) && act != nil {
			s = append(s, Func(act))
		}
	}
	return s
}

// Buffered is a module with persistent tensors that are not trained, such
// as BatchNorm's running statistics: state files save and load them after
// the parameters ("buffer.0", ...), and optimizers, which take Params, never
// see them. A model of your own need not implement it: Buffers finds the
// layers in its exported fields. Implement it to list them yourself (e.g.
// from unexported fields), as Sequential does with Buffers of each child.
type Buffered interface {
	Buffers() []*core.Tensor
}

// Buffers returns m's buffers in a stable order (nil for a module without):
// a module that implements Buffered gives its own; any other value is
// walked as SetTraining walks for modes (exported fields in declaration
// order, slices, arrays, maps with string keys sorted), and the buffers of
// each Buffered it reaches are listed in walk order, a module reached
// twice once (a struct that embeds a Buffered, e.g. an nn.Sequential, is
// one too, by Go's method promotion: declare Buffers on it to list more).
// A Buffered the walk cannot reach (in an unexported field of
// a struct walked into, or in a map whose keys are not strings) panics,
// naming the type and the field; SaveState, SaveSafetensors, NamedState
// and the loads return that as an error.
func Buffers(m Module) []*core.Tensor {
	bs, err := buffersOf("Buffers", m)
	if err != nil {
		panic(err)
	}
	return bs
}

// buffersOf is Buffers as fn, a refused tree an error naming fn.
func buffersOf(fn string, m Module) ([]*core.Tensor, error) {
	var bs []*core.Tensor
	err := caught(fn, func() {
		w := newWalker(func(v reflect.Value, at place) bool {
			u, ok := implementer(v, bufferedType)
			if !ok {
				return false
			}
			if !u.IsValid() && v.CanInterface() {
				// held by value where it cannot be addressed: its tensors
				// are pointers, so a copy's Buffers are the same tensors
				u = reflect.New(v.Type())
				u.Elem().Set(v)
			}
			if !u.IsValid() || !u.CanInterface() {
				panic(&walkError{"", fmt.Sprintf("%s is a %v whose buffers cannot be read: hold it in an exported field", where(at), v.Type())})
			}
			bs = append(bs, u.Interface().(Buffered).Buffers()...)
			return true
		}, bufferedType, "buffers (nn.Buffered)")
		w.walk(reflect.ValueOf(m), place{})
	})
	return bs, err
}

// Buffers concatenates the modules' buffers in order.
func (s Sequential) Buffers() []*core.Tensor {
	var bs []*core.Tensor
	for _, m := range s {
		bs = append(bs, Buffers(m)...)
	}
	return bs
}

// ZeroGrad drops the gradients of every parameter of m.
func ZeroGrad(m Module) {
	for _, p := range m.Params() {
		p.ZeroGrad()
	}
}
