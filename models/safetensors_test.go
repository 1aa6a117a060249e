package models

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

func TestGPTNamedParams(t *testing.T) {
	dev := openDev(t)
	g := NewGPT(dev, GPTConfig{Vocab: 11, Context: 8, Dim: 8, Heads: 2, Layers: 2}, nn.NewRNG(1))
	ps, err := nn.NamedParams(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(g.Params()) {
		t.Fatalf("%d names for %d parameters", len(ps), len(g.Params()))
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Name)
	}
	want := []string{"Tok.W", "Pos.W",
		"Blocks.0.LN1.Gain", "Blocks.0.LN1.Bias",
		"Blocks.0.Attn.Q.W", "Blocks.0.Attn.Q.B", "Blocks.0.Attn.K.W", "Blocks.0.Attn.K.B",
		"Blocks.0.Attn.V.W", "Blocks.0.Attn.V.B", "Blocks.0.Attn.O.W", "Blocks.0.Attn.O.B",
		"Blocks.0.LN2.Gain", "Blocks.0.LN2.Bias", "Blocks.0.FF1.W", "Blocks.0.FF1.B", "Blocks.0.FF2.W", "Blocks.0.FF2.B"}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("names %q,\nwant %q...", got[:len(want)], want)
	}
	if tail := got[len(got)-4:]; !slices.Equal(tail, []string{"LN.Gain", "LN.Bias", "Head.W", "Head.B"}) {
		t.Errorf("last names %q", tail)
	}
}

// gptRun is a small GPT with AdamW under a warm-up schedule, trained a
// few steps on random tokens.
type gptRun struct {
	g   *GPT
	opt *nn.Scheduled
	x   *core.Tensor
	y   *core.Tensor
}

func newGPTRun(t *testing.T, dev *core.Device, seed uint64, steps int) *gptRun {
	t.Helper()
	cfg := GPTConfig{Vocab: 13, Context: 8, Dim: 16, Heads: 2, Layers: 2}
	r := rand.New(rand.NewPCG(seed, 1))
	g := NewGPT(dev, cfg, r)
	toks := make([]float32, 2*9)
	for i := range toks {
		toks[i] = float32(rand.New(rand.NewPCG(42, uint64(i))).IntN(cfg.Vocab))
	}
	x := make([]float32, 0, 16)
	y := make([]float32, 0, 16)
	for b := range 2 {
		x = append(x, toks[b*9:b*9+8]...)
		y = append(y, toks[b*9+1:b*9+9]...)
	}
	run := &gptRun{g: g, opt: nn.WithSchedule(nn.NewAdamW(g.Params(), 3e-3, 0.01), nn.LinearWarmup(4, 0.25)),
		x: dev.Tensor(x, 2, 8), y: dev.Tensor(y, 2, 8)}
	for range steps {
		run.step(t)
	}
	return run
}

func (r *gptRun) step(t *testing.T) float32 {
	t.Helper()
	r.opt.ZeroGrad()
	loss := r.g.Loss(r.x, r.y)
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	if err := r.opt.Step(); err != nil {
		t.Fatal(err)
	}
	v, err := loss.Item()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGPTSafetensorsCheckpoint saves a trained GPT's weights and its
// optimizer in two safetensors files, loads them into a GPT and optimizer
// made from another seed, and checks that the outputs are identical and
// that training goes on step for step as if never interrupted.
func TestGPTSafetensorsCheckpoint(t *testing.T) {
	dev := openDev(t)
	a := newGPTRun(t, dev, 1, 3)
	var weights, state bytes.Buffer
	if err := nn.SaveSafetensors(&weights, a.g, nn.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nn.SaveOptimizerSafetensors(&state, a.g, a.opt); err != nil {
		t.Fatal(err)
	}
	b := newGPTRun(t, dev, 2, 0)
	b.opt.Optimizer.(*nn.Adam).LR = 1 // a different learning rate: restored only when asked
	if _, err := nn.LoadSafetensors(&weights, b.g, nn.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.LoadOptimizerSafetensors(&state, b.g, b.opt, nn.OptimizerLoadOptions{Hyperparameters: true}); err != nil {
		t.Fatal(err)
	}
	ya, err := a.g.Forward(a.x).Data()
	if err != nil {
		t.Fatal(err)
	}
	yb, err := b.g.Forward(b.x).Data()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ya, yb) {
		t.Fatal("the loaded GPT's logits differ from the saved one's")
	}
	for i := range 3 {
		la, lb := a.step(t), b.step(t)
		if math.Float32bits(la) != math.Float32bits(lb) {
			t.Fatalf("step %d after loading: loss %g, the uninterrupted run's %g", i, lb, la)
		}
	}
	for i, p := range a.g.Params() {
		va, _ := p.Data()
		vb, _ := b.g.Params()[i].Data()
		if !slices.Equal(va, vb) {
			t.Fatalf("parameter %d differs after 3 more steps", i)
		}
	}
}
