// Package models holds whole models built from package nn, ready to train:
// GPT, a decoder-only transformer language model (the character-level
// model of ag's tests, benchmarks and examples), and CharVocab, its
// tokenizer; GPT2, OpenAI's GPT-2 architecture (tied embeddings, GPT-2's
// state dict names, so PyTorch's checkpoints load), whose tokenizer is
// package bpe. They are ordinary nn.Modules: read them as examples of how to
// compose layers.
package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// GPTConfig sizes a GPT.
type GPTConfig struct {
	Vocab   int     // tokens
	Context int     // longest sequence (learned positions)
	Dim     int     // model width
	Heads   int     // attention heads (Dim must be a multiple)
	Layers  int     // transformer blocks
	Hidden  int     // feed-forward width; 0 means 4*Dim
	Dropout float32 // on embeddings, attention weights and residual branches
	// Checkpoint recomputes each block's activations in the backward
	// (nn.Checkpointed) instead of keeping them: less memory, a third
	// more compute.
	Checkpoint bool
}

func (c GPTConfig) check() {
	if c.Vocab < 1 || c.Context < 1 || c.Dim < 1 || c.Heads < 1 || c.Layers < 1 || c.Hidden < 0 || c.Dim%c.Heads != 0 {
		panic(fmt.Sprintf("models.NewGPT: config %+v: every size must be >= 1 and Dim a multiple of Heads", c))
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		panic(fmt.Sprintf("models.NewGPT: dropout %g outside [0, 1)", c.Dropout))
	}
}

// GPT is a decoder-only transformer (GPT-2's layout): token and position
// embeddings, Layers pre-norm causal TransformerBlocks, a final LayerNorm
// and a linear head to Vocab logits.
type GPT struct {
	Config   GPTConfig
	Tok, Pos *nn.Embedding
	Drop     *nn.Dropout
	Blocks   []*nn.TransformerBlock
	LN       *nn.LayerNorm
	Head     *nn.Linear
}

// NewGPT makes a GPT on dev with weights drawn from rng: embeddings
// and head Normal(0, 0.02) as GPT-2's (so the first loss is about
// ln(Vocab)), the blocks' linear layers glorot-uniform.
func NewGPT(dev *core.Device, c GPTConfig, rng *rand.Rand) *GPT {
	c.check()
	if c.Hidden == 0 {
		c.Hidden = 4 * c.Dim
	}
	g := &GPT{
		Config: c,
		Tok:    nn.NewEmbedding(dev, c.Vocab, c.Dim, nn.Normal(0, 0.02), rng),
		Pos:    nn.NewEmbedding(dev, c.Context, c.Dim, nn.Normal(0, 0.02), rng),
		Drop:   nn.NewDropout(c.Dropout),
		LN:     nn.NewLayerNorm(dev, c.Dim, 1e-5, true),
		Head:   nn.NewLinearInit(dev, c.Dim, c.Vocab, true, nn.Normal(0, 0.02), rng),
	}
	for range c.Layers {
		g.Blocks = append(g.Blocks, nn.NewTransformerBlock(dev, c.Dim, c.Heads, c.Hidden, true, c.Dropout, rng))
	}
	return g
}

// Forward maps tokens idx [batch, T] (whole numbers as f32, T <= Context)
// to logits [batch, T, Vocab]: position t predicts token t+1.
func (g *GPT) Forward(idx *core.Tensor) *core.Tensor {
	if idx == nil || idx.Rank() != 2 || idx.Dim(1) > g.Config.Context {
		panic(fmt.Sprintf("models.GPT.Forward: tokens %v, want [batch, T] with T <= %d", idx, g.Config.Context))
	}
	dev := idx.Device()
	var x *core.Tensor
	dev.Scope("Embedding", func() {
		// positions 0..T-1 are the first T rows of the table
		x = core.Add(g.Tok.Forward(idx), core.SliceRows(g.Pos.W, 0, idx.Dim(1)))
	})
	x = g.Drop.Forward(x)
	for i, b := range g.Blocks {
		var m nn.Module = b
		if g.Config.Checkpoint {
			m = nn.Checkpointed{Module: b}
		}
		dev.Scope(fmt.Sprintf("block%d", i), func() { x = m.Forward(x) })
	}
	return g.Head.Forward(g.LN.Forward(x))
}

// Loss is the mean cross-entropy of Forward(idx) against the next tokens
// targets [batch, T].
func (g *GPT) Loss(idx, targets *core.Tensor) *core.Tensor {
	if idx == nil || targets == nil {
		panic(fmt.Sprintf("models.GPT.Loss: tokens %v, targets %v: want both", idx, targets))
	}
	if !slices.Equal(targets.Shape(), idx.Shape()) {
		panic(fmt.Sprintf("models.GPT.Loss: targets %v, want the shape of the tokens %v", targets.Shape(), idx.Shape()))
	}
	logits := g.Forward(idx)
	n := idx.Len()
	return nn.CrossEntropyLoss(core.Reshape(logits, n, g.Config.Vocab), core.Reshape(targets, n), nn.ClassOptions{})
}

// Params lists the embeddings', the blocks', the final norm's and the
// head's parameters, in that order.
func (g *GPT) Params() []*core.Tensor {
	ps := append(g.Tok.Params(), g.Pos.Params()...)
	for _, b := range g.Blocks {
		ps = append(ps, b.Params()...)
	}
	ps = append(ps, g.LN.Params()...)
	return append(ps, g.Head.Params()...)
}

// SetTraining switches dropout on (true) or off in every layer.
func (g *GPT) SetTraining(on bool) {
	g.Drop.SetTraining(on)
	for _, b := range g.Blocks {
		b.SetTraining(on)
	}
}

// Generate continues prompt by n tokens, each drawn from the softmax of the
// last position's logits divided by temperature (0 picks the most likely
// token), with rng. It runs in evaluation mode and restores training mode
// after; each token is one forward pass over the last Context tokens. Logits
// holding NaN or +Inf (a diverged model) are an error, returned with the
// tokens made so far, rather than a token picked from them. A nil device,
// or a nil rng at a temperature above 0, is an error.
func (g *GPT) Generate(dev *core.Device, prompt []int, n int, temperature float64, rng *rand.Rand) ([]int, error) {
	return generate("models.GPT.Generate", dev, g.Forward, g.SetTraining, g.Drop.Training, g.Config.Vocab, g.Config.Vocab, g.Config.Context, prompt, n, temperature, rng)
}

// generate is the sampling loop of GPT and GPT2's Generate (see
// GPT.Generate), fn naming the caller in errors; forward maps [1, T] tokens
// to [1, T, vocab] logits, and setTraining(training) restores the mode.
// Tokens are drawn among the first limit ids (limit <= vocab).
func generate(fn string, dev *core.Device, forward func(*core.Tensor) *core.Tensor, setTraining func(bool), training bool,
	vocab, limit, context int, prompt []int, n int, temperature float64, rng *rand.Rand) ([]int, error) {
	if dev == nil {
		return nil, fmt.Errorf("%s: nil device", fn)
	}
	if rng == nil && temperature > 0 {
		return nil, fmt.Errorf("%s: nil rng at temperature %g (only temperature 0, the most likely token, draws nothing)", fn, temperature)
	}
	if len(prompt) == 0 || n < 0 || temperature < 0 || math.IsNaN(temperature) {
		return nil, fmt.Errorf("%s: prompt of %d tokens, n %d, temperature %g: want a prompt, n >= 0, temperature >= 0", fn, len(prompt), n, temperature)
	}
	for _, p := range prompt {
		if p < 0 || p >= vocab {
			return nil, fmt.Errorf("%s: prompt token %d outside 0..%d", fn, p, vocab-1)
		}
	}
	setTraining(false)
	defer setTraining(training)
	out := slices.Clone(prompt)
	var err error
	for range n {
		ctx := out[max(0, len(out)-context):]
		idx := make([]float32, len(ctx))
		for i, v := range ctx {
			idx[i] = float32(v)
		}
		var last []float32
		dev.NoGrad(func() {
			logits := forward(dev.Tensor(idx, 1, len(ctx)))
			last, err = logits.ReadAt((len(ctx)-1)*vocab, vocab)
		})
		if err != nil {
			return out, fmt.Errorf("%s: %w", fn, err)
		}
		last = last[:limit]
		for i, v := range last {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 1) {
				return out, fmt.Errorf("%s: logit %d of token %d is %g: no distribution to sample", fn, i, len(out), v)
			}
		}
		out = append(out, sample(last, temperature, rng))
	}
	return out, nil
}

// sample draws an index from softmax(logits/temperature), or the argmax at
// temperature 0.
func sample(logits []float32, temperature float64, rng *rand.Rand) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	if temperature == 0 {
		return best
	}
	p := make([]float64, len(logits))
	var z float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - float64(logits[best])) / temperature)
		z += p[i]
	}
	u := rng.Float64() * z
	for i, v := range p {
		if u -= v; u < 0 {
			return i
		}
	}
	return best
}
