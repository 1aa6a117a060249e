package models

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
)

// KeeperText is a short story written for ag (8.6 KB of plain ASCII, free
// to use like the rest of the repository): the text the character-level
// GPT of the tests, benchmarks and examples learns.
//
//go:embed text/keeper.txt
var KeeperText string

// CharVocab maps the bytes of a text to token ids 0..Size()-1, in byte
// order.
type CharVocab struct {
	chars []byte
	ids   [256]int
}

// NewCharVocab makes the vocabulary of the bytes text uses.
func NewCharVocab(text string) *CharVocab {
	v := &CharVocab{}
	for i := range v.ids {
		v.ids[i] = -1
	}
	seen := [256]bool{}
	for i := 0; i < len(text); i++ {
		seen[text[i]] = true
	}
	for c, ok := range seen {
		if ok {
			v.ids[c] = len(v.chars)
			v.chars = append(v.chars, byte(c))
		}
	}
	return v
}

// Size is the number of tokens.
func (v *CharVocab) Size() int { return len(v.chars) }

// Encode maps text to token ids; a byte outside the vocabulary is an error
// naming it.
func (v *CharVocab) Encode(text string) ([]int, error) {
	out := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		id := v.ids[text[i]]
		if id < 0 {
			return nil, fmt.Errorf("models.CharVocab.Encode: byte %q at %d is not in the vocabulary", text[i], i)
		}
		out[i] = id
	}
	return out, nil
}

// Decode maps token ids back to text; an id out of range is '?'.
func (v *CharVocab) Decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		if id >= 0 && id < len(v.chars) {
			b[i] = v.chars[id]
		} else {
			b[i] = '?'
		}
	}
	return string(b)
}

// Batches draws language-model batches from a token stream: inputs
// [batch, t] starting at random offsets and targets shifted by one, both
// as whole numbers in f32, ready for Device.Tensor.
type Batches struct {
	tokens   []int
	batch, t int
	rng      *rand.Rand
}

// NewBatches draws batches of batch sequences of t tokens from tokens (at
// least t+1 of them) with a generator seeded by seed.
func NewBatches(tokens []int, batch, t int, seed uint64) (*Batches, error) {
	if batch < 1 || t < 1 || len(tokens) < t+1 {
		return nil, fmt.Errorf("models.NewBatches: %d tokens, batch %d, length %d: want batch, length >= 1 and more tokens than the length", len(tokens), batch, t)
	}
	return &Batches{tokens: slices.Clone(tokens), batch: batch, t: t, rng: rand.New(rand.NewPCG(seed, 0x6d6f64656c73))}, nil
}

// Next returns the next batch's inputs and targets, each batch*t values.
func (b *Batches) Next() (x, y []float32) {
	x = make([]float32, b.batch*b.t)
	y = make([]float32, b.batch*b.t)
	for i := range b.batch {
		off := b.rng.IntN(len(b.tokens) - b.t)
		for j := range b.t {
			x[i*b.t+j] = float32(b.tokens[off+j])
			y[i*b.t+j] = float32(b.tokens[off+j+1])
		}
	}
	return x, y
}
