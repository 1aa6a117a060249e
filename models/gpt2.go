package models

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
	"github.com/ag-go/ag/safetensors"
)

// GPT2Config sizes a GPT2.
type GPT2Config struct {
	Vocab   int     // tokens (GPT-2's BPE: 50257)
	Context int     // longest sequence (learned positions; GPT-2: 1024)
	Dim     int     // model width
	Heads   int     // attention heads (Dim must be a multiple)
	Layers  int     // transformer blocks
	Dropout float32 // on embeddings, attention weights and residual branches (GPT-2: 0.1)
}

// GPT2Sizes are the architectures by name: OpenAI's four GPT-2 models
// (124M, 355M, 774M, 1558M parameters with the vocabulary of 50,257) and
// two small ones for tests and quick runs ("tiny", "mini"). The
// vocabulary is GPT-2's in every one: set Vocab for a smaller tokenizer.
var GPT2Sizes = map[string]GPT2Config{
	"124M":  {Vocab: 50257, Context: 1024, Dim: 768, Heads: 12, Layers: 12, Dropout: 0.1},
	"355M":  {Vocab: 50257, Context: 1024, Dim: 1024, Heads: 16, Layers: 24, Dropout: 0.1},
	"774M":  {Vocab: 50257, Context: 1024, Dim: 1280, Heads: 20, Layers: 36, Dropout: 0.1},
	"1558M": {Vocab: 50257, Context: 1024, Dim: 1600, Heads: 25, Layers: 48, Dropout: 0.1},
	"mini":  {Vocab: 50257, Context: 256, Dim: 256, Heads: 4, Layers: 4, Dropout: 0.1},
	"tiny":  {Vocab: 50257, Context: 128, Dim: 64, Heads: 4, Layers: 2, Dropout: 0.1},
}

// GPT2Size returns the architecture named name (see GPT2Sizes); an unknown
// name is an error listing the known ones.
func GPT2Size(name string) (GPT2Config, error) {
	c, ok := GPT2Sizes[name]
	if !ok {
		var names []string
		for k := range GPT2Sizes {
			names = append(names, k)
		}
		sort.Strings(names)
		return GPT2Config{}, fmt.Errorf("models.GPT2Size: no size %q (have %s)", name, strings.Join(names, ", "))
	}
	return c, nil
}

func (c GPT2Config) check() {
	if c.Vocab < 1 || c.Context < 1 || c.Dim < 1 || c.Heads < 1 || c.Layers < 1 || c.Dim%c.Heads != 0 {
		panic(fmt.Sprintf("models.NewGPT2: config %+v: every size must be >= 1 and Dim a multiple of Heads", c))
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		panic(fmt.Sprintf("models.NewGPT2: dropout %g outside [0, 1)", c.Dropout))
	}
}

// Params is the number of parameters of a GPT2 of this size (the tied
// embedding counted once).
func (c GPT2Config) Params() int {
	d := c.Dim
	block := 2*2*d + (d*3*d + 3*d) + (d*d + d) + (d*4*d + 4*d) + (4*d*d + d)
	return c.Vocab*d + c.Context*d + c.Layers*block + 2*d
}

// GPT2 is OpenAI's GPT-2 (Hugging Face's GPT2LMHeadModel): token and
// position embeddings, Layers pre-norm blocks of causal self-attention and
// a GELU (tanh form) feed-forward of width 4*Dim, a final LayerNorm, and
// logits from the token embedding itself (the output layer is tied to
// Wte: one tensor, its gradient the sum of both uses).
//
// Its tensors are named as GPT-2's state dict names them (NamedTensors),
// in the same layouts (Conv1D's weights are [in, out], as ag's Linear), so
// SaveSafetensors writes, and LoadGPT2Safetensors reads, the safetensors
// files of PyTorch's GPT-2. It differs from GPT, the repository's own
// transformer: one packed q, k, v projection, the tied head, GPT-2's
// initialisation.
type GPT2 struct {
	Config   GPT2Config
	Wte, Wpe *nn.Embedding
	Drop     *nn.Dropout
	Blocks   []*GPT2Block
	LnF      *nn.LayerNorm
	// SampleVocab, when in 1..Vocab, makes Generate draw only ids below
	// it: a tokenizer with fewer tokens than the embedding has rows (a BPE
	// learned from a small text) never makes the others.
	SampleVocab int
	// LossRows, when >= 1, caps the rows of logits Loss computes at once
	// (it chunks them anyway where they exceed the device's largest
	// buffer): a smaller step peak for a little recomputation.
	LossRows int
}

// GPT2Block is one of GPT-2's transformer blocks:
//
//	x = x + Dropout(CProj(Attention(CAttn(Ln1(x)))))
//	x = x + Dropout(MLPProj(GELU(CFc(Ln2(x)))))
//
// with CAttn the packed query, key and value projection [Dim, 3*Dim].
type GPT2Block struct {
	Ln1, Ln2     *nn.LayerNorm
	CAttn, CProj *nn.Linear
	CFc, MLPProj *nn.Linear
	Drop         *nn.Dropout
	Heads        int
	AttnDropout  float32 // on the attention weights in training mode
	Training     bool
}

// NewGPT2 makes a GPT2 on dev initialised as GPT-2: every weight
// Normal(0, 0.02) drawn from rng, the residual projections' (CProj,
// MLPProj) scaled by 1/sqrt(2*Layers), biases zero, LayerNorms the
// identity; in training mode.
func NewGPT2(dev *core.Device, c GPT2Config, rng *rand.Rand) *GPT2 {
	c.check()
	w := nn.Normal(0, 0.02)
	res := nn.Normal(0, 0.02/math.Sqrt(2*float64(c.Layers)))
	d := c.Dim
	g := &GPT2{
		Config: c,
		Wte:    nn.NewEmbedding(dev, c.Vocab, d, w, rng),
		Wpe:    nn.NewEmbedding(dev, c.Context, d, w, rng),
		Drop:   nn.NewDropout(c.Dropout),
		LnF:    nn.NewLayerNorm(dev, d, 1e-5, true),
	}
	for range c.Layers {
		g.Blocks = append(g.Blocks, &GPT2Block{
			Ln1:         nn.NewLayerNorm(dev, d, 1e-5, true),
			CAttn:       nn.NewLinearInit(dev, d, 3*d, true, w, rng),
			CProj:       nn.NewLinearInit(dev, d, d, true, res, rng),
			Ln2:         nn.NewLayerNorm(dev, d, 1e-5, true),
			CFc:         nn.NewLinearInit(dev, d, 4*d, true, w, rng),
			MLPProj:     nn.NewLinearInit(dev, 4*d, d, true, res, rng),
			Drop:        nn.NewDropout(c.Dropout),
			Heads:       c.Heads,
			AttnDropout: c.Dropout,
			Training:    true,
		})
	}
	return g
}

// Forward maps tokens idx [batch, T] (whole numbers as f32, T <= Context)
// to logits [batch, T, Vocab]: position t predicts token t+1.
func (g *GPT2) Forward(idx *core.Tensor) *core.Tensor {
	if idx == nil || idx.Rank() != 2 || idx.Dim(1) > g.Config.Context {
		panic(fmt.Sprintf("models.GPT2.Forward: tokens %v, want [batch, T] with T <= %d", idx, g.Config.Context))
	}
	x := g.hidden(idx)
	var logits *core.Tensor
	x.Device().Scope("lm_head", func() { logits = core.MatMulT(x, g.Wte.W, false, true) }) // tied: x·Wteᵀ
	return logits
}

// hidden is Forward before the head: LnF's output [batch, T, Dim].
func (g *GPT2) hidden(idx *core.Tensor) *core.Tensor {
	dev := idx.Device()
	var x *core.Tensor
	dev.Scope("Embedding", func() {
		x = core.Add(g.Wte.Forward(idx), core.SliceRows(g.Wpe.W, 0, idx.Dim(1)))
	})
	x = g.Drop.Forward(x)
	for i, b := range g.Blocks {
		dev.Scope(fmt.Sprintf("h%d", i), func() { x = b.Forward(x) })
	}
	return g.LnF.Forward(x)
}

// Forward applies the block to x [batch, T, Dim].
func (b *GPT2Block) Forward(x *core.Tensor) *core.Tensor {
	if x == nil || x.Rank() != 3 {
		panic(fmt.Sprintf("models.GPT2Block.Forward: input %v, want [batch, T, Dim]", x))
	}
	dev := x.Device()
	bs, t, d := x.Dim(0), x.Dim(1), x.Dim(2)
	h := b.Heads
	if h < 1 || d%h != 0 {
		panic(fmt.Sprintf("models.GPT2Block.Forward: %d heads for width %d: want a positive divisor", h, d))
	}
	var y *core.Tensor
	dev.Scope("attn", func() {
		qkv := b.CAttn.Forward(b.Ln1.Forward(x)) // [batch, T, 3*Dim]: q, k, v side by side, as GPT-2 packs them
		// -> [3, batch*T, Dim] (ranks stop at 4), then each of q, k, v
		// [batch, heads, T, Dim/heads]
		qkv = core.Permute(core.Reshape(qkv, bs*t, 3, d), 1, 0, 2)
		part := func(i int) *core.Tensor {
			return core.Permute(core.Reshape(core.SliceRows(qkv, i, 1), bs, t, h, d/h), 0, 2, 1, 3)
		}
		opt := &core.AttentionOptions{Causal: true}
		if dev.Guard(b.training) { // a Capture records each mode
			opt.Dropout = b.AttnDropout
		}
		a := core.Attention(part(0), part(1), part(2), opt)
		a = core.Reshape(core.Permute(a, 0, 2, 1, 3), bs, t, d)
		y = core.Add(x, b.Drop.Forward(b.CProj.Forward(a)))
	})
	dev.Scope("mlp", func() {
		f := b.MLPProj.Forward(core.GELU(b.CFc.Forward(b.Ln2.Forward(y))))
		y = core.Add(y, b.Drop.Forward(f))
	})
	return y
}

func (b *GPT2Block) training() bool { return b.Training }

// Params lists Ln1, CAttn, CProj, Ln2, CFc and MLPProj's parameters, in
// GPT-2's order.
func (b *GPT2Block) Params() []*core.Tensor {
	var ps []*core.Tensor
	for _, m := range []nn.Module{b.Ln1, b.CAttn, b.CProj, b.Ln2, b.CFc, b.MLPProj} {
		ps = append(ps, m.Params()...)
	}
	return ps
}

// SetTraining switches the block's dropouts on (true) or off.
func (b *GPT2Block) SetTraining(on bool) {
	b.Training = on
	b.Drop.SetTraining(on)
}

// LossChunkRows is how many rows (tokens) of logits GPT2.Loss computes at
// once out of rows on a device whose largest buffer holds maxBufferElems
// floats (0: no limit; core.Device.Info's MaxBufferElems): all of them
// when their logits [rows, Vocab] fit one buffer, else as many as fit (at
// least one).
func (c GPT2Config) LossChunkRows(rows, maxBufferElems int) int {
	if maxBufferElems <= 0 || c.Vocab < 1 || rows <= maxBufferElems/c.Vocab {
		return rows
	}
	return max(1, maxBufferElems/c.Vocab)
}

// Loss is the mean cross-entropy of Forward(idx) against the next tokens
// targets [batch, T].
//
// Where the logits [batch*T, Vocab] exceed the device's largest buffer
// (GPT-2 small at batch 4, context 1024: 206M floats), or LossRows is set
// and smaller, it computes them and their cross-entropy in chunks of rows
// (LossChunkRows), each chunk's loss weighted by its share of the rows: the
// same loss and gradients, within f32 rounding. Each chunk is a
// core.Checkpoint, so its logits are not kept for the backward but
// computed again there, one chunk at a time.
func (g *GPT2) Loss(idx, targets *core.Tensor) *core.Tensor {
	if idx == nil || targets == nil {
		panic(fmt.Sprintf("models.GPT2.Loss: tokens %v, targets %v: want both", idx, targets))
	}
	if !slices.Equal(targets.Shape(), idx.Shape()) {
		panic(fmt.Sprintf("models.GPT2.Loss: targets %v, want the shape of the tokens %v", targets.Shape(), idx.Shape()))
	}
	n := idx.Len()
	rows := g.Config.LossChunkRows(n, idx.Device().Info().MaxBufferElems)
	if g.LossRows >= 1 {
		rows = min(rows, g.LossRows)
	}
	if rows >= n {
		logits := g.Forward(idx)
		return nn.CrossEntropyLoss(core.Reshape(logits, n, g.Config.Vocab), core.Reshape(targets, n), nn.ClassOptions{})
	}
	if idx.Rank() != 2 || idx.Dim(1) > g.Config.Context {
		panic(fmt.Sprintf("models.GPT2.Loss: tokens %v, want [batch, T] with T <= %d", idx, g.Config.Context))
	}
	x := core.Reshape(g.hidden(idx), n, g.Config.Dim)
	y := core.Reshape(targets, n)
	var loss *core.Tensor
	idx.Device().Scope("lm_head", func() {
		for from := 0; from < n; from += rows {
			r := min(rows, n-from)
			yc := core.SliceRows(y, from, r)
			// kept instead, the chunks' logits would add up to all of
			// them (GPT-2 small at batch 4, context 1024: 11.4 GiB at the
			// peak, not 10.9)
			l := core.Checkpoint(func(xc *core.Tensor) *core.Tensor {
				return nn.CrossEntropyLoss(core.MatMulT(xc, g.Wte.W, false, true), yc, nn.ClassOptions{}) // tied: x·Wteᵀ
			}, core.SliceRows(x, from, r))
			l = core.Scale(l, float32(r)/float32(n)) // the chunk's mean, weighted by its rows
			if loss == nil {
				loss = l
			} else {
				loss = core.Add(loss, l)
			}
		}
	})
	return loss
}

// Params lists the parameters in GPT-2's order: Wte (the head's weight
// too, once), Wpe, the blocks', LnF's.
func (g *GPT2) Params() []*core.Tensor {
	var ps []*core.Tensor
	for _, n := range g.NamedTensors() {
		ps = append(ps, n.Tensor)
	}
	return ps
}

// NamedTensors names the parameters with GPT-2's state dict keys (without
// Hugging Face's "transformer." prefix): wte.weight, wpe.weight,
// h.N.ln_1.{weight,bias}, h.N.attn.c_attn.{weight,bias},
// h.N.attn.c_proj.*, h.N.ln_2.*, h.N.mlp.c_fc.*, h.N.mlp.c_proj.*,
// ln_f.*. The tied lm_head.weight is Wte and not named again.
func (g *GPT2) NamedTensors() []nn.Named {
	out := []nn.Named{{Name: "wte.weight", Tensor: g.Wte.W}, {Name: "wpe.weight", Tensor: g.Wpe.W}}
	lin := func(name string, l *nn.Linear) {
		out = append(out, nn.Named{Name: name + ".weight", Tensor: l.W}, nn.Named{Name: name + ".bias", Tensor: l.B})
	}
	norm := func(name string, l *nn.LayerNorm) {
		out = append(out, nn.Named{Name: name + ".weight", Tensor: l.Gain}, nn.Named{Name: name + ".bias", Tensor: l.Bias})
	}
	for i, b := range g.Blocks {
		p := fmt.Sprintf("h.%d.", i)
		norm(p+"ln_1", b.Ln1)
		lin(p+"attn.c_attn", b.CAttn)
		lin(p+"attn.c_proj", b.CProj)
		norm(p+"ln_2", b.Ln2)
		lin(p+"mlp.c_fc", b.CFc)
		lin(p+"mlp.c_proj", b.MLPProj)
	}
	norm("ln_f", g.LnF)
	return out
}

// SetTraining switches dropout on (true) or off in every layer.
func (g *GPT2) SetTraining(on bool) {
	g.Drop.SetTraining(on)
	for _, b := range g.Blocks {
		b.SetTraining(on)
	}
}

// Generate continues prompt by n tokens as GPT.Generate does: each drawn
// from the softmax of the last position's logits divided by temperature
// (0: the most likely token), in evaluation mode, over the last Context
// tokens; only ids below SampleVocab when it is set.
func (g *GPT2) Generate(dev *core.Device, prompt []int, n int, temperature float64, rng *rand.Rand) ([]int, error) {
	limit := g.Config.Vocab
	if g.SampleVocab >= 1 && g.SampleVocab < limit {
		limit = g.SampleVocab
	}
	return generate("models.GPT2.Generate", dev, g.Forward, g.SetTraining, g.Drop.Training, g.Config.Vocab, limit, g.Config.Context, prompt, n, temperature, rng)
}

// LoadGPT2Safetensors reads a GPT-2 state dict written by PyTorch
// (safetensors; all of r) into g, strictly: the keys of NamedTensors, all
// of them with or all without Hugging Face's "transformer." prefix, of
// g's shapes. A file may also hold lm_head.weight, which must equal
// wte.weight (GPT-2 ties them: another head is refused, not ignored), and
// the causal masks older transformers saved (h.N.attn.bias,
// h.N.attn.masked_bias), skipped; any other key is an error.
func LoadGPT2Safetensors(r io.Reader, g *GPT2) (nn.LoadReport, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nn.LoadReport{}, fmt.Errorf("models.LoadGPT2Safetensors: %w", err)
	}
	f, err := safetensors.Read(bytes.NewReader(data))
	if err != nil {
		return nn.LoadReport{}, fmt.Errorf("models.LoadGPT2Safetensors: %w", err)
	}
	prefix := ""
	if _, ok := f.Tensor("transformer.wte.weight"); ok {
		prefix = "transformer."
	}
	km := nn.KeyMap{Rename: func(name string) string { return prefix + name }}
	for _, t := range f.Tensors {
		k := strings.TrimPrefix(t.Name, prefix)
		if strings.HasPrefix(k, "h.") && (strings.HasSuffix(k, ".attn.bias") || strings.HasSuffix(k, ".attn.masked_bias")) {
			km.Ignore = append(km.Ignore, t.Name)
		}
	}
	if head, ok := f.Tensor("lm_head.weight"); ok {
		wte, ok := f.Tensor(prefix + "wte.weight")
		if !ok || !slices.Equal(head.Shape, wte.Shape) || !slices.EqualFunc(head.Data, wte.Data, sameBits) {
			return nn.LoadReport{}, fmt.Errorf("models.LoadGPT2Safetensors: lm_head.weight %v is not %swte.weight: GPT2 ties the head to the token embedding", head.Shape, prefix)
		}
		km.Ignore = append(km.Ignore, "lm_head.weight")
	}
	rep, err := nn.LoadSafetensors(bytes.NewReader(data), g, nn.LoadOptions{Keys: km})
	if err != nil {
		return rep, fmt.Errorf("models.LoadGPT2Safetensors: %w", err)
	}
	return rep, nil
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
