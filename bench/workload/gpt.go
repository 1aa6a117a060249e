package workload

import (
	"fmt"
	"time"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
)

// GPTConfig is the shape of the transformer workload: models.GPT on
// models.KeeperText, batch sequences of Context tokens.
type GPTConfig struct {
	Layers, Dim, Heads, Context, Batch int
	Dropout                            float32
	Seed                               uint64
}

// GPT is the character-level transformer workload of the breadth issue:
// AdamW (lr 1e-3, weight decay 0.01) with 100 warm-up steps into a cosine
// schedule, the global gradient norm clipped to 1, dropout on.
type GPT struct {
	Cfg   GPTConfig
	Dev   *core.Device
	Model *models.GPT
	Opt   *nn.Scheduled
	data  *models.Batches
	capt  *nn.StepCapture
}

// NewGPT builds the model and its data stream on dev.
func NewGPT(dev *core.Device, cfg GPTConfig) (*GPT, error) {
	if cfg.Layers < 1 || cfg.Dim < 1 || cfg.Heads < 1 || cfg.Context < 1 || cfg.Batch < 1 || cfg.Dim%cfg.Heads != 0 {
		return nil, fmt.Errorf("workload.NewGPT: config %+v: every size >= 1, Dim a multiple of Heads", cfg)
	}
	voc := models.NewCharVocab(models.KeeperText)
	toks, err := voc.Encode(models.KeeperText)
	if err != nil {
		return nil, err
	}
	data, err := models.NewBatches(toks, cfg.Batch, cfg.Context, cfg.Seed)
	if err != nil {
		return nil, err
	}
	m := models.NewGPT(dev, models.GPTConfig{Vocab: voc.Size(), Context: cfg.Context, Dim: cfg.Dim, Heads: cfg.Heads, Layers: cfg.Layers, Dropout: cfg.Dropout}, nn.NewRNG(cfg.Seed))
	opt := nn.WithSchedule(nn.NewAdamW(m.Params(), 1e-3, 0.01), nn.WarmupCosine(100, 10000, 0.1))
	return &GPT{Cfg: cfg, Dev: dev, Model: m, Opt: opt, data: data}, nil
}

// StepMode runs one training step in mode and returns the loss.
func (g *GPT) StepMode(mode Mode) (float32, error) {
	x, y := g.data.Next()
	b, t := g.Cfg.Batch, g.Cfg.Context
	return inMode(g.Dev, mode, func() (float32, error) {
		g.Opt.ZeroGrad()
		loss := g.Model.Loss(g.Dev.Tensor(x, b, t), g.Dev.Tensor(y, b, t)).Keep()
		if err := loss.Backward(); err != nil {
			return 0, err
		}
		norm, err := nn.ClipGradNormLazy(g.Opt, 1)
		if err != nil {
			return 0, err
		}
		l, err := loss.Item()
		// The norm is not read: released now, its buffer is the next
		// step's norm's (the step binds the same buffers every time).
		norm.Release()
		return l, err
	}, func() (float32, error) {
		if g.capt == nil {
			g.capt = nn.CaptureStep(g.Opt, func(in []*core.Tensor) *core.Tensor { return g.Model.Loss(in[0], in[1]) })
			// clipped in the one run, as the lazy step's ClipGradNormLazy
			// and PyTorch's clip_grad_norm_ do: the modes and the peer
			// then do the same work
			g.capt.MaxGradNorm, g.capt.OneRun = 1, true
		}
		return g.capt.Step(core.In(x, b, t), core.In(y, b, t))
	})
}

// FLOPs is the matmul arithmetic of one step (forward, and twice that for
// backward), a multiply-add counted as two: per layer the four projections
// 8·B·T·D², the feed-forward 4·B·T·D·H and attention 4·B·T²·D, plus the
// head 2·B·T·D·V.
func (g *GPT) FLOPs() float64 {
	c := g.Model.Config
	b, t, d, h, v := float64(g.Cfg.Batch), float64(c.Context), float64(c.Dim), float64(c.Hidden), float64(c.Vocab)
	fwd := float64(c.Layers)*(8*b*t*d*d+4*b*t*d*h+4*b*t*t*d) + 2*b*t*d*v
	return 3 * fwd
}

// Timed runs n steps in mode and returns each step's wall time and the last
// loss.
func (g *GPT) Timed(mode Mode, n int) ([]time.Duration, float32, error) {
	return timeSteps(n, func() (float32, error) { return g.StepMode(mode) })
}
