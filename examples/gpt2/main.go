// Command gpt2 trains OpenAI's GPT-2 architecture (models.GPT2: 12 layers
// of width 768, 12 heads, context 1024, tied embeddings, GELU, pre-norm,
// dropout at -size 124M; smaller sizes for quick runs) on a text of yours,
// with GPT-2's byte-level BPE (package bpe), and samples from it.
//
//	go run ./examples/gpt2 -text notes.txt -size tiny -steps 300
//	ag serve -app ./examples/gpt2    # the same in the page
//	go run ./examples/gpt2 -size 124M -steps 1 -ctx 64 -batch 1 -device cpu -text README.md
//
// The tokenizer is learned from the text (-bpe tokens at most, 8192 by
// default: on 4 MB of Go source every token then occurs about 160 times on
// average, where GPT-2's 50257 would leave many seen a handful of times)
// unless GPT-2's own files are given (-vocab-json encoder.json or
// vocab.json, -merges merges.txt). -size sets the architecture, -vocab the number of
// embedding rows: 50257 by default, GPT-2's, so -size 124M has GPT-2
// small's 124,439,808 parameters whatever the text. A small text stops the
// BPE early, when no pair of tokens repeats (README.md gives under two
// thousand tokens): the rows of ids it never makes stay unused, and
// samples draw only the tokenizer's ids. -ctx is the length of the training sequences; the
// position table keeps the size's context (1024 rows at 124M).
//
// It is an app.Spec: natively it prints the tokenizer, the unigram entropy
// of the text's tokens (the loss of a model that ignores the context) and
// the architecture, "parameters: N", the loss as it trains (with the
// smoothed loss and, once it is below the unigram entropy, the step it
// fell below) and a sample at the end; `ag serve
// -app ./examples/gpt2` trains it in the page, from a text file picked or
// dropped there. A size whose weights, gradients, Adam state and
// activations do not fit the device's free memory (in the page, the wasm
// memory) or its largest buffer is refused before anything is allocated,
// naming the sizes that fit. -save FILE (in the page, the checkpoint
// download) writes the model as a safetensors file with GPT-2's keys
// (Hugging Face's GPT2LMHeadModel loads it, its lm_head tied) and the
// tokenizer in its metadata; -load FILE reads such a file, or PyTorch's
// GPT-2 checkpoint, before training.
//
// Train, the same model as a function, prints the loss as "step i/n" and
// writes the tokenizer beside a saved model (FILE less .safetensors, plus
// -vocab.json and -merges.txt), as the command did before it was an
// app.Spec.
package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/bpe"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
	"github.com/ag-go/ag/safetensors"
)

func main() { app.Run(Spec) }

// sizeNames are the choices of -size, smallest first.
var sizeNames = []string{"tiny", "mini", "124M", "355M", "774M", "1558M"}

// Spec is the example for app.Run.
var Spec = app.Spec{
	Name:     "gpt2",
	Describe: "OpenAI's GPT-2 architecture (models.GPT2) with a byte-level BPE learned from your text, trained with AdamW (warm-up, gradient clipping, a captured step), sampling as it learns",
	Steps:    200,
	Params: []app.Param{
		app.ChoiceParam("size", "tiny", "architecture: tiny (2x64), mini (4x256), 124M (GPT-2 small), 355M, 774M, 1558M", sizeNames...),
		{Name: "vocab", Default: 50257, Min: 1, Max: 1 << 20, Int: true, Doc: "embedding rows (at least the tokenizer's tokens)"},
		{Name: "bpe", Default: 8192, Min: 256, Max: 1 << 20, Int: true, Doc: "the most tokens the BPE learned from the text may have (at most -vocab)"},
		{Name: "ctx", Default: 64, Min: 1, Max: 1 << 20, Int: true, Doc: "tokens per training sequence (at most the size's context)"},
		{Name: "batch", Default: 8, Min: 1, Max: 4096, Int: true, Doc: "sequences per step"},
		{Name: "lr", Default: -1, Min: -1, Max: 1, Doc: "AdamW learning rate after the warm-up; -1 is the size's (sizeLR: 6e-4 at 124M)"},
		{Name: "warmup", Default: -1, Min: -1, Max: 1 << 20, Int: true, Doc: "steps of linear learning-rate warm-up from a tenth; -1 is the size's (20, 50 from 124M up)"},
		{Name: "dropout", Default: -1, Min: -1, Max: 0.99, Doc: "dropout probability; -1 keeps the size's (0.1)"},
		{Name: "seed", Default: 1, Min: 0, Max: 1 << 31, Int: true, Doc: "weight, data and dropout seed"},
		{Name: "sample", Default: 40, Min: 0, Max: 4096, Int: true, Doc: "tokens per sample"},
	},
	Strings: []app.StringParam{{Name: "prompt", Default: "The", Doc: "start of each sample"}},
	Files: []app.FileParam{
		{Name: "text", Doc: "the training text (default: the short story the repository ships, models.KeeperText)"},
		{Name: "vocab-json", Doc: "GPT-2's encoder.json or vocab.json (with merges) instead of a BPE learned from the text"},
		{Name: "merges", Doc: "GPT-2's merges.txt (with vocab-json)"},
	},
	Checkpoint: true,
	BuildInput: func(dev *core.Device, in app.Input) (app.Trainer, error) {
		o := Options{Size: in.Choice("size"), Vocab: in.Int("vocab"), BPE: in.Int("bpe"), Ctx: in.Int("ctx"), Batch: in.Int("batch"),
			LR: in.Float32("lr"), Warmup: in.Int("warmup"), Dropout: in.Float("dropout"), Seed: uint64(in.Int("seed")), Sample: in.Int("sample"),
			Prompt: in.String("prompt")}
		if f := in.File("text"); f.Name != "" {
			if len(f.Data) == 0 {
				// "" would otherwise mean "no text given": the shipped story
				return nil, fmt.Errorf("gpt2: -text %s: the file is empty", f.Name)
			}
			o.Text, o.TextName = string(f.Data), f.Name
		}
		o.vocabJSON, o.merges = in.File("vocab-json"), in.File("merges")
		o.VocabJSON, o.Merges = o.vocabJSON.Name, o.merges.Name
		return New(dev, o)
	},
}

// Options are the settings of a run (the flags).
type Options struct {
	Text      string  // the training text; "" is models.KeeperText
	TextName  string  // what to call it in the output
	Size      string  // a name of models.GPT2Sizes
	Vocab     int     // embedding rows
	BPE       int     // the most tokens a learned BPE gets (0: Vocab); at most Vocab
	VocabJSON string  // GPT-2's encoder.json / vocab.json, with Merges
	Merges    string  // GPT-2's merges.txt
	Ctx       int     // tokens per training sequence
	Batch     int     // sequences per step
	Steps     int     // training steps (Train's)
	LR        float32 // AdamW's learning rate, after a linear warm-up; < 0: the size's (sizeLR)
	Warmup    int     // steps of the warm-up; < 0: the size's (sizeWarmup)
	Dropout   float64 // -1 keeps the size's
	Seed      uint64
	Sample    int    // tokens per sample
	Prompt    string // starts each sample
	Load      string // a safetensors file to start from (Train's)
	Save      string // where to write the model, the tokenizer beside it (Train's)

	// the contents of VocabJSON and Merges when given as files (the
	// page's, app.Input's); read from the paths when empty
	vocabJSON, merges app.File
}

// Model is GPT-2 with its tokenizer, data, optimizer and captured step:
// an app.Trainer, Evaluator, Sampler, Counter, Describer, Outputter and
// Checkpointer.
type Model struct {
	dev     *core.Device
	o       Options
	cfg     models.GPT2Config
	tok     *bpe.Tokenizer
	how     string // where the tokenizer came from
	ids     []int  // the text's tokens
	batches *models.Batches
	fixed   [2][]float32 // FixedBatch of ids
	G       *models.GPT2
	step    *nn.StepCapture
	samples int
	built   string

	unigram  float64 // the unigram entropy of ids, nats per token
	smooth   float64 // the training loss, smoothed (lossSmoothing)
	steps    int     // steps taken
	crossed  int     // the first step whose smoothed loss is below unigram; 0: none yet
	crossMsg string  // what Train prints when it crosses
}

// lossSmoothing is the weight of the past in the smoothed training loss
// (an exponential moving average over about ten steps, bias-corrected):
// one batch's loss is noisy, and a single lucky batch below the unigram
// entropy says little.
const lossSmoothing = 0.9

// UnigramEntropy is the entropy, in nats per token, of the tokens' own
// frequencies in ids: the loss of the best model that ignores the context
// (it predicts every token with its frequency). A language model's loss
// below it shows that it uses the context.
func UnigramEntropy(ids []int) float64 {
	count := map[int]int{}
	for _, id := range ids {
		count[id]++
	}
	// summed in id order: the same bits on every run (a map's order is not)
	n, h := float64(len(ids)), 0.0
	for _, id := range slices.Sorted(maps.Keys(count)) {
		p := float64(count[id]) / n
		h -= p * math.Log(p)
	}
	return h
}

// sizeLR is each size's learning rate: GPT-3's (Brown et al. 2020, table
// 2.1: 6e-4 at 125M, 3e-4 at 350M, 2.5e-4 at 760M, 2e-4 at 1.3B), which
// nanoGPT and llm.c use for GPT-2 124M too; the small sizes learn at
// 1e-3 (tested: examples/gpt2's TestUnigramCrossing).
var sizeLR = map[string]float32{"tiny": 1e-3, "mini": 1e-3, "124M": 6e-4, "355M": 3e-4, "774M": 2.5e-4, "1558M": 2e-4}

// sizeWarmup is each size's warm-up in steps: short, since a run here is
// hundreds of steps, not GPT-2's hundreds of thousands; longer from 124M
// up, whose first updates at the full rate are the least stable.
var sizeWarmup = map[string]int{"tiny": 20, "mini": 20, "124M": 50, "355M": 50, "774M": 50, "1558M": 50}

// New makes the model of o on dev: first the memory check (checkFits:
// nothing is allocated for a size that does not fit), then the tokenizer
// (learned from the text or read from GPT-2's files), the batches of the
// text, GPT-2 and its AdamW.
func New(dev *core.Device, o Options) (*Model, error) {
	cfg, err := models.GPT2Size(o.Size)
	if err != nil {
		return nil, fmt.Errorf("gpt2: -size: %w", err)
	}
	defLR, okLR := sizeLR[o.Size]
	defWarmup, okWarmup := sizeWarmup[o.Size]
	if !okLR || !okWarmup {
		// a size added to models.GPT2Sizes without its defaults here
		return nil, fmt.Errorf("gpt2: size %s has no default learning rate or warm-up (sizeLR, sizeWarmup)", o.Size)
	}
	if o.Text == "" {
		o.Text, o.TextName = models.KeeperText, "models.KeeperText"
	}
	if o.TextName == "" {
		o.TextName = "the text"
	}
	if o.Dropout >= 0 {
		cfg.Dropout = float32(o.Dropout)
	}
	if o.Ctx < 1 || o.Ctx > cfg.Context || o.Batch < 1 || o.Steps < 0 || o.Sample < 0 {
		return nil, fmt.Errorf("gpt2: -ctx %d, -batch %d, -steps %d, -sample %d: want 1 <= ctx <= %d (the %s context), batch >= 1, steps and sample >= 0",
			o.Ctx, o.Batch, o.Steps, o.Sample, cfg.Context, o.Size)
	}
	cfg.Vocab = o.Vocab
	if o.Vocab < 1 {
		return nil, fmt.Errorf("gpt2: -vocab %d: want >= 1", o.Vocab)
	}
	if err := checkFits(o.Size, cfg, o.Batch, o.Ctx, deviceBudget(dev)); err != nil {
		return nil, err
	}
	start := time.Now()
	tok, how, err := tokenizer(o)
	if err != nil {
		return nil, err
	}
	m := &Model{dev: dev, o: o, cfg: cfg, tok: tok, how: how}
	m.ids = tok.Encode([]byte(o.Text))
	m.built = fmt.Sprintf("tokenizer: %d tokens (%s); %s: %d bytes, %d tokens (%.1fs)\n", tok.Size(), how, o.TextName, len(o.Text), len(m.ids), time.Since(start).Seconds())
	if tok.Size() > cfg.Vocab {
		return nil, fmt.Errorf("gpt2: the tokenizer has %d tokens, more than -vocab %d embedding rows", tok.Size(), cfg.Vocab)
	}
	if m.batches, err = models.NewBatches(m.ids, o.Batch, o.Ctx, o.Seed+1); err != nil {
		return nil, fmt.Errorf("gpt2: %s is %d tokens, too short for -ctx %d: %w", o.TextName, len(m.ids), o.Ctx, err)
	}
	m.fixed = FixedBatch(m.ids, o.Batch, o.Ctx)
	m.unigram = UnigramEntropy(m.ids)
	m.built += fmt.Sprintf("unigram entropy of the training tokens: %.4f nats/token (the loss of a model that ignores the context)\n", m.unigram)
	if err := dev.Seed(o.Seed); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	start = time.Now()
	m.G = models.NewGPT2(dev, cfg, nn.NewRNG(o.Seed))
	m.G.SampleVocab = tok.Size()
	m.built += fmt.Sprintf("gpt2 %s on %s: %d layers, width %d, %d heads, context %d, vocabulary %d, dropout %g\n",
		o.Size, dev, cfg.Layers, cfg.Dim, cfg.Heads, cfg.Context, cfg.Vocab, cfg.Dropout)
	m.built += fmt.Sprintf("parameters: %d (%.1fs to initialise)", cfg.Params(), time.Since(start).Seconds())
	lr, warmup := o.LR, o.Warmup
	if lr < 0 {
		lr = defLR
	}
	if warmup < 0 {
		warmup = defWarmup
	}
	m.built += fmt.Sprintf("\nAdamW: lr %g after %d steps of warm-up, betas 0.9 and 0.95, weight decay 0.1, gradients clipped to norm 1", lr, warmup)
	// GPT-3's and nanoGPT's AdamW: beta2 0.95 follows the loss faster
	// than Adam's 0.999 in a short run
	adam := nn.NewAdamW(m.G.Params(), lr, 0.1)
	adam.Beta2 = 0.95
	var opt nn.Optimizer = adam
	if warmup > 0 {
		opt = nn.WithSchedule(adam, nn.LinearWarmup(warmup, 0.1))
	}
	m.step = nn.CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return m.G.Loss(in[0], in[1]) })
	m.step.MaxGradNorm = 1
	return m, nil
}

// Built says what New made: the tokenizer, the text, the architecture and
// "parameters: N" (app.Describer).
func (m *Model) Built() string { return m.built }

// Step runs one captured training step on the next batch, and notes the
// first step whose smoothed loss is below the unigram entropy.
func (m *Model) Step() (float32, error) {
	x, y := m.batches.Next()
	l, err := m.step.Step(core.In(x, m.o.Batch, m.o.Ctx), core.In(y, m.o.Batch, m.o.Ctx))
	if err != nil {
		return l, err
	}
	m.steps++
	m.smooth = lossSmoothing*m.smooth + (1-lossSmoothing)*float64(l)
	if s := m.smoothed(); m.crossed == 0 && s < m.unigram {
		m.crossed = m.steps
		m.crossMsg = fmt.Sprintf("step %d: the smoothed training loss %.4f is below the unigram entropy %.4f", m.steps, s, m.unigram)
	}
	return l, nil
}

// smoothed is the smoothed training loss, bias-corrected (NaN before the
// first step).
func (m *Model) smoothed() float64 {
	return m.smooth / (1 - math.Pow(lossSmoothing, float64(m.steps)))
}

// FixedBatch is the batch Eval measures: the inputs and targets of the
// text's first batch sequences of ctx tokens, end to end (wrapping round
// a text shorter than that; NewBatches has checked that it has ctx+1
// tokens).
func FixedBatch(ids []int, batch, ctx int) [2][]float32 {
	x, y := make([]float32, batch*ctx), make([]float32, batch*ctx)
	n := len(ids) - 1
	for i := range x {
		x[i], y[i] = float32(ids[i%n]), float32(ids[i%n+1])
	}
	return [2][]float32{x, y}
}

// FixedLoss is the loss of g on FixedBatch's batch, dropout off.
func FixedLoss(dev *core.Device, g *models.GPT2, fixed [2][]float32, batch, ctx int) (float32, error) {
	g.SetTraining(false)
	defer g.SetTraining(true)
	var l float32
	var err error
	dev.NoGrad(func() { l, err = g.Loss(dev.Tensor(fixed[0], batch, ctx), dev.Tensor(fixed[1], batch, ctx)).Item() })
	return l, err
}

// Eval measures the loss on the text's first batch (FixedBatch), dropout
// off: the same number wherever the model is loaded (app.Evaluator).
func (m *Model) Eval() (app.Metrics, error) {
	l, err := FixedLoss(m.dev, m.G, m.fixed, m.o.Batch, m.o.Ctx)
	if err != nil {
		return nil, fmt.Errorf("gpt2: fixed-batch loss: %w", err)
	}
	r := app.Metrics{"fixed-batch loss": float64(l), "unigram entropy": m.unigram}
	if m.steps > 0 {
		r["smoothed loss"] = m.smoothed()
	}
	if m.crossed > 0 {
		r["step below unigram entropy"] = float64(m.crossed)
	}
	return r, nil
}

// outputPositions is how many positions of the fixed batch's first
// sequence Outputs gives the logits of (all of them when ctx is fewer).
const outputPositions = 16

// Outputs are the logits [n, Vocab], row by row, of the first n =
// min(ctx, outputPositions) tokens of FixedBatch's first sequence, dropout
// off (app.Outputter): what a test compares value by value between the
// page and a checkpoint loaded natively. Causal, position t's logits do
// not depend on the tokens after it.
func (m *Model) Outputs() ([]float32, error) {
	n := min(m.o.Ctx, outputPositions)
	m.G.SetTraining(false)
	defer m.G.SetTraining(true)
	var out []float32
	var err error
	m.dev.NoGrad(func() { out, err = m.G.Forward(m.dev.Tensor(m.fixed[0][:n], 1, n)).Data() })
	if err != nil {
		return nil, fmt.Errorf("gpt2: outputs: %w", err)
	}
	return out, nil
}

// Params lists GPT-2's parameters (app.Counter).
func (m *Model) Params() []*core.Tensor { return m.G.Params() }

// Sample continues the prompt by o.Sample tokens at temperature 0.8, each
// sample with the next seed (app.Sampler).
func (m *Model) Sample() (string, error) {
	s, err := m.sample(m.samples)
	m.samples++
	return s, err
}

func (m *Model) sample(k int) (string, error) {
	prompt := m.tok.Encode([]byte(m.o.Prompt))
	if len(prompt) == 0 {
		return "", fmt.Errorf("gpt2: -prompt is empty: a sample continues at least one token")
	}
	if len(prompt) > m.cfg.Context {
		prompt = prompt[len(prompt)-m.cfg.Context:]
	}
	gen, err := m.G.Generate(m.dev, prompt, m.o.Sample, 0.8, rand.New(rand.NewPCG(m.o.Seed, uint64(k))))
	if err != nil {
		return "", fmt.Errorf("gpt2: sampling: %w", err)
	}
	return decode(m.tok, gen), nil
}

// Metadata keys of the tokenizer in a checkpoint Save writes.
const (
	metaVocab  = "ag.bpe.vocab.json"
	metaMerges = "ag.bpe.merges.txt"
)

// Save writes the model as a safetensors file with GPT-2's keys (what
// Hugging Face's GPT2LMHeadModel loads), the tokenizer in its metadata
// (GPT-2's vocab.json and merges.txt): app.Checkpointer. Adam's state is
// not saved: a loaded model's optimizer starts afresh.
func (m *Model) Save(w io.Writer) error {
	var vb, mb strings.Builder
	if err := m.tok.Write(&vb, &mb); err != nil {
		return fmt.Errorf("gpt2: saving the tokenizer: %w", err)
	}
	meta := map[string]string{"format": "pt", "ag.gpt2.size": m.o.Size, metaVocab: vb.String(), metaMerges: mb.String()}
	return nn.SaveSafetensors(w, m.G, nn.SaveOptions{Metadata: meta})
}

// Load reads a file Save wrote, or PyTorch's GPT-2 checkpoint, into the
// model: the weights, and the tokenizer when the file holds one (the text
// is then tokenized again with it).
func (m *Model) Load(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("gpt2: load: %w", err)
	}
	f, err := safetensors.Read(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("gpt2: load: %w", err)
	}
	tok := m.tok
	if v, ok := f.Metadata[metaVocab]; ok {
		if tok, err = bpe.Read(strings.NewReader(v), strings.NewReader(f.Metadata[metaMerges])); err != nil {
			return fmt.Errorf("gpt2: load: the checkpoint's tokenizer: %w", err)
		}
		if tok.Size() > m.cfg.Vocab {
			return fmt.Errorf("gpt2: load: the checkpoint's tokenizer has %d tokens, more than the model's %d embedding rows (-vocab)", tok.Size(), m.cfg.Vocab)
		}
	}
	if _, err := models.LoadGPT2Safetensors(bytes.NewReader(data), m.G); err != nil {
		return fmt.Errorf("gpt2: load: %w", err)
	}
	if tok != m.tok {
		ids := tok.Encode([]byte(m.o.Text))
		b, err := models.NewBatches(ids, m.o.Batch, m.o.Ctx, m.o.Seed+1)
		if err != nil {
			return fmt.Errorf("gpt2: load: %s is %d tokens with the checkpoint's tokenizer, too short for -ctx %d: %w", m.o.TextName, len(ids), m.o.Ctx, err)
		}
		m.tok, m.ids, m.batches, m.how = tok, ids, b, "the checkpoint's"
		m.unigram = UnigramEntropy(ids)
		m.fixed = FixedBatch(ids, m.o.Batch, m.o.Ctx)
		m.G.SampleVocab = tok.Size()
	}
	return nil
}

// Train runs o on dev, printing to out: the loss as "step i/n", the
// model and its tokenizer saved to o.Save, and two samples.
func Train(dev *core.Device, o Options, out io.Writer) error {
	m, err := New(dev, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, m.built)
	if o.Load != "" {
		f, err := os.Open(o.Load)
		if err != nil {
			return fmt.Errorf("gpt2: -load: %w", err)
		}
		err = m.Load(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("gpt2: -load %s: %w", o.Load, err)
		}
		fmt.Fprintf(out, "loaded %s\n", o.Load)
	}
	every := max(1, o.Steps/10)
	start := time.Now()
	last := start
	for i := 1; i <= o.Steps; i++ {
		loss, err := m.Step()
		if err != nil {
			return fmt.Errorf("gpt2: step %d: %w", i, err)
		}
		if m.crossMsg != "" {
			fmt.Fprintln(out, m.crossMsg)
			m.crossMsg = ""
		}
		if i == 1 || i%every == 0 || i == o.Steps {
			now := time.Now()
			fmt.Fprintf(out, "step %d/%d  loss %.4f  %.0f ms since the last line\n", i, o.Steps, loss, float64(now.Sub(last).Microseconds())/1e3)
			last = now
		}
	}
	if o.Steps > 0 {
		fmt.Fprintf(out, "trained %d steps in %.1fs\n", o.Steps, time.Since(start).Seconds())
	}
	if o.Save != "" {
		if err := save(o.Save, m.G, m.tok, out); err != nil {
			return err
		}
	}
	if o.Sample > 0 {
		for k := range 2 {
			txt, err := m.sample(k)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "sample %d:\n%s\n", k+1, txt)
		}
	}
	return nil
}

// tokenizer reads GPT-2's files or learns a BPE from the text, and says
// which.
func tokenizer(o Options) (*bpe.Tokenizer, string, error) {
	if (o.VocabJSON == "") != (o.Merges == "") {
		return nil, "", fmt.Errorf("gpt2: -vocab-json %q, -merges %q: give both or neither", o.VocabJSON, o.Merges)
	}
	if o.VocabJSON != "" {
		read := func(f app.File, flag string) ([]byte, error) {
			if f.Name != "" {
				return f.Data, nil
			}
			path := o.VocabJSON
			if flag == "merges" {
				path = o.Merges
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("gpt2: -%s: %w", flag, err)
			}
			return b, nil
		}
		v, err := read(o.vocabJSON, "vocab-json")
		if err != nil {
			return nil, "", err
		}
		mg, err := read(o.merges, "merges")
		if err != nil {
			return nil, "", err
		}
		tok, err := bpe.Read(bytes.NewReader(v), bytes.NewReader(mg))
		if err != nil {
			return nil, "", fmt.Errorf("gpt2: %w", err)
		}
		return tok, "read from " + o.VocabJSON + " and " + o.Merges, nil
	}
	n := o.Vocab
	if o.BPE > 0 {
		n = min(n, o.BPE)
	}
	tok, err := bpe.Train([]byte(o.Text), n)
	if err != nil {
		return nil, "", fmt.Errorf("gpt2: -vocab %d, -bpe %d: %w", o.Vocab, o.BPE, err)
	}
	how := fmt.Sprintf("learned from the text, at most %d", n)
	if tok.Size() < n {
		how += ": no pair repeats past that"
	}
	return tok, how, nil
}

// decode prints ids, an id the tokenizer does not have as U+FFFD (never
// made: Generate draws below GPT2.SampleVocab).
func decode(tok *bpe.Tokenizer, ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if t := tok.Token(id); t != nil {
			b.Write(t)
		} else {
			b.WriteRune('\uFFFD')
		}
	}
	return b.String()
}

// save writes the model to path with GPT-2's keys and the tokenizer beside
// it in GPT-2's format.
func save(path string, g *models.GPT2, tok *bpe.Tokenizer, out io.Writer) error {
	base := strings.TrimSuffix(path, ".safetensors")
	vocab, merges := base+"-vocab.json", base+"-merges.txt"
	write := func(name string, f func(io.Writer) error) error {
		fh, err := os.Create(name)
		if err != nil {
			return fmt.Errorf("gpt2: -save: %w", err)
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("gpt2: -save %s: %w", name, err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("gpt2: -save %s: %w", name, err)
		}
		return nil
	}
	if err := write(path, func(w io.Writer) error {
		return nn.SaveSafetensors(w, g, nn.SaveOptions{Metadata: map[string]string{"format": "pt"}})
	}); err != nil {
		return err
	}
	var vb, mb strings.Builder
	if err := tok.Write(&vb, &mb); err != nil {
		return fmt.Errorf("gpt2: -save: %w", err)
	}
	if err := write(vocab, func(w io.Writer) error { _, err := io.WriteString(w, vb.String()); return err }); err != nil {
		return err
	}
	if err := write(merges, func(w io.Writer) error { _, err := io.WriteString(w, mb.String()); return err }); err != nil {
		return err
	}
	fmt.Fprintf(out, "saved %s, %s, %s\n", path, vocab, merges)
	return nil
}
