//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// TestAttentionLayouts checks the layouts the lowerings handle apart:
// keeps broadcast over batch, heads or queries, leading dims that
// ggml-vulkan swaps (a batch of heads and no batch) or keeps (both),
// head sizes it pads, a single query, rows that attend nothing.
func TestAttentionLayouts(t *testing.T) {
	cases := []struct{ q, keep []int }{
		{[]int{2, 3, 5, 16}, []int{2, 1, 1, 7}},
		{[]int{2, 3, 5, 16}, []int{1, 3, 5, 7}},
		{[]int{2, 3, 5, 12}, []int{2, 3, 5, 7}},
		{[]int{1, 2, 33, 24}, []int{1, 2, 1, 40}},
		{[]int{4, 1, 20}, []int{4, 1, 9}},
		{[]int{3, 6, 8}, []int{1, 6, 9}},
		{[]int{6, 3}, []int{6, 1}},
	}
	for _, name := range devices(t) {
		be := open(t, name)
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/q%v,keep%v", name, c.q, c.keep), func(t *testing.T) {
				r := len(c.q)
				tk, dv := c.keep[r-1], c.q[r-1]+4
				if tk == 1 {
					tk = 9
				}
				lead := c.q[:r-2]
				with := func(a, b int) []int { return append(append([]int(nil), lead...), a, b) }
				ks, vs, out := with(tk, c.q[r-1]), with(tk, dv), with(c.q[r-2], dv)
				g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{arg(0, c.q...), arg(1, ks...), arg(2, vs...), arg(3, c.keep...),
					{Op: backend.OpAttention, In: []int{0, 1, 2, 3}, Shape: out, A: 0.3}},
					Outputs: []backend.Output{{Node: 4, Arg: 4}}}
				rng := rand.New(rand.NewPCG(uint64(len(c.q)), uint64(tk)))
				keep := make([]float32, backend.NumElems(c.keep))
				for i := range keep {
					keep[i] = float32(rng.IntN(3) / 2) // a third attended: some rows none
				}
				runAndCompare(t, be, g, [][]float32{randVals(rng, backend.NumElems(c.q)), randVals(rng, backend.NumElems(ks)),
					randVals(rng, backend.NumElems(vs)), keep, make([]float32, backend.NumElems(out))}, 1e-5)
			})
		}
	}
}

// Two attentions with one keep share its mask on ggml-vulkan (one repeat
// of the bias), as a transformer's layers do.
func TestAttentionSharedMask(t *testing.T) {
	for _, name := range devices(t) {
		be := open(t, name)
		t.Run(name, func(t *testing.T) {
			g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{arg(0, 2, 7, 16), arg(1, 2, 9, 16), arg(2, 1, 7, 9),
				{Op: backend.OpAttention, In: []int{0, 1, 1, 2}, Shape: []int{2, 7, 16}, A: 0.25},
				{Op: backend.OpAttention, In: []int{3, 1, 1, 2}, Shape: []int{2, 7, 16}, A: 0.25}},
				Outputs: []backend.Output{{Node: 3, Arg: 3}, {Node: 4, Arg: 4}}}
			rng := rand.New(rand.NewPCG(1, 2))
			keep := make([]float32, 7*9)
			for i := range keep {
				keep[i] = float32(rng.IntN(2))
			}
			runAndCompare(t, be, g, [][]float32{randVals(rng, 2*7*16), randVals(rng, 2*9*16), keep,
				make([]float32, 2*7*16), make([]float32, 2*7*16)}, 1e-5)
			d := be.(*device)
			if d.isCPU {
				return
			}
			if c := loweredOps(t, d, g); !strings.Contains(c, " FLASH_ATTN_EXT[f32]=2") || !strings.Contains(c, " REPEAT=1") {
				t.Errorf("want two flash attentions and one mask: %s", c)
			}
		})
	}
}

// At f16 precision (B = 1) ggml-vulkan's flash attention reads k and v as
// f16, the rounds' own casts (no copy of its own): the tensor-core
// kernels where the device has them. The results are the f32 attention's
// within ir.go's latitude for B = 1.
func TestAttentionHalfKV(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		d.mu.Lock() // flashSupported's memo is Compile's, under d.mu
		half := d.flashHalf(64, 64)
		d.mu.Unlock()
		if !half {
			t.Skip("SKIP (loud): this ggml-vulkan device runs no flash attention with f16 k and v")
		}
		const b, h, tq, tk, dh = 2, 3, 33, 40, 64
		s := func(t int) []int { return []int{b, h, t, dh} }
		g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
			arg(0, s(tq)...), arg(1, s(tk)...), arg(2, s(tk)...), arg(3, 1, 1, tq, tk),
			{Op: backend.OpRoundF16, In: []int{0}, Shape: s(tq)},
			{Op: backend.OpRoundF16, In: []int{1}, Shape: s(tk)},
			{Op: backend.OpRoundF16, In: []int{2}, Shape: s(tk)},
			{Op: backend.OpAttention, In: []int{4, 5, 6, 3}, Shape: s(tq), A: 0.125, B: 1},
		}, Outputs: []backend.Output{{Node: 7, Arg: 4}}}
		c := loweredOps(t, d, g)
		if !strings.Contains(c, " FLASH_ATTN_EXT[f16]=1") {
			t.Errorf("f16 attention: want one flash attention of f16 k and v: %s", c)
		}
		// the three rounds' casts, q's cast back to f32 and the mask's
		// f16 bias: no copy of k or v of the attention's own
		if n := cpyNodes(t, d, g); n != 5 {
			t.Errorf("f16 attention: %d CPY nodes, want 5 (three rounds, q back to f32, the mask): %s", n, c)
		}
		rng := rand.New(rand.NewPCG(7, 7))
		keep := make([]float32, tq*tk)
		for i := range tq {
			for j := 0; j <= i+tk-tq; j++ {
				keep[i*tk+j] = 1
			}
		}
		args := [][]float32{randVals(rng, b*h*tq*dh), randVals(rng, b*h*tk*dh), randVals(rng, b*h*tk*dh), keep, make([]float32, b*h*tq*dh)}
		runAndCompare(t, be, g, args, 2e-3)
	})
}

// The heads of an attention's [B, H, T, Dv] result merged into [B, T, H,
// Dv] (a transformer's next step) are the order ggml's flash kernel
// writes: neither the attention's result nor the permute is copied.
func TestAttentionMergedHeadsNoCopy(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		const b, h, tq, dh = 2, 3, 9, 8
		s := []int{b, h, tq, dh}
		g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
			arg(0, s...), arg(1, s...), arg(2, s...), arg(3, 1, 1, tq, tq),
			{Op: backend.OpAttention, In: []int{0, 1, 2, 3}, Shape: s, A: 0.3},
			{Op: backend.OpPermute, In: []int{4}, Shape: []int{b, tq, h, dh}, Perm: []int{0, 2, 1, 3}},
			{Op: backend.OpReshape, In: []int{5}, Shape: []int{b, tq, h * dh}},
			{Op: backend.OpNeg, In: []int{6}, Shape: []int{b, tq, h * dh}},
		}, Outputs: []backend.Output{{Node: 7, Arg: 4}}}
		c := loweredOps(t, d, g)
		if !strings.Contains(c, "FLASH_ATTN_EXT") {
			t.Skipf("SKIP (loud): no flash attention on this device: %s", c)
		}
		if strings.Contains(c, "CONT=") {
			t.Errorf("attention, heads merged: want no contiguous copy: %s", c)
		}
		rng := rand.New(rand.NewPCG(8, 8))
		keep := make([]float32, tq*tq)
		for i := range tq {
			for j := 0; j <= i; j++ {
				keep[i*tq+j] = 1
			}
		}
		n := b * h * tq * dh
		runAndCompare(t, be, g, [][]float32{randVals(rng, n), randVals(rng, n), randVals(rng, n), keep, make([]float32, n)}, 1e-5)
	})
}
