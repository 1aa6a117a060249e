package nn

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// EMA keeps an exponential moving average of parameters, for evaluating
// (or shipping) smoother weights than the last step's: PyTorch's
// torch.optim.swa_utils.AveragedModel with get_ema_avg_fn(decay). The first
// Update copies the parameters; each later one makes avg = Decay*avg +
// (1-Decay)*w. Swap exchanges the parameters and the averages in place, so
// the model itself evaluates with the averages; a second Swap restores
// them exactly (the copies are exact: each is a zeroing and a subtraction
// from zero).
//
// Everything is recorded on the device (fused SGD ops used as in-place
// assignments) and runs at the next sync, after the work recorded before
// it: call Update after the optimizer's Step. Buffers (BatchNorm's running
// statistics) are not averaged, as AveragedModel's default
// use_buffers=False.
type EMA struct {
	// Decay is the weight of the old average, in [0, 1].
	Decay float32

	params  []*core.Tensor
	avg     []*core.Tensor
	tmp     []*core.Tensor // Swap's copy of the parameters
	scratch []*core.Tensor // the SGD op's velocity slot
	n       int
}

// NewEMA makes the moving average of params with the given decay (0.999
// is usual); nothing is averaged before the first Update.
func NewEMA(params []*core.Tensor, decay float32) *EMA {
	return &EMA{Decay: decay, params: dedupe("NewEMA", params)}
}

func (e *EMA) ensure() error {
	if len(e.params) == 0 {
		return fmt.Errorf("nn.EMA: no parameters")
	}
	for _, ts := range []*[]*core.Tensor{&e.avg, &e.tmp, &e.scratch} {
		if *ts == nil {
			z, err := zerosLike("EMA", e.params)
			if err != nil {
				return err
			}
			*ts = z
		}
	}
	return nil
}

// Update records avg = Decay*avg + (1-Decay)*w for every parameter (the
// first time: avg = w).
func (e *EMA) Update() error {
	if !(e.Decay >= 0 && e.Decay <= 1) {
		return fmt.Errorf("nn.EMA.Update: decay %g, want a value in [0, 1]", e.Decay)
	}
	if err := e.ensure(); err != nil {
		return err
	}
	keep := e.Decay
	if e.n == 0 {
		keep = 0 // avg = 0 - (-w): exactly w
	}
	dev := e.params[0].Device()
	dev.UpdatePass(func() {
		// x - (d + k*x) with d = -k*w and k = 1-keep
		k := 1 - keep
		hp := dev.Tensor([]float32{1, 0, k}, 3)
		for i, p := range e.params {
			core.SGDUpdate(e.avg[i], core.Scale(p, -k), e.scratch[i], hp)
		}
	})
	e.n++
	return nil
}

// Count is the number of updates made.
func (e *EMA) Count() int { return e.n }

// Averages returns the averaged values, one per parameter (zeros before
// the first Update; the parameters' own values while swapped in).
func (e *EMA) Averages() ([]*core.Tensor, error) {
	if err := e.ensure(); err != nil {
		return nil, err
	}
	return e.avg, nil
}

// Swap exchanges the values of the parameters and of the averages, in
// place: before evaluating with the averages, and again after, to train
// on. It fails before the first Update (there is no average yet).
func (e *EMA) Swap() error {
	if e.n == 0 {
		return fmt.Errorf("nn.EMA.Swap: no Update yet: there is no average to swap in")
	}
	dev := e.params[0].Device()
	dev.UpdatePass(func() {
		zero := dev.Tensor([]float32{1, 0, 1}, 3) // x - (0 + x) = 0
		set := dev.Tensor([]float32{1, 0, 0}, 3)  // 0 - (-y) = y
		assign := func(dst, src, vel *core.Tensor) {
			neg := core.Neg(src) // recorded before dst changes: src may be read before
			core.SGDUpdate(dst, dev.Full(0, dst.Shape()...), vel, zero)
			core.SGDUpdate(dst, neg, vel, set)
		}
		for i, p := range e.params {
			assign(e.tmp[i], p, e.scratch[i])
			assign(p, e.avg[i], e.scratch[i])
			assign(e.avg[i], e.tmp[i], e.scratch[i])
		}
	})
	return nil
}
