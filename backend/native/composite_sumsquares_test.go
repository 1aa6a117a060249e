//go:build ggml

package native

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan sum_squares is patch 0018's kernels, three inputs a node:
// every group's partial sums, then the groups' sums chained. Where its
// probe fails it runs in waves: every input's squares, then their row sums
// stage by stage, then the adds of the sums, consecutive. Input by input,
// each small node waited at a barrier for the one before it (a GPT step's
// ~200 gradients: ~650 barriers); consecutive adds are what ggml-vulkan
// fuses (multi_add).
func TestSumSquaresWaves(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		shapes := [][]int{{3, 5}, {7}, {40, 300}, {1}, {64, 64}, {9, 2}, {5}, {128, 100}, {2, 2, 2}, {33}, {17, 3}}
		g := &backend.Graph{NumArgs: len(shapes) + 1}
		var in []int
		for k, s := range shapes {
			g.Nodes = append(g.Nodes, arg(k, s...))
			in = append(in, k)
		}
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpSumSquares, In: in, Shape: []int{1}})
		g.Outputs = []backend.Output{{Node: len(shapes), Arg: len(shapes)}}
		if !d.sumSquares {
			t.Fatal("probeSumSquares kept the composition (a ggml built without patch 0018? AG_GGML_LOG=info says why)")
		}
		lowered := func(kernels bool) string {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.sumSquares = kernels
			defer func() { d.sumSquares = true }()
			l, err := d.lower(g)
			if err != nil {
				t.Fatal(err)
			}
			defer l.free()
			return l.opSequence()
		}
		// 4 groups' partial sums, then their 4 sums chained
		if seq, want := lowered(true), regexp.MustCompile(`^(CUSTOM ){7}CUSTOM$`); !want.MatchString(seq) {
			t.Errorf("sum_squares of %d inputs lowered to %q; want 4 partial sums, then 4 adds", len(shapes), seq)
		}
		// 11 squares; the 12000- and 12800-value inputs' first stage;
		// the row sums of the inputs but the single value; 10 adds.
		want := regexp.MustCompile(`^(SQR ){11}(SUM_ROWS ){2}(SUM_ROWS ){10}(ADD ){9}ADD$`)
		if seq := lowered(false); !want.MatchString(seq) {
			t.Errorf("sum_squares of %d inputs lowered without patch 0018's kernels to %q; want the squares, the sums, then the adds", len(shapes), seq)
		}
		rng := rand.New(rand.NewPCG(3, 3))
		args := make([][]float32, len(shapes)+1)
		for k, s := range shapes {
			args[k] = randVals(rng, backend.NumElems(s))
		}
		args[len(shapes)] = make([]float32, 1)
		runAndCompare(t, be, g, args, 1e-5)
	})
}
