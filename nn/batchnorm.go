package nn

import (
	"fmt"
	"slices"
	"sync"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// BatchNorm normalizes each channel (axis 1) of its input over every other
// axis: PyTorch's nn.BatchNorm1d for [N, C] or [N, C, L] and nn.BatchNorm2d
// for [N, C, H, W] (NewBatchNorm1d and NewBatchNorm2d set which ranks it
// takes). y = (x - mean)/sqrt(var + Eps)*Gain + Bias.
//
// In training mode (the mode it starts in; see Train, Eval) mean and var
// are the batch's, var the biased (population) variance, and each Forward
// also updates the running statistics on the device, without gradient:
// running = (1-Momentum)*running + Momentum*batch, with the unbiased
// variance (n/(n-1) times the biased one, n the values per channel), as
// PyTorch does. Momentum 0 leaves them as they are. In evaluation mode the
// running statistics normalize, and nothing is updated.
//
// The running statistics are buffers (see Buffered): state files save and
// load them after the parameters, and optimizers never see them, as they
// are not in Params. The update is an in-place op recorded with the
// forward, so it runs with the step's program (and at every replay of a
// Capture or StepCapture recorded in training mode).
type BatchNorm struct {
	Gain, Bias              *core.Tensor // [C]; both nil without an affine part
	RunningMean, RunningVar *core.Tensor // [C]; mean starts at 0, var at 1
	Eps, Momentum           float32
	Training                bool
	name                    string
	ranks                   []int
	c                       int
	// the AdamW ops' weights and second moments, written and never read
	// into the statistics (see update); one second moment per statistic
	scratchW *core.Tensor
	scratchV [2]*core.Tensor
	// hyp caches the AdamW ops' hyperparameters (see hyper); a pointer,
	// so that a model holding its BatchNorm by value copies no lock
	hyp *hyperCache
}

// hyperCache is a BatchNorm's Constant of update's hyperparameters for
// momentum m on its device, safe for concurrent use (two goroutines may
// run one module's Forward).
type hyperCache struct {
	mu sync.Mutex
	t  *core.Tensor
	m  float32
}

func newBatchNorm(name string, dev *core.Device, c int, eps, momentum float32, affine bool, ranks []int) *BatchNorm {
	fn := "New" + name
	if dev == nil {
		panic(fmt.Sprintf("nn.%s: nil device", fn))
	}
	if c < 1 {
		panic(fmt.Sprintf("nn.%s: %d features, want >= 1", fn, c))
	}
	checkShape(fn, dev, "", "running mean", c)
	checkEps(fn, eps)
	checkMomentum(fn, momentum)
	ones := make([]float32, c)
	for i := range ones {
		ones[i] = 1
	}
	b := &BatchNorm{
		RunningMean: dev.Tensor(make([]float32, c), c),
		RunningVar:  dev.Tensor(ones, c),
		scratchW:    dev.Tensor(make([]float32, c), c),
		scratchV:    [2]*core.Tensor{dev.Tensor(make([]float32, c), c), dev.Tensor(make([]float32, c), c)},
		hyp:         &hyperCache{},
		Eps:         eps, Momentum: momentum, Training: true,
		name: name, ranks: ranks, c: c,
	}
	if affine {
		b.Gain = NewParam(dev, Constant(1), nil, c)
		b.Bias = NewParam(dev, Constant(0), nil, c)
	}
	return b
}

func checkMomentum(fn string, m float32) {
	if !(m >= 0 && m <= 1) {
		panic(fmt.Sprintf("nn.%s: momentum %g, want a value in [0, 1]", fn, m))
	}
}

// NewBatchNorm1d makes a BatchNorm over c features of inputs [N, C] or [N,
// C, L], with gain 1 and bias 0 when affine; PyTorch's defaults are eps
// 1e-5 and momentum 0.1.
func NewBatchNorm1d(dev *core.Device, c int, eps, momentum float32, affine bool) *BatchNorm {
	return newBatchNorm("BatchNorm1d", dev, c, eps, momentum, affine, []int{2, 3})
}

// NewBatchNorm2d makes a BatchNorm over c channels of inputs [N, C, H, W],
// with gain 1 and bias 0 when affine; PyTorch's defaults are eps 1e-5 and
// momentum 0.1.
func NewBatchNorm2d(dev *core.Device, c int, eps, momentum float32, affine bool) *BatchNorm {
	return newBatchNorm("BatchNorm2d", dev, c, eps, momentum, affine, []int{4})
}

// Forward normalizes x (see BatchNorm for the two modes).
func (b *BatchNorm) Forward(x *core.Tensor) *core.Tensor {
	fn := "nn." + b.name + ".Forward"
	if x == nil {
		panic(fn + ": nil input")
	}
	if !slices.Contains(b.ranks, x.Rank()) || x.Dim(1) != b.c {
		want := fmt.Sprintf("[N, %d, H, W]", b.c)
		if b.ranks[0] == 2 {
			want = fmt.Sprintf("[N, %d] or [N, %d, L]", b.c, b.c)
		}
		panic(fmt.Sprintf("%s: input of shape %v, want %s", fn, x.Shape(), want))
	}
	checkEps(b.name+".Forward", b.Eps)
	checkMomentum(b.name+".Forward", b.Momentum)
	n := x.Len() / b.c                       // values per channel
	training := x.Device().Guard(b.training) // a Capture records each mode
	if training && n < 2 {
		panic(fmt.Sprintf("%s: input of shape %v has %d value per channel: training needs more than 1 for a variance", fn, x.Shape(), n))
	}
	// [C] vectors broadcast as [1, C, 1, ...].
	bshape := make([]int, x.Rank())
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[1] = b.c
	dev := x.Device()
	var y *core.Tensor
	dev.Scope(b.name, func() {
		dev.Composite(b.name, func() {
			switch {
			case training && dev.Info().Native(backend.OpBatchNorm):
				// one composite op (the device's kernels), its gradient
				// through the batch's statistics another, and the
				// running statistics' batch moments a third, which
				// shares the forward's partial sums where the device
				// runs it (ggml-vulkan)
				y = core.BatchNorm(x, b.Eps)
				if b.Momentum > 0 {
					var s *core.Tensor
					dev.NoGrad(func() { s = core.BatchNormStats(x) })
					b.update(core.SliceRows(s, 0, 1), core.SliceRows(s, 1, 1), n)
				}
			case training:
				// where the device would decompose the composite, its
				// primitives share the moments with the running update:
				// on an H100 the composite's decomposition and the
				// moments made again cost webgpu's convnet step 8-10%
				// (bench/results/h100-2026-12-06-s25c.txt)
				mu, d, v := b.moments(x, bshape)
				y = core.Mul(d, core.Pow(core.AddScalar(v, b.Eps), -0.5))
				if b.Momentum > 0 {
					b.update(mu, v, n)
				}
			default:
				d := core.Sub(x, core.Reshape(b.RunningMean, bshape...))
				v := core.Reshape(b.RunningVar, bshape...)
				y = core.Mul(d, core.Pow(core.AddScalar(v, b.Eps), -0.5))
			}
			if b.Gain != nil {
				y = core.Add(core.Mul(y, core.Reshape(b.Gain, bshape...)), core.Reshape(b.Bias, bshape...))
			}
		})
	})
	return y
}

// update records running = (1-m)*running + m*batch for both statistics, in
// place, as PyTorch's formula: the running statistic is the first moment
// of an AdamW op with beta1 = 1-m, whose update b1*mom + (1-b1)*g reads
// nothing but itself and the batch's value. (An SGD op's assignment x -
// (d + m*x) made an Inf statistic NaN at the next batch, and its velocity,
// shared by both statistics, carried a bad batch's Inf into the next
// good batch's mean as 0*Inf.) The op's weights and second moment are
// scratch with lr 0: they may turn NaN, and nothing reads them. Each
// statistic has a second moment of its own, so that no other op touches
// an update's moments and ggml fuses each into one opt_step_adamw node
// (sharing one, a step of the convnet took 29 ggml nodes per statistic).
func (b *BatchNorm) update(mu, v *core.Tensor, n int) {
	dev := mu.Device()
	dev.NoGrad(func() {
		hp := b.hyper(dev)
		bm := core.Reshape(mu, b.c)
		bv := core.Reshape(v, b.c)
		core.AdamWUpdate(b.scratchW, bm, b.RunningMean, b.scratchV[0], hp)
		core.AdamWUpdate(b.scratchW, core.Scale(bv, float32(n)/float32(n-1)), b.RunningVar, b.scratchV[1], hp)
	})
}

// hyper returns the AdamW hyperparameters of update, [lr 0, beta1 1-m,
// beta2 1, eps 1, wd 0, 1, 1], a Constant made again only when Momentum
// changes: concatenated from fills at each step they cost ggml-vulkan four
// nodes a layer, and webgpu as many copies.
func (b *BatchNorm) hyper(dev *core.Device) *core.Tensor {
	h := b.hyp
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t == nil || h.m != b.Momentum || h.t.Device() != dev {
		h.t, h.m = dev.Constant([]float32{0, 1 - b.Momentum, 1, 1, 0, 1, 1}, 7), b.Momentum
	}
	return h.t
}

// moments returns the batch's per-channel mean and biased variance, shaped
// bshape ([1, C, 1, ...]), and x minus the mean: the mean over every axis
// but the channels', [N, C, rest] summed along the contiguous rest, then
// over N, and the variance in a second pass over the centred values.
func (b *BatchNorm) moments(x *core.Tensor, bshape []int) (mu, d, v *core.Tensor) {
	mean := func(t *core.Tensor) *core.Tensor {
		t3 := core.Reshape(t, t.Dim(0), b.c, -1)
		return core.Reshape(core.MeanAxis(core.MeanAxis(t3, 2, true), 0, true), bshape...)
	}
	mu = mean(x)
	d = core.Sub(x, mu)
	return mu, d, mean(core.Mul(d, d))
}

// Params returns the gain and the bias (none without an affine part).
func (b *BatchNorm) Params() []*core.Tensor {
	if b.Gain == nil {
		return nil
	}
	return []*core.Tensor{b.Gain, b.Bias}
}

// Buffers returns the running mean and the running variance.
func (b *BatchNorm) Buffers() []*core.Tensor {
	return []*core.Tensor{b.RunningMean, b.RunningVar}
}

// SetTraining switches between training (true) and evaluation mode.
func (b *BatchNorm) SetTraining(on bool) { b.Training = on }

func (b *BatchNorm) training() bool { return b.Training }
