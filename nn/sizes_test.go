package nn

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/core"
)

// Constructors given sizes past the limits, or a nil rng or device, panic
// at once with a message naming themselves and their values, before they
// allocate: they panicked with a bare makeslice, a message of another
// function (NewParam's "nil rng", core's Param), a nil dereference, or
// (Orthogonal, an overflowing product) looped for hours.
func TestConstructorLimits(t *testing.T) {
	dev := openDev(t)
	rng := NewRNG(1)
	const huge, past = 1 << 40, 1 << 24 // huge*huge overflows an int; past*past is 2^48 > backend.MaxElems
	cases := []panicCase{
		{"Linear-overflow", "nn.NewLinear: in 1099511627776, out 1099511627776: weight of shape [1099511627776 1099511627776] has more than", func() { NewLinear(dev, huge, huge, true, rng) }},
		{"Linear-past", "nn.NewLinear: in 16777216, out 16777216: weight of shape [16777216 16777216] has more than", func() { NewLinear(dev, past, past, true, rng) }},
		{"Linear-negative-product", "nn.NewLinear: in 3, out 4611686018427387904: weight", func() { NewLinear(dev, 3, 1<<62, false, rng) }},
		{"LinearInit", "nn.NewLinear: in 16777216", func() { NewLinearInit(dev, past, past, false, Constant(0), nil) }},
		{"Linear-nil-device", "nn.NewLinear: nil device", func() { NewLinear(nil, 2, 3, true, rng) }},
		{"Linear-nil-rng", "nn.NewLinear: nil rng", func() { NewLinear(dev, 2, 3, true, nil) }},
		{"MLP", "nn.MLP: sizes [2 16777216 16777216 1]: layer 1's weight of shape [16777216 16777216] has more than", func() { MLP(dev, []int{2, past, past, 1}, core.Tanh, rng) }},
		{"MLP-nil-rng", "nn.MLP: nil rng", func() { MLP(dev, []int{2, 3}, nil, nil) }},
		{"MLP-nil-device", "nn.MLP: nil device", func() { MLP(nil, []int{2, 3}, nil, rng) }},
		{"Conv2d", "nn.NewConv2d: in 16777216, out 16777216, kernel [1 1], groups 1: weight of shape [16777216 16777216 1 1] has more than", func() { NewConv2d(dev, past, past, [2]int{1, 1}, ConvOptions{}, rng) }},
		{"Conv2d-kernel", "nn.NewConv2d: in 2, out 3, kernel [1099511627776 1099511627776], groups 1: weight", func() { NewConv2d(dev, 2, 3, [2]int{huge, huge}, ConvOptions{}, rng) }},
		{"Conv1d", "nn.NewConv1d: in 4, out 4, kernel [4611686018427387904], groups 2: weight", func() { NewConv1d(dev, 4, 4, 1<<62, ConvOptions{Groups: 2}, rng) }},
		{"Conv-nil-rng", "nn.NewConv2d: nil rng", func() { NewConv2d(dev, 2, 3, [2]int{3, 3}, ConvOptions{}, nil) }},
		{"Embedding", "nn.NewEmbedding: vocab 1099511627776, dim 1099511627776: table of shape", func() { NewEmbedding(dev, huge, huge, nil, rng) }},
		{"Embedding-nil-device", "nn.NewEmbedding: nil device", func() { NewEmbedding(nil, 4, 3, nil, rng) }},
		{"LayerNorm", "nn.NewLayerNorm: gain of shape [1125899906842624] has more than", func() { NewLayerNorm(dev, 1<<50, 1e-5, true) }},
		{"LayerNorm-nil-device", "nn.NewLayerNorm: nil device", func() { NewLayerNorm(nil, 4, 1e-5, true) }},
		{"RMSNorm", "nn.NewRMSNorm: gain of shape [1125899906842624] has more than", func() { NewRMSNorm(dev, 1<<50, 1e-6) }},
		{"BatchNorm1d", "nn.NewBatchNorm1d: running mean of shape [1125899906842624] has more than", func() { NewBatchNorm1d(dev, 1<<50, 1e-5, 0.1, true) }},
		{"BatchNorm2d", "nn.NewBatchNorm2d: running mean of shape [1125899906842624]", func() { NewBatchNorm2d(dev, 1<<50, 1e-5, 0.1, true) }},
		{"MultiHeadAttention", "nn.NewMultiHeadAttention: dim 16777216, heads 1: projection of shape [16777216 16777216] has more than", func() { NewMultiHeadAttention(dev, past, 1, false, 0, rng) }},
		{"MultiHeadAttention-nil-rng", "nn.NewMultiHeadAttention: nil rng", func() { NewMultiHeadAttention(dev, 4, 2, false, 0, nil) }},
		{"TransformerBlock", "nn.NewTransformerBlock: dim 8, heads 2, hidden 4611686018427387904: feed-forward weight of shape [8 4611686018427387904]", func() { NewTransformerBlock(dev, 8, 2, 1<<62, false, 0, rng) }},
		{"TransformerBlock-dim", "nn.NewTransformerBlock: dim 16777216, heads 1, hidden 1: attention projection", func() { NewTransformerBlock(dev, past, 1, 1, false, 0, rng) }},
		{"TransformerBlock-nil-device", "nn.NewTransformerBlock: nil device", func() { NewTransformerBlock(nil, 8, 2, 32, false, 0, rng) }},
		{"NewParam", "nn.NewParam: parameter of shape [16777216 16777216] has more than", func() { NewParam(dev, Constant(0), nil, past, past) }},
		{"Orthogonal-overflow", "nn.Orthogonal: shape [1099511627776 1099511627776] has more than", func() { Orthogonal(1)([]int{huge, huge}, rng) }},
		{"Orthogonal-negative", "nn.Orthogonal: shape [3 4611686018427387904] has more than", func() { Orthogonal(1)([]int{3, 1 << 62}, rng) }},
		{"Orthogonal-nil-rng", "nn.Orthogonal: nil rng for shape [3 4]", func() { Orthogonal(1)([]int{3, 4}, nil) }},
		{"GlorotUniform-overflow", "nn.GlorotUniform: shape [1099511627776 1099511627776] has more than", func() { GlorotUniform(1)([]int{huge, huge}, rng) }},
		{"GlorotNormal", "nn.GlorotNormal: shape [16777216 16777216]", func() { GlorotNormal(1)([]int{past, past}, rng) }},
		{"KaimingUniform-zero", "nn.KaimingUniform: shape [3 0] has a dimension 0", func() { KaimingUniform(1)([]int{3, 0}, rng) }},
		{"KaimingNormal-nil-rng", "nn.KaimingNormal: nil rng for shape [2 2]", func() { KaimingNormal(1)([]int{2, 2}, nil) }},
		{"Normal", "nn.Normal: shape [1125899906842624]", func() { Normal(0, 1)([]int{1 << 50}, rng) }},
		{"Uniform", "nn.Uniform: shape [1099511627776 1099511627776]", func() { Uniform(0, 1)([]int{huge, huge}, rng) }},
		{"Constant", "nn.Constant: shape [1125899906842624]", func() { Constant(1)([]int{1 << 50}, nil) }},
	}
	for _, c := range cases {
		// Each in a goroutine with a deadline: before the checks, some ran
		// on for hours instead of panicking.
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			c.f()
		}()
		select {
		case r := <-done:
			if s, _ := r.(string); !strings.Contains(s, c.want) {
				t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
			}
			if s := fmt.Sprint(r); strings.Contains(s, "makeslice") {
				t.Errorf("%s: a bare makeslice: %s", c.name, s)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: still running after 10s", c.name)
		}
	}
}
