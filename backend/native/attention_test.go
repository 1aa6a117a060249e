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
			if c := loweredOps(t, d, g); !strings.Contains(c, " FLASH_ATTN_EXT=2") || !strings.Contains(c, " REPEAT=1") {
				t.Errorf("want two flash attentions and one mask: %s", c)
			}
		})
	}
}
