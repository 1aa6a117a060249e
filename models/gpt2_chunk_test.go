package models

import (
	"fmt"
	"math"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// TestGPT2LossChunkRows: all rows while the logits fit one buffer, else as
// many as fit, never none.
func TestGPT2LossChunkRows(t *testing.T) {
	c := GPT2Sizes["124M"]
	for _, tc := range []struct{ rows, max, want int }{
		{4096, 0, 4096},                    // no limit
		{4096, 1 << 28, 4096},              // 206M logits fit 256M
		{4096, 1 << 26, (1 << 26) / 50257}, // 64M: 1335 rows a chunk
		{64, 64 * 50257, 64},               // exactly
		{64, 64*50257 - 1, 63},             // one float short
		{64, 1000, 1},                      // not one row: one row a chunk
	} {
		if got := c.LossChunkRows(tc.rows, tc.max); got != tc.want {
			t.Errorf("LossChunkRows(%d, %d) = %d, want %d", tc.rows, tc.max, got, tc.want)
		}
	}
}

// gpt2LossGrads returns the loss of a dropout-free torchGPT2 (seed 1) on a
// fixed batch of 2x8 tokens with LossRows rows, and its parameters'
// gradients, lazily (captured false) or from a core.Capture's second call
// (the first records).
func gpt2LossGrads(t *testing.T, dev *core.Device, rows int, captured bool) (float32, [][]float32) {
	t.Helper()
	c := torchGPT2
	g := NewGPT2(dev, c, nn.NewRNG(1))
	g.LossRows = rows
	x, y := make([]float32, 16), make([]float32, 16)
	for i := range x {
		x[i], y[i] = float32((i*7+3)%c.Vocab), float32((i*11+5)%c.Vocab)
	}
	ps := g.Params()
	if !captured {
		loss := g.Loss(dev.Tensor(x, 2, 8), dev.Tensor(y, 2, 8))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		l, err := loss.Item()
		if err != nil {
			t.Fatal(err)
		}
		var grads [][]float32
		for _, p := range ps {
			gr, err := p.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			grads = append(grads, gr)
		}
		return l, grads
	}
	cp := core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		for _, p := range ps {
			p.ZeroGrad()
		}
		loss := g.Loss(in[0], in[1])
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		out := []*core.Tensor{loss}
		for _, p := range ps {
			out = append(out, p.Grad())
		}
		return out
	})
	var out [][]float32
	for range 2 {
		var err error
		if out, err = cp.Call(core.In(x, 2, 8), core.In(y, 2, 8)); err != nil {
			t.Fatal(err)
		}
	}
	return out[0][0], out[1:]
}

// TestGPT2LossChunked: the loss computed in chunks of rows (5, 5, 5, 1 of
// 16; and 8, 8) equals the loss over all rows at once, and so does every
// parameter's gradient, lazily and in a captured step.
func TestGPT2LossChunked(t *testing.T) {
	dev := openDev(t)
	names := NewGPT2(dev, torchGPT2, nn.NewRNG(1)).NamedTensors()
	for _, captured := range []bool{false, true} {
		wantL, wantG := gpt2LossGrads(t, dev, 0, captured)
		for _, rows := range []int{5, 8} {
			t.Run(fmt.Sprintf("captured=%v/rows=%d", captured, rows), func(t *testing.T) {
				l, grads := gpt2LossGrads(t, dev, rows, captured)
				if d := math.Abs(float64(l - wantL)); d > 1e-5*math.Abs(float64(wantL)) {
					t.Errorf("loss %.7g, unchunked %.7g", l, wantL)
				}
				for i := range wantG {
					scale := 0.0
					for _, v := range wantG[i] {
						scale = max(scale, math.Abs(float64(v)))
					}
					for j := range wantG[i] {
						if d := math.Abs(float64(grads[i][j] - wantG[i][j])); d > 1e-4*scale+1e-7 {
							t.Errorf("%s's gradient [%d] = %g, unchunked %g", names[i].Name, j, grads[i][j], wantG[i][j])
							break
						}
					}
				}
			})
		}
	}
}

// TestGPT2LossChunkedMemory: where the logits dominate (a vocabulary of
// 4096 at width 24, 64 rows), computing them 16 rows at a time lowers the
// step's planned peak (core.Device.EstimateMemory of the forward and
// backward).
func TestGPT2LossChunkedMemory(t *testing.T) {
	dev := openDev(t)
	c := torchGPT2
	c.Vocab = 4096
	g := NewGPT2(dev, c, nn.NewRNG(1))
	x := make([]float32, 64)
	peak := func(rows int) uint64 {
		g.LossRows = rows
		e, err := dev.EstimateMemory(func() error { return g.Loss(dev.Tensor(x, 4, 16), dev.Tensor(x, 4, 16)).Backward() })
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range g.Params() {
			p.ZeroGrad()
		}
		t.Logf("LossRows %d: %v", rows, e)
		return e.Total()
	}
	if all, chunked := peak(0), peak(16); !(chunked < all*3/4) {
		t.Errorf("peak %d bytes in chunks of 16 rows, %d unchunked: want under 3/4 of it", chunked, all)
	}
}
