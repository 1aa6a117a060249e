package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

func TestMultiHeadAttention(t *testing.T) {
	dev := openDev(t)
	rng := NewRNG(5)
	const b, tq, dim, heads = 2, 3, 4, 2
	m := NewMultiHeadAttention(dev, dim, heads, true, 0, rng)
	x := dev.Param(randVals(rng, b*tq*dim), b, tq, dim)
	// the layer against its definition: project, split heads, attend, join, project
	got, err := m.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	split := func(l *Linear) *core.Tensor {
		return core.Permute(core.Reshape(l.Forward(x), b, tq, heads, dim/heads), 0, 2, 1, 3)
	}
	a := core.Attention(split(m.Q), split(m.K), split(m.V), &core.AttentionOptions{Causal: true})
	want, err := m.O.Forward(core.Reshape(core.Permute(a, 0, 2, 1, 3), b, tq, dim)).Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("output %d = %g, want %g", i, got[i], want[i])
		}
	}
	// a padding mask: the second sequence's last key is padding, so its
	// outputs must not depend on that key's value
	keep := dev.Tensor([]float32{1, 1, 1, 1, 1, 0}, b, tq)
	m.Causal = false
	kv := dev.Tensor(randVals(rng, b*tq*dim), b, tq, dim)
	out1, err := m.Attend(x, kv, kv, KeyPadding(keep)).Data()
	if err != nil {
		t.Fatal(err)
	}
	kvData, _ := kv.Data()
	kvData[len(kvData)-1] += 100
	out2, err := m.Attend(x, dev.Tensor(kvData, b, tq, dim), dev.Tensor(kvData, b, tq, dim), KeyPadding(keep)).Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range out1 {
		if math.Abs(float64(out1[i]-out2[i])) > 1e-5 {
			t.Fatalf("output %d changed with a padded key: %g -> %g", i, out1[i], out2[i])
		}
	}
	if err := core.Gradcheck(func() *core.Tensor { return core.Sum(core.Tanh(m.Attend(x, x, x, KeyPadding(keep)))) }, append(m.Params(), x), nil); err != nil {
		t.Error(err)
	}
}

func TestTransformerBlock(t *testing.T) {
	dev := openDev(t)
	rng := NewRNG(6)
	blk := NewTransformerBlock(dev, 4, 2, 8, true, 0.1, rng)
	x := dev.Param(randVals(rng, 2*3*4), 2, 3, 4)
	Eval(Sequential{blk}) // gradcheck needs a deterministic function
	if err := core.Gradcheck(func() *core.Tensor { return core.Sum(core.Tanh(blk.Forward(x))) }, append(blk.Params(), x), nil); err != nil {
		t.Error(err)
	}
	if n := len(blk.Params()); n != 2+8+2+2+2 {
		t.Errorf("%d parameters, want 16", n)
	}
	// causality: changing the last position leaves the earlier outputs alone
	xd, _ := x.Data()
	y1, _ := blk.Forward(dev.Tensor(xd, 2, 3, 4)).Data()
	xd[2*4] += 5 // batch 0, position 2
	y2, _ := blk.Forward(dev.Tensor(xd, 2, 3, 4)).Data()
	for i := 0; i < 2*4; i++ {
		if y1[i] != y2[i] {
			t.Fatalf("output %d (an earlier position) changed: %g -> %g", i, y1[i], y2[i])
		}
	}
	if y1[2*4] == y2[2*4] {
		t.Errorf("the changed position's output did not change")
	}
}

func TestAttentionLayerPanics(t *testing.T) {
	dev := openDev(t)
	m := NewMultiHeadAttention(dev, 4, 2, false, 0, NewRNG(1))
	checkPanics(t, []panicCase{
		{"heads", "dim must be a positive multiple of heads", func() { NewMultiHeadAttention(dev, 5, 2, false, 0, nil) }},
		{"dropout", "dropout 1 outside", func() { NewMultiHeadAttention(dev, 4, 2, false, 1, nil) }},
		{"shape", "want [batch, T, 4]", func() { m.Forward(dev.Full(0, 2, 4)) }},
		{"nil", "nil input", func() { m.Attend(nil, nil, nil, nil) }},
		{"lengths", "keys and values differ", func() { m.Attend(dev.Full(0, 1, 2, 4), dev.Full(0, 1, 3, 4), dev.Full(0, 1, 2, 4), nil) }},
		{"padding", "want [batch, Tk]", func() { KeyPadding(dev.Full(0, 3)) }},
		{"hidden", "hidden width 0", func() { NewTransformerBlock(dev, 4, 2, 0, true, 0, nil) }},
		// Heads set after construction: no integer divide by zero
		{"heads 0", "nn.MultiHeadAttention: heads 0 for width 4", func() {
			m := NewMultiHeadAttention(dev, 4, 2, false, 0, NewRNG(1))
			m.Heads = 0
			m.Forward(dev.Full(0, 1, 2, 4))
		}},
		{"heads 3", "nn.MultiHeadAttention: heads 3 for width 4", func() {
			m := NewMultiHeadAttention(dev, 4, 2, false, 0, NewRNG(1))
			m.Heads = 3
			m.Forward(dev.Full(0, 1, 2, 4))
		}},
	})
}
