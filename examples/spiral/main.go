// Command spiral trains a classifier of the three-arm spiral: a small MLP
// learns to tell three interleaved spirals of points in the plane apart,
// which no straight line can. It prints the loss and the train and test
// accuracy as it goes.
//
//	go run ./examples/spiral -device cpu -steps 400
//	ag serve -app ./examples/spiral     # the same model trained in the page
package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/data"
	"github.com/ag-go/ag/nn"
)

func main() { app.Run(Spec) }

// Spec is the example for app.Run.
var Spec = app.Spec{
	Name:     "spiral",
	Describe: "an MLP classifying the points of three interleaved spirals (softmax cross-entropy, Adam, a captured step over batches gathered on the device)",
	Steps:    400,
	Params: []app.Param{
		{Name: "hidden", Default: 32, Min: 2, Max: 1024, Int: true, Doc: "units per hidden layer"},
		{Name: "layers", Default: 2, Min: 1, Max: 8, Int: true, Doc: "hidden layers"},
		{Name: "points", Default: 100, Min: 10, Max: 10000, Int: true, Doc: "training points per class"},
		{Name: "batch", Default: 32, Min: 1, Max: 4096, Int: true, Doc: "points per step"},
		{Name: "lr", Default: 0.01, Min: 1e-5, Max: 1, Doc: "Adam learning rate"},
		{Name: "seed", Default: 1, Min: 0, Max: 1 << 31, Int: true, Doc: "data and weight seed"},
	},
	Build: func(dev *core.Device, cfg app.Config) (app.Trainer, error) { return New(dev, cfg) },
}

// Classes is the number of spiral arms.
const Classes = 3

// Spirals returns n points of each arm (x, y pairs) and their labels: arm k
// is the curve r(cos(t+2πk/3), sin(t+2πk/3)) for r in 0..1 and t = 4r, with
// Gaussian noise of 0.2 on the angle, the classic set of cs231n.
func Spirals(n int, rng *rand.Rand) (xy, label []float32) {
	for k := range Classes {
		for i := range n {
			r := float64(i) / float64(n)
			t := 4*r + 2*math.Pi*float64(k)/Classes + rng.NormFloat64()*0.2
			xy = append(xy, float32(r*math.Cos(t)), float32(r*math.Sin(t)))
			label = append(label, float32(k))
		}
	}
	return xy, label
}

// Model is the classifier, its optimizer and its data on one device.
type Model struct {
	dev         *core.Device
	net         nn.Sequential
	opt         *nn.Adam
	x, y        *core.Tensor // training set on the device
	testX       *core.Tensor
	trainY      []float32
	testY       []float32
	loader      *data.Loader
	capt        *nn.StepCapture
	nTrain, nTe int
}

// New builds the model and the two point sets (train and test, drawn with
// different seeds) on dev.
func New(dev *core.Device, cfg app.Config) (*Model, error) {
	seed := uint64(cfg.Int("seed"))
	rng := rand.New(rand.NewPCG(seed, 7))
	xy, lab := Spirals(cfg.Int("points"), rng)
	txy, tlab := Spirals(cfg.Int("points"), rand.New(rand.NewPCG(seed, 8)))
	sizes := []int{2}
	for range cfg.Int("layers") {
		sizes = append(sizes, cfg.Int("hidden"))
	}
	sizes = append(sizes, Classes)
	m := &Model{dev: dev, net: nn.MLP(dev, sizes, core.ReLU, rng), trainY: lab, testY: tlab, nTrain: len(lab), nTe: len(tlab)}
	m.opt = nn.NewAdam(m.net.Params(), cfg.Float32("lr"))
	m.x = dev.Tensor(xy, len(lab), 2).Keep()
	m.y = dev.Tensor(lab, len(lab)).Keep()
	m.testX = dev.Tensor(txy, len(tlab), 2).Keep()
	if err := dev.Sync(m.x, m.y, m.testX); err != nil {
		return nil, fmt.Errorf("spiral: uploading the points: %w", err)
	}
	var err error
	m.loader, err = data.FromDevice(data.Options{Batch: cfg.Int("batch"), Shuffle: true, DropLast: cfg.Int("batch") <= len(lab), Seed: seed}, m.x, m.y)
	if err != nil {
		return nil, fmt.Errorf("spiral: %w", err)
	}
	return m, nil
}

// loss is the mean cross-entropy of the batch of rows idx.
func (m *Model) loss(idx *core.Tensor) *core.Tensor {
	return nn.SoftmaxCrossEntropy(m.net.Forward(core.Gather(m.x, idx)), core.Gather(m.y, idx))
}

// Step runs one captured training step on the next batch.
func (m *Model) Step() (float32, error) { return m.StepMode(app.ModeCaptured) }

// StepUnread runs one captured training step and does not read its loss
// back (app.UnreadStepper): the page's steps between those it shows, which
// on WebGPU are submitted without waiting.
func (m *Model) StepUnread() error {
	idx := m.nextBatch()
	return m.captured().StepUnread(core.In(idx, len(idx)))
}

// StepLater runs one captured training step and asks for its loss
// without waiting for it (app.LaterStepper): in the browser the page waits
// for it a few steps later, while the GPU runs the steps queued since.
func (m *Model) StepLater() (*core.Later, error) {
	idx := m.nextBatch()
	return m.captured().StepLater(core.In(idx, len(idx)))
}

// nextBatch is the next batch's row indices.
func (m *Model) nextBatch() []float32 {
	idx, ok := m.loader.NextIndices()
	if !ok { // the epoch ended; the next call starts a new one
		idx, _ = m.loader.NextIndices()
	}
	return idx
}

// captured is the captured training step, made on first use.
func (m *Model) captured() *nn.StepCapture {
	if m.capt == nil {
		m.capt = nn.CaptureStep(m.opt, func(in []*core.Tensor) *core.Tensor { return m.loss(in[0]) })
	}
	return m.capt
}

// StepMode runs one training step in mode (app.ModeEager, ModeLazy or
// ModeCaptured): the same loss, reaching the device three ways.
func (m *Model) StepMode(mode string) (float32, error) {
	idx := m.nextBatch()
	switch mode {
	case app.ModeCaptured:
		return m.captured().Step(core.In(idx, len(idx)))
	case app.ModeLazy, app.ModeEager:
		if mode == app.ModeEager {
			defer m.dev.SetEager(m.dev.SetEager(true))
		}
		m.opt.ZeroGrad()
		loss := m.loss(m.dev.Tensor(idx, len(idx))).Keep()
		if err := loss.Backward(); err != nil {
			return 0, err
		}
		if err := m.opt.Step(); err != nil {
			return 0, err
		}
		return loss.Item()
	}
	return 0, fmt.Errorf("spiral: mode %q: want eager, lazy or captured", mode)
}

// Accuracy is the share of the points x [n, 2] whose most likely class is
// their label.
func (m *Model) Accuracy(x *core.Tensor, labels []float32) (float64, error) {
	var pred []float32
	var err error
	m.dev.NoGrad(func() { pred, err = core.ArgMax(m.net.Forward(x), 1, false).Data() })
	if err != nil {
		return 0, fmt.Errorf("spiral: accuracy: %w", err)
	}
	right := 0
	for i, p := range pred {
		if p == labels[i] {
			right++
		}
	}
	return float64(right) / float64(len(labels)), nil
}

// Eval measures the train and test accuracy.
func (m *Model) Eval() (app.Metrics, error) {
	tr, err := m.Accuracy(m.x, m.trainY)
	if err != nil {
		return nil, err
	}
	te, err := m.Accuracy(m.testX, m.testY)
	if err != nil {
		return nil, err
	}
	return app.Metrics{"train accuracy": tr, "test accuracy": te}, nil
}

// Params lists the network's parameters.
func (m *Model) Params() []*core.Tensor { return m.net.Params() }
