package nn

import (
	"math"
	"slices"
	"testing"
)

// The padding row's output is its value, and it gets no gradient, as
// PyTorch's padding_idx; the other rows' gradients are those without it.
func TestEmbeddingPaddingIdx(t *testing.T) {
	dev := openDev(t)
	const vocab, dim = 5, 3
	e := NewEmbedding(dev, vocab, dim, nil, NewRNG(4), PaddingIdx(-2))
	if !e.Padded || e.PaddingIdx != 3 {
		t.Fatalf("PaddingIdx(-2) of vocab 5: padded %v at %d, want row 3", e.Padded, e.PaddingIdx)
	}
	w, _ := e.W.Data()
	if !slices.Equal(w[3*dim:4*dim], []float32{0, 0, 0}) || slices.Equal(w[:dim], []float32{0, 0, 0}) {
		t.Fatalf("initial table %v: want row 3 (only) zeros", w)
	}
	// a value of its own, as a trained or loaded row may have: read as it is
	row := []float32{0.5, -1, math.MaxFloat32}
	copy(w[3*dim:], row)
	e.W = dev.Param(w, vocab, dim)
	plain := &Embedding{W: dev.Param(w, vocab, dim)}
	idx := []float32{3, 1, 3, 0, 4, 1}
	var grads [2][]float32
	for i, m := range []*Embedding{e, plain} {
		y := m.Forward(dev.Tensor(idx, 2, 3))
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[:dim], row) || !slices.Equal(got[2*dim:3*dim], row) {
			t.Errorf("padded output %v: want row 3 %v at positions 0 and 2", got, row)
		}
		if err := weightedSum(y).Backward(); err != nil {
			t.Fatal(err)
		}
		grads[i], _ = m.W.Grad().Data()
	}
	for i := range grads[0] {
		want := grads[1][i]
		if i/dim == 3 {
			want = 0
		}
		if grads[0][i] != want {
			t.Errorf("gradient %v, want %v but for row 3 (zeros)", grads[0], grads[1])
			break
		}
	}
	if slices.Equal(grads[1][3*dim:4*dim], []float32{0, 0, 0}) {
		t.Errorf("without a padding index row 3's gradient is zero: the test checks nothing")
	}
}

func TestEmbeddingPaddingIdxPanics(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(23)
	checkPanics(t, []panicCase{
		{"embedding padding", "nn.NewEmbedding: padding index 5 for vocab 5, want -5..4", func() { NewEmbedding(dev, 5, 2, nil, r, PaddingIdx(5)) }},
		{"embedding padding low", "nn.NewEmbedding: padding index -6 for vocab 5, want -5..4", func() { NewEmbedding(dev, 5, 2, nil, r, PaddingIdx(-6)) }},
		{"embedding padding field", "nn.Embedding.Forward: padding index 7 for vocab 5, want 0..4", func() {
			e := NewEmbedding(dev, 5, 2, nil, r)
			e.PaddingIdx, e.Padded = 7, true
			e.Forward(dev.Tensor([]float32{1}, 1))
		}},
	})
}
