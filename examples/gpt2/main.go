// Command gpt2 trains OpenAI's GPT-2 architecture (models.GPT2: 12 layers
// of width 768, 12 heads, context 1024, tied embeddings, GELU, pre-norm,
// dropout at -size 124M; smaller sizes for quick runs) on a text of yours,
// with GPT-2's byte-level BPE (package bpe), and samples from it.
//
//	go run ./examples/gpt2 -text notes.txt -size tiny -steps 300
//	go run ./examples/gpt2 -size 124M -steps 1 -ctx 64 -batch 1 -device cpu -text README.md
//
// The tokenizer is learned from the text (-vocab tokens at most) unless
// GPT-2's own files are given (-vocab-json encoder.json or vocab.json,
// -merges merges.txt). -size sets the architecture, -vocab the number of
// embedding rows: 50257 by default, GPT-2's, so -size 124M has GPT-2
// small's 124,439,808 parameters whatever the text. A small text stops the
// BPE early, when no pair of tokens repeats (README.md gives under two
// thousand tokens): the rows of ids it never makes stay unused, and
// samples draw only the tokenizer's ids. -ctx is the length of the training sequences; the
// position table keeps the size's context (1024 rows at 124M).
//
// It prints "parameters: N", the loss as it trains, and samples at the end.
// -save FILE writes the model as a safetensors file with GPT-2's keys
// (Hugging Face's GPT2LMHeadModel loads it, its lm_head tied), and the
// tokenizer beside it (FILE less .safetensors, plus -vocab.json and
// -merges.txt); -load FILE reads such a file, or PyTorch's GPT-2
// checkpoint, before training (-steps 0 only samples).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	_ "github.com/ag-go/ag/backend/all" // every backend for -device
	"github.com/ag-go/ag/bpe"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// Options are the settings of a run (the flags).
type Options struct {
	Text      string  // the training text; "" is models.KeeperText
	TextName  string  // what to call it in the output
	Size      string  // a name of models.GPT2Sizes
	Vocab     int     // embedding rows, and the most tokens a learned BPE gets
	VocabJSON string  // GPT-2's encoder.json / vocab.json, with Merges
	Merges    string  // GPT-2's merges.txt
	Ctx       int     // tokens per training sequence
	Batch     int     // sequences per step
	Steps     int     // training steps
	LR        float32 // AdamW's learning rate, after a linear warm-up
	Dropout   float64 // -1 keeps the size's
	Seed      uint64
	Sample    int    // tokens per sample
	Prompt    string // starts each sample
	Load      string // a safetensors file to start from
	Save      string // where to write the model (and the tokenizer beside it)
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gpt2", flag.ContinueOnError)
	fs.SetOutput(out)
	var o Options
	device := fs.String("device", "auto", `device: "auto", "cpu", "webgpu", "ggml-cpu" or "ggml-vulkan"`)
	fs.StringVar(&o.Text, "text", "", "train on this `FILE` (default: the short story the repository ships, models.KeeperText)")
	fs.StringVar(&o.Size, "size", "tiny", "architecture: 124M (GPT-2 small), 355M, 774M, 1558M, or mini (4x256), tiny (2x64)")
	fs.IntVar(&o.Vocab, "vocab", 50257, "embedding rows (at least the tokenizer's tokens), and the most tokens the BPE learned from the text may have")
	fs.StringVar(&o.VocabJSON, "vocab-json", "", "GPT-2's encoder.json or vocab.json `FILE` (with -merges) instead of a BPE learned from the text")
	fs.StringVar(&o.Merges, "merges", "", "GPT-2's merges.txt `FILE` (with -vocab-json)")
	fs.IntVar(&o.Ctx, "ctx", 64, "tokens per training sequence (at most the size's context)")
	fs.IntVar(&o.Batch, "batch", 8, "sequences per step")
	fs.IntVar(&o.Steps, "steps", 200, "training steps")
	lr := fs.Float64("lr", 1e-3, "AdamW learning rate (after a 20-step warm-up)")
	fs.Float64Var(&o.Dropout, "dropout", -1, "dropout probability; -1 keeps the size's (0.1)")
	fs.Uint64Var(&o.Seed, "seed", 1, "weight, data and dropout seed")
	fs.IntVar(&o.Sample, "sample", 40, "tokens per sample (two samples at the end)")
	fs.StringVar(&o.Prompt, "prompt", "The", "start of each sample")
	fs.StringVar(&o.Load, "load", "", "start from this safetensors `FILE` (GPT-2's keys)")
	fs.StringVar(&o.Save, "save", "", "write the trained model to this safetensors `FILE`, the tokenizer beside it")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return fmt.Errorf("gpt2: %w (%w)", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gpt2: unexpected arguments %q (%w)", fs.Args(), errUsage)
	}
	o.LR = float32(*lr)
	if o.Text != "" {
		b, err := os.ReadFile(o.Text)
		if err != nil {
			return fmt.Errorf("gpt2: -text: %w", err)
		}
		o.TextName, o.Text = o.Text, string(b)
	}
	dev, err := core.Open(*device)
	if err != nil {
		return fmt.Errorf("gpt2: -device %s: %w", *device, err)
	}
	defer dev.Close()
	return Train(dev, o, out)
}

// Train runs o on dev, printing to out.
func Train(dev *core.Device, o Options, out io.Writer) error {
	cfg, err := models.GPT2Size(o.Size)
	if err != nil {
		return fmt.Errorf("gpt2: -size: %w", err)
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
		return fmt.Errorf("gpt2: -ctx %d, -batch %d, -steps %d, -sample %d: want 1 <= ctx <= %d (the %s context), batch >= 1, steps and sample >= 0",
			o.Ctx, o.Batch, o.Steps, o.Sample, cfg.Context, o.Size)
	}
	start := time.Now()
	tok, how, err := tokenizer(o)
	if err != nil {
		return err
	}
	ids := tok.Encode([]byte(o.Text))
	fmt.Fprintf(out, "tokenizer: %d tokens (%s); %s: %d bytes, %d tokens (%.1fs)\n", tok.Size(), how, o.TextName, len(o.Text), len(ids), time.Since(start).Seconds())
	cfg.Vocab = o.Vocab
	if tok.Size() > cfg.Vocab {
		return fmt.Errorf("gpt2: the tokenizer has %d tokens, more than -vocab %d embedding rows", tok.Size(), cfg.Vocab)
	}
	batches, err := models.NewBatches(ids, o.Batch, o.Ctx, o.Seed+1)
	if err != nil {
		return fmt.Errorf("gpt2: %s is %d tokens, too short for -ctx %d: %w", o.TextName, len(ids), o.Ctx, err)
	}
	if err := dev.Seed(o.Seed); err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	start = time.Now()
	g := models.NewGPT2(dev, cfg, nn.NewRNG(o.Seed))
	g.SampleVocab = tok.Size()
	fmt.Fprintf(out, "gpt2 %s on %s: %d layers, width %d, %d heads, context %d, vocabulary %d, dropout %g\n",
		o.Size, dev, cfg.Layers, cfg.Dim, cfg.Heads, cfg.Context, cfg.Vocab, cfg.Dropout)
	fmt.Fprintf(out, "parameters: %d (%.1fs to initialise)\n", cfg.Params(), time.Since(start).Seconds())
	if o.Load != "" {
		f, err := os.Open(o.Load)
		if err != nil {
			return fmt.Errorf("gpt2: -load: %w", err)
		}
		_, err = models.LoadGPT2Safetensors(f, g)
		f.Close()
		if err != nil {
			return fmt.Errorf("gpt2: -load %s: %w", o.Load, err)
		}
		fmt.Fprintf(out, "loaded %s\n", o.Load)
	}
	opt := nn.WithSchedule(nn.NewAdamW(g.Params(), o.LR, 0.01), nn.LinearWarmup(20, 0.1))
	step := nn.CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return g.Loss(in[0], in[1]) })
	step.MaxGradNorm = 1
	every := max(1, o.Steps/10)
	start = time.Now()
	last := start
	for i := 1; i <= o.Steps; i++ {
		x, y := batches.Next()
		loss, err := step.Step(core.In(x, o.Batch, o.Ctx), core.In(y, o.Batch, o.Ctx))
		if err != nil {
			return fmt.Errorf("gpt2: step %d: %w", i, err)
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
		if err := save(o.Save, g, tok, out); err != nil {
			return err
		}
	}
	if o.Sample > 0 {
		prompt := tok.Encode([]byte(o.Prompt))
		if len(prompt) == 0 {
			return fmt.Errorf("gpt2: -prompt is empty: a sample continues at least one token")
		}
		if len(prompt) > cfg.Context {
			prompt = prompt[len(prompt)-cfg.Context:]
		}
		for k := range 2 {
			gen, err := g.Generate(dev, prompt, o.Sample, 0.8, rand.New(rand.NewPCG(o.Seed, uint64(k))))
			if err != nil {
				return fmt.Errorf("gpt2: sampling: %w", err)
			}
			fmt.Fprintf(out, "sample %d:\n%s\n", k+1, decode(tok, gen))
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
		v, err := os.Open(o.VocabJSON)
		if err != nil {
			return nil, "", fmt.Errorf("gpt2: -vocab-json: %w", err)
		}
		defer v.Close()
		m, err := os.Open(o.Merges)
		if err != nil {
			return nil, "", fmt.Errorf("gpt2: -merges: %w", err)
		}
		defer m.Close()
		tok, err := bpe.Read(v, m)
		if err != nil {
			return nil, "", fmt.Errorf("gpt2: %w", err)
		}
		return tok, "read from " + o.VocabJSON + " and " + o.Merges, nil
	}
	tok, err := bpe.Train([]byte(o.Text), o.Vocab)
	if err != nil {
		return nil, "", fmt.Errorf("gpt2: -vocab: %w", err)
	}
	how := fmt.Sprintf("learned from the text, at most %d", o.Vocab)
	if tok.Size() < o.Vocab {
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
