package models_test

import (
	"fmt"

	_ "github.com/ag-go/ag/backend/cpu"
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
