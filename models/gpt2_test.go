package models

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/bpe"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
	"github.com/ag-go/ag/safetensors"
)

// torchGPT2 is the architecture of testdata/make_gpt2_fixture.py.
var torchGPT2 = GPT2Config{Vocab: 37, Context: 16, Dim: 24, Heads: 3, Layers: 2}

func readST(t *testing.T, path string) *safetensors.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// gpt2Logits runs g in evaluation mode on the fixture's input and returns
// the largest difference from PyTorch's logits.
func gpt2Logits(t *testing.T, dev *core.Device, g *GPT2) float64 {
	t.Helper()
	io := readST(t, "testdata/torch_gpt2_io.safetensors")
	in, _ := io.Tensor("input")
	want, _ := io.Tensor("logits")
	g.SetTraining(false)
	defer g.SetTraining(true)
	var got []float32
	var err error
	dev.NoGrad(func() { got, err = g.Forward(dev.Tensor(in.Data, in.Shape...)).Data() })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Data) || !slices.Equal(want.Shape, []int{2, 11, torchGPT2.Vocab}) {
		t.Fatalf("%d logits, PyTorch's %d of shape %v", len(got), len(want.Data), want.Shape)
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i]-want.Data[i]))/max(1, math.Abs(float64(want.Data[i]))))
	}
	return worst
}

// TestGPT2TorchInterop loads the state dict of a GPT-2-shaped model written
// in plain PyTorch (testdata/make_gpt2_fixture.py), with Hugging Face's
// GPT2LMHeadModel keys (prefix, tied lm_head, mask buffers) and with
// GPT2Model's bare ones, and compares the logits with PyTorch's; then saves
// it and checks the file's keys are GPT-2's and load back to the same
// logits.
func TestGPT2TorchInterop(t *testing.T) {
	dev := openDev(t)
	const tol = 1e-5 // relative to max(1, |logit|)
	for _, file := range []string{"torch_gpt2.safetensors", "torch_gpt2_bare.safetensors"} {
		g := NewGPT2(dev, torchGPT2, nn.NewRNG(1))
		if d := gpt2Logits(t, dev, g); d < 0.1 {
			t.Fatalf("%s: an untrained model is already within %g of PyTorch's logits", file, d)
		}
		fh, err := os.Open("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := LoadGPT2Safetensors(fh, g)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		wantIgnored := 0
		if file == "torch_gpt2.safetensors" {
			wantIgnored = torchGPT2.Layers + 1 // the masks and lm_head
		}
		if len(rep.Ignored) != wantIgnored || rep.Metadata["format"] != "pt" {
			t.Errorf("%s: ignored %q, metadata %v", file, rep.Ignored, rep.Metadata)
		}
		d := gpt2Logits(t, dev, g)
		t.Logf("%s: largest difference from PyTorch's logits %.3g", file, d)
		if d > tol {
			t.Errorf("%s: logits differ from PyTorch's by %.3g (relative), want <= %g", file, d, tol)
		}
		if file != "torch_gpt2_bare.safetensors" {
			continue
		}
		var buf bytes.Buffer
		if err := nn.SaveSafetensors(&buf, g, nn.SaveOptions{Metadata: map[string]string{"format": "pt"}}); err != nil {
			t.Fatal(err)
		}
		saved, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		bare := readST(t, "testdata/"+file)
		for i, st := range saved.Tensors {
			want := bare.Tensors[i]
			if st.Name != want.Name || !slices.Equal(st.Shape, want.Shape) || !slices.Equal(st.Data, want.Data) {
				t.Fatalf("saved tensor %d: %q %v, PyTorch's %q %v (or the values differ)", i, st.Name, st.Shape, want.Name, want.Shape)
			}
		}
		if len(saved.Tensors) != len(bare.Tensors) {
			t.Errorf("saved %d tensors, PyTorch's state dict has %d", len(saved.Tensors), len(bare.Tensors))
		}
		g2 := NewGPT2(dev, torchGPT2, nn.NewRNG(2))
		if _, err := LoadGPT2Safetensors(bytes.NewReader(buf.Bytes()), g2); err != nil {
			t.Fatal(err)
		}
		if d2 := gpt2Logits(t, dev, g2); d2 != d {
			t.Errorf("saved and loaded: %.3g from PyTorch's logits, before %.3g", d2, d)
		}
	}
}

// TestGPT2LoadRefuses: a head that is not the token embedding, a key of
// another model and a missing key are errors saying which, and change
// nothing.
func TestGPT2LoadRefuses(t *testing.T) {
	dev := openDev(t)
	f := readST(t, "testdata/torch_gpt2.safetensors")
	edit := func(change func(*safetensors.File)) []byte {
		c := &safetensors.File{Metadata: f.Metadata}
		for _, t := range f.Tensors {
			t.Data = slices.Clone(t.Data)
			c.Tensors = append(c.Tensors, t)
		}
		change(c)
		var b bytes.Buffer
		if err := safetensors.Write(&b, c); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		name   string
		change func(*safetensors.File)
		want   string
	}{
		{"untied head", func(f *safetensors.File) {
			for i := range f.Tensors {
				if f.Tensors[i].Name == "lm_head.weight" {
					f.Tensors[i].Data[5] += 1
				}
			}
		}, "lm_head.weight"},
		{"extra key", func(f *safetensors.File) {
			f.Tensors = append(f.Tensors, safetensors.Tensor{Name: "transformer.h.0.mlp.extra", DType: safetensors.F32, Shape: []int{1}, Data: []float32{1}})
		}, "transformer.h.0.mlp.extra"},
		{"missing key", func(f *safetensors.File) {
			f.Tensors = slices.DeleteFunc(f.Tensors, func(t safetensors.Tensor) bool { return t.Name == "transformer.ln_f.bias" })
		}, "transformer.ln_f.bias"},
	} {
		g := NewGPT2(dev, torchGPT2, nn.NewRNG(1))
		before, err := g.Wte.W.Data()
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadGPT2Safetensors(bytes.NewReader(edit(c.change)), g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
		if after, _ := g.Wte.W.Data(); !slices.Equal(before, after) {
			t.Errorf("%s: the refused file changed wte", c.name)
		}
	}
}

// TestGPT2Params: the 124M size has GPT-2 small's 124,439,808 parameters,
// and Config.Params counts a model's tensors; the names are GPT-2's.
func TestGPT2Params(t *testing.T) {
	c, err := GPT2Size("124M")
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Params(); n != 124_439_808 {
		t.Errorf("124M: %d parameters, want GPT-2 small's 124439808", n)
	}
	if _, err := GPT2Size("125M"); err == nil || !strings.Contains(err.Error(), "124M") {
		t.Errorf("unknown size: %v", err)
	}
	dev := openDev(t)
	g := NewGPT2(dev, torchGPT2, nn.NewRNG(1))
	n := 0
	for _, p := range g.Params() {
		n += p.Len()
	}
	if n != torchGPT2.Params() {
		t.Errorf("tensors hold %d values, Config.Params says %d", n, torchGPT2.Params())
	}
	names, err := nn.NamedParams(g)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range names[:8] {
		got = append(got, p.Name)
	}
	want := []string{"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias"}
	if !slices.Equal(got, want) || names[len(names)-1].Name != "ln_f.bias" {
		t.Errorf("names %q ... %q, want %q ... ln_f.bias", got, names[len(names)-1].Name, want)
	}
}

// TestGPT2TiedHead: the token embedding's gradient has rows for tokens the
// input never holds (from the head alone), and nothing else holds the
// head's weight.
func TestGPT2TiedHead(t *testing.T) {
	dev := openDev(t)
	c := torchGPT2
	g := NewGPT2(dev, c, nn.NewRNG(1))
	x := []float32{1, 2, 3, 1}
	y := []float32{2, 3, 1, 2}
	if err := g.Loss(dev.Tensor(x, 1, 4), dev.Tensor(y, 1, 4)).Backward(); err != nil {
		t.Fatal(err)
	}
	grad, err := g.Wte.W.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{0, 4, 36} { // never an input
		row := grad[tok*c.Dim : (tok+1)*c.Dim]
		if !slices.ContainsFunc(row, func(v float32) bool { return v != 0 }) {
			t.Errorf("token %d's embedding row has no gradient: the head is not tied to wte", tok)
		}
	}
}

// TestGPT2Trains trains the tiny size with a BPE learned from KeeperText:
// the loss must fall from about ln(vocab), and Generate continues a prompt,
// drawing below SampleVocab when set.
func TestGPT2Trains(t *testing.T) {
	dev := openDev(t)
	tok, err := bpe.Train([]byte(KeeperText), 512)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode([]byte(KeeperText))
	c, _ := GPT2Size("tiny")
	c.Vocab, c.Context = tok.Size(), 32
	g := NewGPT2(dev, c, nn.NewRNG(1))
	b, err := NewBatches(ids, 8, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	opt := nn.NewAdamW(g.Params(), 3e-3, 0.01)
	step := nn.CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return g.Loss(in[0], in[1]) })
	var first, last float32
	for i := range 60 {
		x, y := b.Next()
		l, err := step.Step(core.In(x, 8, 32), core.In(y, 8, 32))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	t.Logf("vocab %d: loss %.3f -> %.3f in 60 steps", c.Vocab, first, last)
	if math.Abs(float64(first)-math.Log(float64(c.Vocab))) > 0.5 {
		t.Errorf("first loss %.3f, want about ln(%d) = %.3f", first, c.Vocab, math.Log(float64(c.Vocab)))
	}
	if !(last < first-1) {
		t.Errorf("loss %.3f -> %.3f: did not fall by 1", first, last)
	}
	out, err := g.Generate(dev, tok.Encode([]byte("The keeper")), 10, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(tok.Encode([]byte("The keeper")))+10 {
		t.Errorf("generated %d tokens", len(out))
	}
	g.SampleVocab = 100
	prompt := tok.Encode([]byte("The keeper"))
	out, err = g.Generate(dev, prompt, 30, 2, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range out[len(prompt):] {
		if id >= 100 {
			t.Errorf("generated id %d with SampleVocab 100: %v", id, out)
			break
		}
	}
}
