package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
)

// wasmBudget bounds a model in the page: its Go runs in wasm32, whose
// linear memory ends at 4 GiB, and Go's collector lets the heap grow to
// about twice the live data (see examples/mlp's memoryBudget). On WebGPU
// the values live on the GPU and it does not apply; but closing the device
// (a switch back to cpu) brings them all into the heap, which a model past
// this budget does not survive.
const wasmBudget = 2 << 30

// budget is what a model may take on a device: Bytes in all (0: unknown)
// and Elems in one buffer (0: no limit), Where says whose limits they are.
type budget struct {
	Bytes, Elems int64
	Where        string
}

// deviceBudget reads dev's free memory (core.Device.Memory) and its
// largest buffer (Caps.MaxBufferElems); in wasm on the cpu device, at most
// wasmBudget. WebGPU in the page keeps the values in GPU buffers, not in
// the wasm heap, so there its own limits apply: without them GPT-2 124M
// (2 GB of weights, gradients and Adam state alone) could never train in
// a page (issue 41).
func deviceBudget(dev *core.Device) budget {
	b := budget{Elems: int64(dev.Info().MaxBufferElems), Where: dev.Name() + "'s free memory"}
	if free, _, err := dev.Memory(); err == nil {
		b.Bytes = int64(free)
	} else {
		b.Where = dev.Name() + " (its memory unknown)"
	}
	if runtime.GOARCH == "wasm" && dev.Name() != "webgpu" && (b.Bytes == 0 || b.Bytes > wasmBudget) {
		b.Bytes, b.Where = wasmBudget, "the page's wasm memory (wasm32's 4 GiB, half of it for Go's collector)"
	}
	return b
}

// stepFloats estimates, in floats, what training c on batches of batch
// sequences of ctx tokens holds at the peak of a step on a device whose
// largest buffer holds maxElems floats (0: no limit): the weights, their
// gradients and AdamW's two moments (4 a parameter), and the activations
// the backward keeps with their gradients - per block about 16 of width
// Dim a token (the LayerNorms, q, k, v, the attention's output and
// projection, the feed-forward's 4*Dim twice, the residuals) and the
// attention's weights thrice (scores, softmax, dropout), then the logits
// thrice (logits, softmax, their gradient) - of all rows, or of one chunk
// where GPT2.Loss chunks them (models.GPT2Config.LossChunkRows), with one
// more embedding-sized gradient, a chunk's part of the head's. largest is
// the largest single buffer: the embedding, the logits (a chunk's), one
// block's attention weights or feed-forward weight.
func stepFloats(c models.GPT2Config, batch, ctx int, maxElems int64) (total, largest int64) {
	b, t, d, v := int64(batch), int64(ctx), int64(c.Dim), int64(c.Vocab)
	h, l := int64(c.Heads), int64(c.Layers)
	rows := int64(c.LossChunkRows(batch*ctx, int(min(maxElems, math.MaxInt32))))
	head := 3 * rows * v
	if rows < b*t {
		head += v * d
	}
	acts := l*(16*b*t*d+3*b*h*t*t) + head + 2*b*t*d
	total = 4*int64(c.Params()) + acts
	largest = max(v*d, rows*v, b*h*t*t, 4*d*d, 4*b*t*d)
	return total, largest
}

// checkFits refuses a model that does not fit the budget before anything
// is allocated, with the estimate and what would fit: the largest size at
// this batch (its context capped at the size's) and the largest batch at
// this size.
func checkFits(size string, c models.GPT2Config, batch, ctx int, bud budget) error {
	fits := func(c models.GPT2Config, batch, ctx int) bool {
		total, largest := stepFloats(c, batch, ctx, bud.Elems)
		return (bud.Bytes == 0 || 4*total <= bud.Bytes) && (bud.Elems == 0 || largest <= bud.Elems)
	}
	if fits(c, batch, ctx) {
		return nil
	}
	total, largest := stepFloats(c, batch, ctx, bud.Elems)
	why := fmt.Sprintf("needs about %s (weights, gradients and Adam state %s, activations %s), over %s (%s)",
		gib(4*total), gib(16*int64(c.Params())), gib(4*total-16*int64(c.Params())), bud.Where, gib(bud.Bytes))
	if bud.Bytes == 0 || 4*total <= bud.Bytes {
		why = fmt.Sprintf("needs a buffer of %d floats, over the %d the device's largest buffer holds", largest, bud.Elems)
	}
	// sizes smallest first, with this run's vocabulary and dropout
	names := slices.Clone(sizeNames)
	fit := "no size fits at batch 1"
	for i := len(names) - 1; i >= 0; i-- {
		s := models.GPT2Sizes[names[i]]
		s.Vocab, s.Dropout = c.Vocab, c.Dropout
		if fits(s, batch, min(ctx, s.Context)) {
			fit = fmt.Sprintf("the largest size that fits at batch %d is %s (ctx %d)", batch, names[i], min(ctx, s.Context))
			break
		}
	}
	lo, hi := 0, batch-1 // the largest batch below this one that fits, 0 if none
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(c, mid, ctx) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo > 0 {
		fit += fmt.Sprintf("; size %s fits at batch %d", size, lo)
	}
	return fmt.Errorf("gpt2: size %s (vocab %d) at batch %d, ctx %d %s: %s", size, c.Vocab, batch, ctx, why, fit)
}

// gib writes n bytes in GiB, or MiB below one GiB.
func gib(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
