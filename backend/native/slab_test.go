//go:build ggml

package native

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// A freed small buffer's chunk is reused dirty: the new buffer must still
// read as zeros through Read, a partial Write and a Run that reads it, and a
// Run that overwrites it whole must leave exactly its results.
func TestSlabReuseReadsZeros(t *testing.T) {
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			r := rand.New(rand.NewPCG(3, 4))
			const n = 40
			reuse := func() backend.Buffer {
				t.Helper()
				b, err := be.Alloc(n)
				if err != nil {
					t.Fatal(err)
				}
				if err := be.Write(b, 0, randVals(r, n)); err != nil {
					t.Fatal(err)
				}
				be.Free(b)
				b, err = be.Alloc(n) // the same chunk on a slab device
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { be.Free(b) })
				return b
			}
			zeros := func(what string, got []float32, from int) {
				t.Helper()
				for i := from; i < len(got); i++ {
					if got[i] != 0 {
						t.Fatalf("%s: [%d] = %g, want 0", what, i, got[i])
					}
				}
			}
			zeros("Read", download(t, be, reuse()), 0)

			b := reuse()
			if err := be.Write(b, 0, []float32{5, 6}); err != nil {
				t.Fatal(err)
			}
			got := download(t, be, b)
			if got[0] != 5 || got[1] != 6 {
				t.Fatalf("partial Write: got %v, want 5 6 first", got[:2])
			}
			zeros("partial Write", got, 2)

			// out = in + 1 reads a reused chunk: all ones.
			in, out := reuse(), reuse()
			g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, n),
				{Op: backend.OpAffine, In: []int{0}, Shape: []int{n}, A: 1, B: 1}},
				Outputs: []backend.Output{{Node: 1, Arg: 1}}}
			p, err := be.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			if _, err := p.Run([]backend.Buffer{in, out}); err != nil {
				t.Fatal(err)
			}
			for i, v := range download(t, be, out) {
				if v != 1 {
					t.Fatalf("Run on reused chunks: out[%d] = %g, want 1", i, v)
				}
			}
			zeros("input after Run", download(t, be, in), 0)

			// An output shorter than its buffer must leave the tail zero.
			g2 := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, n/2),
				{Op: backend.OpAffine, In: []int{0}, Shape: []int{n / 2}, A: 1, B: 2}},
				Outputs: []backend.Output{{Node: 1, Arg: 1}}}
			p2, err := be.Compile(g2)
			if err != nil {
				t.Fatal(err)
			}
			defer p2.Release()
			short := reuse()
			if _, err := p2.Run([]backend.Buffer{in, short}); err != nil {
				t.Fatal(err)
			}
			got = download(t, be, short)
			for i := range n / 2 {
				if got[i] != 2 {
					t.Fatalf("short output [%d] = %g, want 2", i, got[i])
				}
			}
			zeros("short output tail", got, n/2)
		})
	}
}
