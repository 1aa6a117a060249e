package workload

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// ConvNetConfig is the shape of the convnet workload: Batch single-channel
// Side x Side images (Side a multiple of 4) in 10 classes.
type ConvNetConfig struct {
	Side, Batch int
	Seed        uint64
}

// ConvNet is an MNIST-sized convnet (conv 3x3 32, batch norm, ReLU, max
// pool 2; conv 3x3 64, batch norm, ReLU, max pool 2; linear 128, ReLU;
// linear 10), Adam (lr 1e-3) on cross-entropy, over a fixed set of random
// images on the device (the step's speed is the measure, not the task).
type ConvNet struct {
	Cfg   ConvNetConfig
	Dev   *core.Device
	Model nn.Sequential
	Opt   *nn.Adam
	x, y  *core.Tensor
	capt  *nn.StepCapture
}

// NewConvNet builds the model and its data on dev.
func NewConvNet(dev *core.Device, cfg ConvNetConfig) (*ConvNet, error) {
	if cfg.Side < 4 || cfg.Side%4 != 0 || cfg.Batch < 1 {
		return nil, fmt.Errorf("workload.NewConvNet: side %d, batch %d: want a side that is a multiple of 4 and a batch >= 1", cfg.Side, cfg.Batch)
	}
	r := nn.NewRNG(cfg.Seed)
	pad := nn.ConvOptions{Padding: 1}
	q := cfg.Side / 4
	m := nn.Sequential{
		nn.NewConv2d(dev, 1, 32, [2]int{3, 3}, pad, r), nn.NewBatchNorm2d(dev, 32, 1e-5, 0.1, true), nn.Func(core.ReLU), nn.NewMaxPool2d(2, 0, 0),
		nn.NewConv2d(dev, 32, 64, [2]int{3, 3}, pad, r), nn.NewBatchNorm2d(dev, 64, 1e-5, 0.1, true), nn.Func(core.ReLU), nn.NewMaxPool2d(2, 0, 0),
		nn.Flatten{}, nn.NewLinear(dev, 64*q*q, 128, true, r), nn.Func(core.ReLU), nn.NewLinear(dev, 128, 10, true, r),
	}
	g := rand.New(rand.NewPCG(cfg.Seed, 0xc0))
	xs := make([]float32, cfg.Batch*cfg.Side*cfg.Side)
	for i := range xs {
		xs[i] = float32(g.NormFloat64())
	}
	ys := make([]float32, cfg.Batch)
	for i := range ys {
		ys[i] = float32(g.IntN(10))
	}
	return &ConvNet{Cfg: cfg, Dev: dev, Model: m, Opt: nn.NewAdam(m.Params(), 1e-3),
		x: dev.Tensor(xs, cfg.Batch, 1, cfg.Side, cfg.Side), y: dev.Tensor(ys, cfg.Batch)}, nil
}

func (c *ConvNet) loss(x, y *core.Tensor) *core.Tensor {
	return nn.CrossEntropyLoss(c.Model.Forward(x), y, nn.ClassOptions{})
}

// StepMode runs one training step in mode and returns the loss.
func (c *ConvNet) StepMode(mode Mode) (float32, error) {
	return inMode(c.Dev, mode, func() (float32, error) {
		c.Opt.ZeroGrad()
		loss := c.loss(c.x, c.y).Keep()
		if err := loss.Backward(); err != nil {
			return 0, err
		}
		if err := c.Opt.Step(); err != nil {
			return 0, err
		}
		return loss.Item()
	}, func() (float32, error) {
		if c.capt == nil {
			c.capt = nn.CaptureStep(c.Opt, func([]*core.Tensor) *core.Tensor { return c.loss(c.x, c.y) })
		}
		return c.capt.Step()
	})
}

// FLOPs is the convolutions' and linear layers' arithmetic of one step
// (forward, and twice that for backward), a multiply-add counted as two.
func (c *ConvNet) FLOPs() float64 {
	b, s := float64(c.Cfg.Batch), float64(c.Cfg.Side)
	q := s / 4
	fwd := 2*b*s*s*9*1*32 + 2*b*(s/2)*(s/2)*9*32*64 + 2*b*64*q*q*128 + 2*b*128*10
	return 3 * fwd
}

// Timed runs n steps in mode and returns each step's wall time and the last
// loss.
func (c *ConvNet) Timed(mode Mode, n int) ([]time.Duration, float32, error) {
	return timeSteps(n, func() (float32, error) { return c.StepMode(mode) })
}
