package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/core"
)

// ErrNonFiniteNorm is returned by StepCapture.Step when gradient clipping is
// on and the global gradient norm is NaN or infinite; the update did not run.
var ErrNonFiniteNorm = errors.New("nn: gradient norm is not finite")

// StepCapture is a captured training step, the analogue of ggmlR's
// ag_capture_step: forward, backward and the optimizer update are recorded
// once per input shapes and replayed. A step uploads the inputs, the
// optimizer's hyperparameters and the clipping limit as one packed upload and
// downloads the loss (and the gradient norm) in one download.
//
// Without clipping a step is one program run. With MaxGradNorm > 0 it is
// two: forward+backward with the global gradient norm, then - only when the
// norm is finite - the clipped update; a non-finite norm returns
// ErrNonFiniteNorm before anything is updated. With OneRun as well, it is
// one run again.
type StepCapture struct {
	// MaxGradNorm clips the global L2 norm of the gradients when > 0. It is
	// a program input: changing it does not record again (turning clipping
	// on or off does). NaN or an infinity is an error of Step.
	MaxGradNorm float32
	// OneRun, with MaxGradNorm > 0, clips inside the step's one program,
	// as ClipGradNormLazy does (and PyTorch's clip_grad_norm_ by default):
	// a step waits once instead of twice, but a non-finite norm is not
	// caught - NaN gradients make the parameters NaN, and Step returns no
	// ErrNonFiniteNorm. GradNorm still holds each step's norm.
	OneRun bool

	opt     Optimizer
	loss    func(in []*core.Tensor) *core.Tensor
	whole   *core.Capture // forward+backward+update
	grads   *core.Capture // forward+backward+norm (clipping)
	clipped *core.Capture // clipped update (clipping)
	oneRun  *core.Capture // forward+backward+norm+clipped update (OneRun)
	// GradNorm is the global gradient norm of the last step (clipping only).
	GradNorm float32

	stateMade bool // the optimizer's state was made before the first recording
	micro     int  // micro-batches per step (CaptureStepAccumulated); 0: one
}

// CaptureStep makes a captured training step of opt's parameters for the loss
// that loss computes from the inputs passed to Step.
func CaptureStep(opt Optimizer, loss func(in []*core.Tensor) *core.Tensor) *StepCapture {
	if opt == nil || loss == nil {
		panic("nn.CaptureStep: nil optimizer or loss")
	}
	if len(opt.Params()) == 0 {
		panic("nn.CaptureStep: the optimizer has no parameters")
	}
	s := &StepCapture{opt: opt, loss: loss}
	dev := opt.Params()[0].Device()
	s.whole = core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		hp := in[len(in)-1]
		l := s.forwardBackward(in[:len(in)-1])
		s.update(hp, nil)
		return []*core.Tensor{l}
	})
	s.grads = core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		l := s.forwardBackward(in)
		return []*core.Tensor{l, globalNorm(opt.Params())}
	})
	s.clipped = core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		hp, limit, norm := in[0], in[1], in[2]
		scale := limitScale(limit, norm)
		s.update(hp, scale)
		return []*core.Tensor{scale}
	})
	s.oneRun = core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		hp, limit := in[len(in)-2], in[len(in)-1]
		l := s.forwardBackward(in[:len(in)-2])
		norm := globalNorm(opt.Params())
		s.update(hp, limitScale(limit, norm))
		return []*core.Tensor{l, norm}
	})
	return s
}

// CaptureStepAccumulated is CaptureStep with gradient accumulation (ggmlR's
// accumulate steps): Step takes the inputs of k micro-batches one after
// another (k groups of as many inputs as loss reads), records loss and its
// backward for each group with the loss divided by k, so that the
// gradients add up to those of the mean loss over the whole batch, and
// then one update; it returns the mean of the k losses. For a mean loss
// over equal micro-batches the update is that of one batch of them all.
//
// The k micro-batches run in the step's one program: the planner may reuse
// a micro-batch's activations once its backward is done, but the inputs of
// all k are uploaded together. The lazy loop (ZeroGrad, k Backwards of
// loss/k, Step; see the package doc) syncs per micro-batch instead.
func CaptureStepAccumulated(opt Optimizer, k int, loss func(in []*core.Tensor) *core.Tensor) *StepCapture {
	if k < 1 {
		panic(fmt.Sprintf("nn.CaptureStepAccumulated: %d micro-batches, want >= 1", k))
	}
	s := CaptureStep(opt, loss)
	s.micro = k
	return s
}

// limitScale is the clipping factor clamp(limit/(norm+1e-6), 0, 1),
// branch-free; limit is a [1] tensor (a program input here, a constant in
// ClipScale).
func limitScale(limit, norm *core.Tensor) *core.Tensor {
	return core.Clamp(core.Div(limit, core.AddScalar(norm, 1e-6)), 0, 1)
}

// update records the optimizer's update with hyperparameters hp and the
// gradients scaled by scale (nil: as they are), inside a capture.
func (s *StepCapture) update(hp, scale *core.Tensor) {
	var err error
	hp.Device().UpdatePass(func() { err = s.opt.Update(hp, scale) })
	if err != nil {
		panic(err)
	}
}

func (s *StepCapture) forwardBackward(in []*core.Tensor) *core.Tensor {
	s.opt.ZeroGrad()
	k := max(s.micro, 1)
	n := len(in) / k // step checked that k divides len(in)
	var total *core.Tensor
	for i := range k {
		l := s.loss(in[i*n : (i+1)*n])
		if l.Len() != 1 {
			panic(fmt.Sprintf("nn.CaptureStep: the loss has shape %v, want one element", l.Shape()))
		}
		if k > 1 {
			// Backward adds into the gradients: the k parts sum to the
			// gradient of the mean loss.
			l = core.Scale(l, 1/float32(k))
		}
		if err := l.Backward(); err != nil {
			panic(err)
		}
		if total == nil {
			total = l
		} else {
			total = core.Add(total, l)
		}
	}
	return total
}

// globalNorm is sqrt(sum of squares of every gradient), as a [1] tensor.
func globalNorm(ps []*core.Tensor) *core.Tensor {
	var gs []*core.Tensor
	for _, p := range ps {
		if g := p.Grad(); g != nil {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil
	}
	return core.Sqrt(core.SumSquares(gs...)) // one op (ggml-cpu: a kernel per nine gradients)
}

// Step runs one training step on the inputs and returns the loss. The
// optimizer's step count advances when its update ran.
func (s *StepCapture) Step(in ...core.Input) (float32, error) {
	loss, _, err := s.step("StepCapture.Step", in, howRead)
	return loss, err
}

// StepUnread runs one training step as Step does and does not read the
// loss back (nor, with OneRun, GradNorm): for the steps between those whose
// loss is reported. In the browser the step is then submitted without
// waiting for it (see core.Capture.Run), so steps queue on the GPU instead
// of paying a round trip each. The safe two-run clipping (MaxGradNorm
// without OneRun) still reads the norm, and waits for it, every step.
func (s *StepCapture) StepUnread(in ...core.Input) error {
	_, _, err := s.step("StepCapture.StepUnread", in, howUnread)
	return err
}

// StepLater runs one training step as Step does and asks for its loss
// without waiting for it: Item on the result returns it. On webgpu (in
// the browser and natively) the step and the read are queued and StepLater
// returns at once, so a loop that waits for step k's loss a few steps
// later keeps the GPU busy while the loss travels back and the host builds
// the next steps (see core.Later); elsewhere the loss is read at once.
// GradNorm is not updated (the two-run clipping, which reads the norm
// every step, still does).
func (s *StepCapture) StepLater(in ...core.Input) (*core.Later, error) {
	loss, l, err := s.step("StepCapture.StepLater", in, howLater)
	if err != nil || l != nil {
		return l, err
	}
	return core.Ready([]float32{loss}), nil
}

// How a step reads its loss: Step, StepUnread, StepLater.
const (
	howRead = iota
	howUnread
	howLater
)

// step is Step, StepUnread or StepLater (how), named fn in errors. With
// howLater the one-run step returns its Later (the two-run clipping reads
// its loss and returns it).
func (s *StepCapture) step(fn string, in []core.Input, how int) (loss float32, later *core.Later, err error) {
	if err := checkOptimizer(fn, s.opt); err != nil {
		return 0, nil, err
	}
	// NaN is neither > 0 nor <= 0: as a limit it made every parameter NaN
	// (two runs) or silently did not clip (OneRun)
	if m := float64(s.MaxGradNorm); math.IsNaN(m) || math.IsInf(m, 0) {
		return 0, nil, fmt.Errorf("nn.%s: MaxGradNorm %v, want a finite value (> 0 clips, 0 does not); nothing ran", fn, s.MaxGradNorm)
	}
	if s.micro > 1 && len(in)%s.micro != 0 {
		return 0, nil, fmt.Errorf("nn.%s: %d inputs for %d micro-batches, want a multiple of %d; nothing ran", fn, len(in), s.micro, s.micro)
	}
	if !s.stateMade {
		// State that starts with an upload (Adagrad's initial accumulator)
		// is made now: inside a recording the upload would not be replayed.
		if err := makeState(s.opt); err != nil {
			return 0, nil, fmt.Errorf("nn.%s: %w", fn, err)
		}
		s.stateMade = true
	}
	next := s.opt.StepCount() + 1
	hyper := s.opt.Hyper(next)
	if s.MaxGradNorm <= 0 || s.OneRun {
		// one run: the inputs, the hyperparameters and (OneRun) the limit;
		// in is clipped so that appending never writes into the caller's array
		c, in := s.whole, append(slices.Clip(in), core.In(hyper, len(hyper)))
		if s.MaxGradNorm > 0 {
			c, in = s.oneRun, append(in, core.In([]float32{s.MaxGradNorm}, 1))
		}
		var out [][]float32
		switch how {
		case howRead:
			out, err = c.Call(in...)
		case howUnread:
			err = c.Run(in...)
		case howLater:
			later, err = c.CallLater(in...)
		default:
			panic(fmt.Sprintf("nn.%s: unknown read %d", fn, how))
		}
		if err != nil {
			return 0, nil, err
		}
		s.opt.SetStepCount(next)
		if how != howRead {
			return 0, later, nil
		}
		if len(out) > 1 {
			s.GradNorm = out[1][0]
		}
		return out[0][0], nil, nil
	}
	out, err := s.grads.Call(in...)
	if err != nil {
		return 0, nil, err
	}
	loss, norm := out[0][0], out[1][0]
	s.GradNorm = norm
	if math.IsNaN(float64(norm)) || math.IsInf(float64(norm), 0) {
		return loss, nil, fmt.Errorf("nn.%s: %w (%v); the update was skipped", fn, ErrNonFiniteNorm, norm)
	}
	_, err = s.clipped.Call(core.In(hyper, len(hyper)), core.In([]float32{s.MaxGradNorm}, 1), core.In([]float32{norm}, 1))
	if err == nil {
		s.opt.SetStepCount(next)
	}
	return loss, nil, err
}

// makeState makes the state of o, of its groups or of the optimizer it
// schedules, where it is a Checkpointer.
func makeState(o Optimizer) error {
	switch o := o.(type) {
	case *Scheduled:
		return makeState(o.Optimizer)
	case *Groups:
		for _, g := range o.groups {
			if err := makeState(g); err != nil {
				return err
			}
		}
		return nil
	case Checkpointer:
		_, err := o.State()
		return err
	}
	return nil
}

// Records counts the recordings of the step's captures.
func (s *StepCapture) Records() int {
	return s.whole.Records() + s.grads.Records() + s.clipped.Records() + s.oneRun.Records()
}
