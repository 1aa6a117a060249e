package models_test

import (
	"fmt"
	"math"
	"os"

	_ "github.com/ag-go/ag/backend/cpu"
	"github.com/ag-go/ag/bpe"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
)

// A character-level GPT on the text the repository ships: tokens in,
// logits out, the loss of the next character (about ln(vocab) untrained).
func ExampleNewGPT() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	voc := models.NewCharVocab(models.KeeperText)
	toks, _ := voc.Encode(models.KeeperText)
	m := models.NewGPT(dev, models.GPTConfig{Vocab: voc.Size(), Context: 16, Dim: 32, Heads: 2, Layers: 2}, nn.NewRNG(1))
	batches, _ := models.NewBatches(toks, 4, 16, 1)
	x, y := batches.Next()
	logits := m.Forward(dev.Tensor(x, 4, 16))
	loss, _ := m.Loss(dev.Tensor(x, 4, 16), dev.Tensor(y, 4, 16)).Item()
	fmt.Println(voc.Size(), "tokens;", logits.Shape(), "logits; loss near ln(50) = 3.91:", loss > 3.7 && loss < 4.1)
	// Output: 50 tokens; [4 16 50] logits; loss near ln(50) = 3.91: true
}

// GPT-2's architecture at a small size, with a byte-level BPE learned from
// the text the repository ships; the head is tied to the token embedding.
// The parameter names are GPT-2's state dict keys.
func ExampleNewGPT2() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	tok, _ := bpe.Train([]byte(models.KeeperText), 600)
	ids := tok.Encode([]byte(models.KeeperText))
	cfg, _ := models.GPT2Size("tiny")
	cfg.Vocab = tok.Size()
	m := models.NewGPT2(dev, cfg, nn.NewRNG(1))
	batches, _ := models.NewBatches(ids, 4, 32, 1)
	x, y := batches.Next()
	loss, _ := m.Loss(dev.Tensor(x, 4, 32), dev.Tensor(y, 4, 32)).Item()
	names, _ := nn.NamedParams(m)
	fmt.Println(tok.Size(), "tokens,", cfg.Params(), "parameters;", names[4].Name)
	fmt.Printf("loss near ln(%d) = %.2f: %v\n", tok.Size(), math.Log(float64(tok.Size())), math.Abs(float64(loss)-math.Log(float64(tok.Size()))) < 0.3)
	// Output:
	// 600 tokens, 146688 parameters; h.0.attn.c_attn.weight
	// loss near ln(600) = 6.40: true
}

// A checkpoint of PyTorch's GPT-2 (GPT2LMHeadModel's state dict as
// safetensors) loads by its own key names.
func ExampleLoadGPT2Safetensors() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	m := models.NewGPT2(dev, models.GPT2Config{Vocab: 37, Context: 16, Dim: 24, Heads: 3, Layers: 2}, nn.NewRNG(1))
	f, err := os.Open("testdata/torch_gpt2.safetensors") // written by testdata/make_gpt2_fixture.py
	if err != nil {
		panic(err)
	}
	defer f.Close()
	rep, err := models.LoadGPT2Safetensors(f, m)
	fmt.Println(err, rep.Ignored)
	// Output: <nil> [transformer.h.0.attn.bias transformer.h.1.attn.bias lm_head.weight]
}

// GPT-2 small's logits at batch 4, context 1024 are 4096 rows of 50257:
// 206M floats, over a WebGPU adapter's largest buffer of 2^26 floats
// (256 MiB), so GPT2.Loss computes them 1335 rows at a time.
func ExampleGPT2Config_LossChunkRows() {
	c, _ := models.GPT2Size("124M")
	fmt.Println(c.LossChunkRows(4*1024, 1<<26), c.LossChunkRows(64, 1<<26), c.LossChunkRows(4*1024, 0))
	// Output: 1335 64 4096
}
