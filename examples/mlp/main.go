// Command mlp is the model the page of `ag serve` trains by default: a
// multilayer perceptron (bench/workload's MLP) of Linear layers with ReLU
// between, fitted by Adam to a fixed random teacher under MSE. web/build.sh
// builds it for the browser into the ag.wasm that `ag serve` embeds, as
// `ag serve -app ./examples/mlp` would; natively it trains with progress
// lines like the other examples:
//
//	go run ./examples/mlp -device cpu -width 128 -steps 300
//
// Its Trainer is an app.ModeTrainer: ag.train({mode}) and the profile run
// its steps eager, lazy (the default) or captured. A model that does not
// fit in the page's wasm memory, or in the device's largest buffer, is
// refused before it is built (fit.go).
package main

import (
	"fmt"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

func main() { app.Run(Spec) }

// The bounds of the parameters; within them, checkFits refuses a model
// that does not fit in memory.
const (
	maxWidth = 4096
	maxDepth = 64
	maxBatch = 4096
)

// Spec is the page's MLP for app.Run. The page (web/static) knows it by
// its name and parameters: its form and description are index.html's own.
var Spec = app.Spec{
	Name:     "mlp",
	Describe: "MLP of Linear layers with ReLU between, MSE against a fixed random teacher, Adam.",
	Steps:    60,
	Params: []app.Param{
		{Name: "width", Default: 64, Min: 1, Max: maxWidth, Int: true, Doc: "units per layer"},
		{Name: "depth", Default: 2, Min: 1, Max: maxDepth, Int: true, Doc: "Linear layers"},
		{Name: "batch", Default: 16, Min: 1, Max: maxBatch, Int: true, Doc: "rows per step"},
		{Name: "lr", Default: 1e-2, Min: 1e-9, Max: 1, Doc: "Adam learning rate"},
	},
	Build: func(dev *core.Device, cfg app.Config) (app.Trainer, error) { return New(dev, cfg) },
}

// MLP is the workload's MLP as an app.Trainer, stepping in the mode last
// set (SetMode; lazy by default).
type MLP struct {
	m    *workload.MLP
	mode workload.Mode
}

// New builds the MLP of cfg (Spec's parameters) on dev with seed 1, after
// checkFits: a model too large for the page's memory or for dev's largest
// buffer is refused, naming the largest that fits.
func New(dev *core.Device, cfg app.Config) (*MLP, error) {
	width, depth, batch := cfg.Int("width"), cfg.Int("depth"), cfg.Int("batch")
	if err := checkFits(width, depth, batch, int64(dev.Info().MaxBufferElems)); err != nil {
		return nil, err
	}
	m, err := workload.New(dev, workload.Config{Width: width, Depth: depth, Batch: batch, LR: cfg.Float32("lr"), Seed: 1})
	if err != nil {
		return nil, err
	}
	return &MLP{m: m, mode: workload.Lazy}, nil
}

// SetMode sets the mode of the following Step, StepUnread and StepLater:
// app.ModeEager, app.ModeLazy or app.ModeCaptured; "" is lazy.
func (t *MLP) SetMode(mode string) error {
	switch mode {
	case "":
		t.mode = workload.Lazy
	case app.ModeEager, app.ModeLazy, app.ModeCaptured:
		t.mode = workload.Mode(mode)
	default:
		return fmt.Errorf("mlp: mode %q: want %q, %q or %q", mode, app.ModeEager, app.ModeLazy, app.ModeCaptured)
	}
	return nil
}

// Step runs one training step in the mode set and reads its loss.
func (t *MLP) Step() (float32, error) { return t.m.StepMode(t.mode) }

// StepUnread runs one training step in the mode set without reading its
// loss (app.UnreadStepper).
func (t *MLP) StepUnread() error { return t.m.StepUnread(t.mode) }

// StepLater runs one training step in the mode set and asks for its loss
// without waiting for it (app.LaterStepper).
func (t *MLP) StepLater() (*core.Later, error) { return t.m.StepLater(t.mode) }

// StepMode runs one training step in mode, whatever the mode set
// (app.ModeStepper: the profile's modes).
func (t *MLP) StepMode(mode string) (float32, error) { return t.m.StepMode(workload.Mode(mode)) }

// Params are the Linear layers' weights and biases (app.Counter).
func (t *MLP) Params() []*core.Tensor { return t.m.Model.Params() }

// FLOPs is the arithmetic of one step (app.FLOPsCounter).
func (t *MLP) FLOPs() float64 { return t.m.FLOPs() }
