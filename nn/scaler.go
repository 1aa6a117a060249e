package nn

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// GradScaler is dynamic loss scaling for mixed precision, as PyTorch's
// torch.amp.GradScaler: the loss is multiplied by Scale before Backward so
// that small gradients survive f16 rounding (core.Device.SetMatMulPrecision),
// and the update divides it out again. A step whose gradients hold an Inf
// or a NaN (the scale was too large) is skipped and the scale halved; after
// Interval steps without one it doubles.
type GradScaler struct {
	Scale    float32 // the current loss scale
	Growth   float32 // factor after Interval good steps (2)
	Backoff  float32 // factor after a step with Inf or NaN (0.5)
	Interval int     // good steps between growths (2000)
	// Skipped counts the updates skipped for non-finite gradients.
	Skipped int
	good    int
}

// MinGradScale is the smallest scale a GradScaler takes: float32's
// smallest normal number, 2^-126. Below it the reciprocal that unscales
// the gradients overflows to +Inf, and a finite step would turn every
// weight into an infinity; a scale that backs off past it stays there.
const MinGradScale = 0x1p-126

// NewGradScaler makes a scaler starting at scale (PyTorch's default is
// 65536) with PyTorch's growth 2, backoff 0.5 and interval 2000. It
// panics unless scale is finite and at least MinGradScale.
func NewGradScaler(scale float32) *GradScaler {
	if !(scale >= MinGradScale) || math.IsInf(float64(scale), 0) {
		panic(fmt.Sprintf("nn.NewGradScaler: scale %g, want a finite value >= %g (MinGradScale)", scale, float32(MinGradScale)))
	}
	return &GradScaler{Scale: scale, Growth: 2, Backoff: 0.5, Interval: 2000}
}

// Backward runs Backward of loss times the scale. The loss itself stays
// readable after the step runs (it is kept, as Backward's own loss is).
func (s *GradScaler) Backward(loss *core.Tensor) error {
	if loss == nil {
		return fmt.Errorf("nn.GradScaler.Backward: nil loss")
	}
	if err := s.check("Backward"); err != nil {
		return err
	}
	// The scaled loss consumes loss, which a run would then plan away as an
	// intermediate: the user's loss is a value they read.
	return core.Scale(loss.Keep(), s.Scale).Backward()
}

func (s *GradScaler) check(fn string) error {
	if !(s.Scale >= MinGradScale) || math.IsInf(float64(s.Scale), 0) || !(s.Growth >= 1) || math.IsInf(float64(s.Growth), 0) || !(s.Backoff > 0 && s.Backoff < 1) || s.Interval < 1 {
		return fmt.Errorf("nn.GradScaler.%s: scale %g, growth %g, backoff %g, interval %d: want a finite scale >= %g (MinGradScale), a finite growth >= 1, 0 < backoff < 1, interval >= 1", fn, s.Scale, s.Growth, s.Backoff, s.Interval, float32(MinGradScale))
	}
	return nil
}

// Step unscales the gradients and steps opt, or skips the step when they
// hold an Inf or a NaN, or when their unscaled norm overflows float32; it
// then adapts the scale, never below MinGradScale. With maxNorm > 0 the
// unscaled gradients are also clipped to that global norm (ClipGradNorm).
// It reads the gradient norm (a sync) and returns whether the step was
// skipped; the norm it returns is the unscaled one.
func (s *GradScaler) Step(opt Optimizer, maxNorm float32) (norm float32, skipped bool, err error) {
	if err := s.check("Step"); err != nil {
		return 0, false, err
	}
	if err := checkOptimizer("GradScaler.Step", opt); err != nil {
		return 0, false, err
	}
	if maxNorm < 0 || math.IsNaN(float64(maxNorm)) || math.IsInf(float64(maxNorm), 0) {
		return 0, false, fmt.Errorf("nn.GradScaler.Step: max norm %g, want 0 (no clipping) or a finite value > 0", maxNorm)
	}
	g := GlobalGradNorm(opt.Params())
	if g == nil {
		return 0, false, fmt.Errorf("nn.GradScaler.Step: no parameter has a gradient")
	}
	scaled, _, err := readGradNorm(g, opt.Params())
	if err != nil {
		return 0, false, fmt.Errorf("nn.GradScaler.Step: %w", err)
	}
	// In float64: a scaled norm near MaxFloat32 over a small scale is not
	// float32's to hold, and then neither are the unscaled gradients.
	unscaled := scaled / float64(s.Scale)
	norm = float32(unscaled)
	if math.IsNaN(unscaled) || math.IsInf(float64(norm), 0) {
		s.Skipped++
		s.good = 0
		s.Scale = max(s.Scale*s.Backoff, MinGradScale)
		return norm, true, nil
	}
	f := 1 / float64(s.Scale) // at most 2^126: finite in float32
	if maxNorm > 0 && unscaled > float64(maxNorm) {
		f *= float64(maxNorm) / (unscaled + 1e-6)
	}
	dev := opt.Params()[0].Device()
	if err := stepWith(opt, dev.Full(float32(f), 1)); err != nil {
		return norm, false, err
	}
	if s.good++; s.good >= s.Interval {
		s.good = 0
		if next := s.Scale * s.Growth; !math.IsInf(float64(next), 0) {
			s.Scale = next
		}
	}
	return norm, false, nil
}
