// Command chargpt trains a character-level transformer (models.GPT) on the
// short text the repository ships (models.KeeperText) and samples text from
// it. It prints the training loss, the loss on held-out text (the last
// tenth of the text, never trained on) and a sample continuing "The keeper".
//
//	go run ./examples/chargpt -device cpu -steps 400
//	ag serve -app ./examples/chargpt     # the same model trained in the page
package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
)

func main() { app.Run(Spec) }

// Spec is the example for app.Run.
var Spec = app.Spec{
	Name:     "chargpt",
	Describe: "a character-level GPT (causal attention, LayerNorm, dropout, AdamW with warm-up, gradient clipping, a captured step) learning the text of models.KeeperText, and sampling from it",
	Steps:    400,
	Params: []app.Param{
		{Name: "layers", Default: 2, Min: 1, Max: 12, Int: true, Doc: "transformer blocks"},
		{Name: "dim", Default: 64, Min: 8, Max: 1024, Int: true, Doc: "model width"},
		{Name: "heads", Default: 4, Min: 1, Max: 16, Int: true, Doc: "attention heads (dim a multiple)"},
		{Name: "context", Default: 32, Min: 4, Max: 256, Int: true, Doc: "tokens per sequence"},
		{Name: "batch", Default: 16, Min: 1, Max: 512, Int: true, Doc: "sequences per step"},
		{Name: "lr", Default: 3e-3, Min: 1e-5, Max: 1, Doc: "AdamW learning rate"},
		{Name: "dropout", Default: 0.1, Min: 0, Max: 0.9, Doc: "dropout probability"},
		{Name: "seed", Default: 1, Min: 0, Max: 1 << 31, Int: true, Doc: "weight, data and dropout seed"},
	},
	Build: func(dev *core.Device, cfg app.Config) (app.Trainer, error) { return New(dev, cfg) },
}

// Prompt starts every sample.
const Prompt = "The keeper"

// Model is the transformer, its optimizer, its data and its vocabulary.
type Model struct {
	dev      *core.Device
	gpt      *models.GPT
	voc      *models.CharVocab
	opt      nn.Optimizer
	train    *models.Batches
	val      [][2][]float32 // fixed held-out batches
	b, t     int
	capt     *nn.StepCapture
	seed     uint64
	samples  int
	maxNorm  float32
	valBatch int
}

// New builds the model on dev: the text's first 90% trains it, the last
// 10% measures it.
func New(dev *core.Device, cfg app.Config) (*Model, error) {
	dim, heads := cfg.Int("dim"), cfg.Int("heads")
	if dim%heads != 0 {
		return nil, fmt.Errorf("chargpt: dim %d is not a multiple of heads %d", dim, heads)
	}
	seed := uint64(cfg.Int("seed"))
	if err := dev.Seed(seed); err != nil {
		return nil, fmt.Errorf("chargpt: %w", err)
	}
	voc := models.NewCharVocab(models.KeeperText)
	toks, err := voc.Encode(models.KeeperText)
	if err != nil {
		return nil, fmt.Errorf("chargpt: %w", err)
	}
	b, t := cfg.Int("batch"), cfg.Int("context")
	cut := len(toks) * 9 / 10
	train, err := models.NewBatches(toks[:cut], b, t, seed+1)
	if err != nil {
		return nil, fmt.Errorf("chargpt: training text: %w", err)
	}
	valData, err := models.NewBatches(toks[cut:], b, t, seed+2)
	if err != nil {
		return nil, fmt.Errorf("chargpt: held-out text (context %d too long for %d tokens?): %w", t, len(toks)-cut, err)
	}
	m := &Model{dev: dev, voc: voc, train: train, b: b, t: t, seed: seed, maxNorm: 1}
	for range 4 {
		x, y := valData.Next()
		m.val = append(m.val, [2][]float32{x, y})
	}
	m.gpt = models.NewGPT(dev, models.GPTConfig{Vocab: voc.Size(), Context: t, Dim: dim, Heads: heads, Layers: cfg.Int("layers"),
		Dropout: cfg.Float32("dropout")}, nn.NewRNG(seed))
	m.opt = nn.WithSchedule(nn.NewAdamW(m.gpt.Params(), cfg.Float32("lr"), 0.01), nn.LinearWarmup(20, 0.1))
	return m, nil
}

// Step runs one captured training step on the next batch.
func (m *Model) Step() (float32, error) { return m.StepMode(app.ModeCaptured) }

// StepMode runs one training step in mode: the same loss, reaching the
// device three ways (see app.ModeEager, ModeLazy, ModeCaptured).
func (m *Model) StepMode(mode string) (float32, error) {
	x, y := m.train.Next()
	switch mode {
	case app.ModeCaptured:
		if m.capt == nil {
			m.capt = nn.CaptureStep(m.opt, func(in []*core.Tensor) *core.Tensor { return m.gpt.Loss(in[0], in[1]) })
			m.capt.MaxGradNorm = m.maxNorm
		}
		return m.capt.Step(core.In(x, m.b, m.t), core.In(y, m.b, m.t))
	case app.ModeLazy, app.ModeEager:
		if mode == app.ModeEager {
			defer m.dev.SetEager(m.dev.SetEager(true))
		}
		m.opt.ZeroGrad()
		loss := m.gpt.Loss(m.dev.Tensor(x, m.b, m.t), m.dev.Tensor(y, m.b, m.t)).Keep()
		if err := loss.Backward(); err != nil {
			return 0, err
		}
		norm, err := nn.ClipGradNormLazy(m.opt, m.maxNorm)
		if err != nil {
			return 0, err
		}
		l, err := loss.Item()
		norm.Release() // not read: its buffer goes to the next step's norm
		return l, err
	}
	return 0, fmt.Errorf("chargpt: mode %q: want eager, lazy or captured", mode)
}

// ValLoss is the mean loss on the held-out batches, dropout off.
func (m *Model) ValLoss() (float64, error) {
	m.gpt.SetTraining(false)
	defer m.gpt.SetTraining(true)
	var sum float64
	for _, v := range m.val {
		var l float32
		var err error
		m.dev.NoGrad(func() { l, err = m.gpt.Loss(m.dev.Tensor(v[0], m.b, m.t), m.dev.Tensor(v[1], m.b, m.t)).Item() })
		if err != nil {
			return 0, fmt.Errorf("chargpt: held-out loss: %w", err)
		}
		sum += float64(l)
	}
	return sum / float64(len(m.val)), nil
}

// Eval measures the held-out loss.
func (m *Model) Eval() (app.Metrics, error) {
	l, err := m.ValLoss()
	if err != nil {
		return nil, err
	}
	return app.Metrics{"held-out loss": l}, nil
}

// Sample continues Prompt by 120 characters at temperature 0.8, each sample
// with the next seed.
func (m *Model) Sample() (string, error) {
	m.samples++
	out, err := m.gpt.Generate(m.dev, must(m.voc.Encode(Prompt)), 120, 0.8, rand.New(rand.NewPCG(m.seed, uint64(m.samples))))
	if err != nil {
		return "", fmt.Errorf("chargpt: sampling: %w", err)
	}
	return m.voc.Decode(out), nil
}

// Params lists the transformer's parameters.
func (m *Model) Params() []*core.Tensor { return m.gpt.Params() }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
