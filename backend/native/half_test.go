//go:build ggml

package native

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan a product of f16 values by construction runs as ggml's f16
// matmul (its tensor-core path): operands rounded by round_f16, and
// activations core stored in 16 bits (unpack_f16 of a pack_f16), so that
// SetActivationStorage does not take the backward's products off it.
func TestHalfMatMulOperands(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		g := halfProducts(1)
		rng := rand.New(rand.NewPCG(4, 4))
		runAndCompare(t, be, g, [][]float32{randVals(rng, 8*16), randVals(rng, 16*4), make([]float32, 8*4)}, 1e-5)
		if c := loweredOps(t, d, g); !strings.Contains(c, " f16]=1") {
			t.Errorf("want one f16 matmul: %s", c)
		}
	})
}

// loweredOps lowers g on d and returns its ggml op counts (opCounts).
func loweredOps(t *testing.T, d *device, g *backend.Graph) string {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	l, err := d.lower(g)
	if err != nil {
		t.Fatal(err)
	}
	defer l.free()
	return l.opCounts()
}

// onVulkan runs f on the ggml-vulkan device of the tests: the rules these
// tests check are its (ggml-cpu multiplies f32, and runs ag's own gelu_back).
func onVulkan(t *testing.T, f func(t *testing.T, be backend.Backend, d *device)) {
	for _, name := range devices(t) {
		if name == VulkanName {
			t.Run(name, func(t *testing.T) {
				be := open(t, name)
				f(t, be, be.(*device))
			})
		}
	}
}

// cpyNodes is how many CPY nodes g lowers to on d (casts and copies).
func cpyNodes(t *testing.T, d *device, g *backend.Graph) int {
	t.Helper()
	m := regexp.MustCompile(`CPY=(\d+)`).FindStringSubmatch(loweredOps(t, d, g))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A round_f16 read by several f16 products is cast to f16 once, where the
// round is: the products share the round's own f16 copy (each cast is a
// ggml node, and on an H100 the f16 GPT step's 1390 copies took 18.9 ms).
func TestHalfRoundSharedCast(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		cpys := func(g *backend.Graph) int { return cpyNodes(t, d, g) }
		one, three := cpys(halfProducts(1)), cpys(halfProducts(3))
		// The outputs go straight into their args: no copy grows with
		// the products (each cast its own: 5 and 7 copies).
		if three != one {
			t.Errorf("three f16 products of one round: %d CPY nodes, one product: %d; want the same (one shared cast): %s", three, one, loweredOps(t, d, halfProducts(3)))
		}
		rng := rand.New(rand.NewPCG(5, 5))
		g := halfProducts(3)
		runAndCompare(t, be, g, [][]float32{randVals(rng, 8*16), randVals(rng, 16*4), make([]float32, 8*4), make([]float32, 8*4), make([]float32, 8*4)}, 1e-5)
	})
}

// A round_f16 that only f16 products read is one copy (its f16 cast): the
// cast back to f32 joins the graph only where another node reads it (an
// add here) or the round is an output, and then both give its values.
func TestHalfRoundBackCastOnDemand(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		cpys := func(g *backend.Graph) int { return cpyNodes(t, d, g) }
		// round_f16 of arg 0 [8, 16] times round_f16 of arg 1 [16, 4]
		// into arg 2; with add, round(arg 0) + arg 0 into arg 3 too;
		// with out, round(arg 1) itself into arg 3.
		build := func(add, out bool) *backend.Graph {
			g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
				{Op: backend.OpArg, Arg: 0, Shape: []int{8, 16}},
				{Op: backend.OpArg, Arg: 1, Shape: []int{16, 4}},
				{Op: backend.OpRoundF16, In: []int{0}, Shape: []int{8, 16}},
				{Op: backend.OpRoundF16, In: []int{1}, Shape: []int{16, 4}},
				{Op: backend.OpMatMul, In: []int{2, 3}, Shape: []int{8, 4}},
			}, Outputs: []backend.Output{{Node: 4, Arg: 2}}}
			switch {
			case add:
				g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAdd, In: []int{2, 0}, Shape: []int{8, 16}})
				g.Outputs, g.NumArgs = append(g.Outputs, backend.Output{Node: 5, Arg: 3}), 4
			case out:
				g.Outputs, g.NumArgs = append(g.Outputs, backend.Output{Node: 3, Arg: 3}), 4
			}
			return g
		}
		if c := cpys(build(false, false)); c != 2 {
			t.Errorf("two rounds read by one f16 product: %d CPY nodes, want 2 (their f16 casts): %s", c, loweredOps(t, d, build(false, false)))
		}
		for _, tc := range []struct {
			name     string
			add, out bool
			shape    int
		}{{"read by an add", true, false, 8 * 16}, {"an output", false, true, 16 * 4}} {
			g := build(tc.add, tc.out)
			if c := cpys(g); c != 3 {
				t.Errorf("%s: %d CPY nodes, want 3 (one cast back to f32): %s", tc.name, c, loweredOps(t, d, g))
			}
			rng := rand.New(rand.NewPCG(6, 6))
			runAndCompare(t, be, g, [][]float32{randVals(rng, 8*16), randVals(rng, 16*4), make([]float32, 8*4), make([]float32, tc.shape)}, 1e-5)
		}
	})
}

// halfProducts is products matmuls of an activation stored in 16 bits
// (unpack_f16 of a pack_f16 of arg 0, [8, 16]) by a weight rounded to f16
// (round_f16 of arg 1, [16, 4]), each written to an arg of its own.
func halfProducts(products int) *backend.Graph {
	g := &backend.Graph{NumArgs: 2 + products, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{8, 16}},
		{Op: backend.OpArg, Arg: 1, Shape: []int{16, 4}},
		{Op: backend.OpPackF16, In: []int{0}, Shape: []int{64}},
		{Op: backend.OpUnpackF16, In: []int{2}, Shape: []int{8, 16}},
		{Op: backend.OpRoundF16, In: []int{1}, Shape: []int{16, 4}},
	}}
	for p := 0; p < products; p++ {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpMatMul, In: []int{3, 4}, Shape: []int{8, 4}})
		g.Outputs = append(g.Outputs, backend.Output{Node: len(g.Nodes) - 1, Arg: 2 + p})
	}
	return g
}

// A permute read by rounds alone is no copy of its own: the rounds' casts
// read the permuted view (attention's heads split from q, k and v at f16
// precision). A permute that another op reads is still made contiguous.
func TestHalfRoundOfPermuteNoCopy(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		graph := func(second backend.Op) *backend.Graph {
			g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
				arg(0, 2, 3, 4, 8),
				{Op: backend.OpPermute, In: []int{0}, Shape: []int{2, 4, 3, 8}, Perm: []int{0, 2, 1, 3}},
				{Op: backend.OpRoundF16, In: []int{1}, Shape: []int{2, 4, 3, 8}},
				{Op: second, In: []int{1}, Shape: []int{2, 4, 3, 8}},
			}, Outputs: []backend.Output{{Node: 2, Arg: 1}, {Node: 3, Arg: 2}}}
			return g
		}
		conts := func(g *backend.Graph) string {
			m := regexp.MustCompile(`CONT=(\d+)`).FindStringSubmatch(loweredOps(t, d, g))
			if m == nil {
				return "0"
			}
			return m[1]
		}
		if c := conts(graph(backend.OpRoundF16)); c != "0" {
			t.Errorf("a permute read by two rounds: %s CONT nodes, want 0: %s", c, loweredOps(t, d, graph(backend.OpRoundF16)))
		}
		if c := conts(graph(backend.OpNeg)); c != "1" {
			t.Errorf("a permute read by a round and a neg: %s CONT nodes, want 1: %s", c, loweredOps(t, d, graph(backend.OpNeg)))
		}
		rng := rand.New(rand.NewPCG(9, 9))
		for _, op := range []backend.Op{backend.OpRoundF16, backend.OpNeg} {
			runAndCompare(t, be, graph(op), [][]float32{randVals(rng, 192), make([]float32, 192), make([]float32, 192)}, 0)
		}
	})
}

// An add that only round_f16 reads writes its sum as f16 (addToHalf): a
// layer norm's output plus its bias, read by the next layer's f16
// products, costs no f32 write and no cast. An add read by anything else
// too stays f32, with the round's cast. The values are the reference's.
func TestHalfAddRound(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		// (arg 0 [8, 16] + arg 1 [16] broadcast) rounded, times round(arg
		// 2 [16, 4]) into arg 3; with alsoF32, the sum itself into arg 4.
		build := func(alsoF32 bool) *backend.Graph {
			g := &backend.Graph{NumArgs: 4, Nodes: []backend.Node{
				{Op: backend.OpArg, Arg: 0, Shape: []int{8, 16}},
				{Op: backend.OpArg, Arg: 1, Shape: []int{16}},
				{Op: backend.OpExpand, In: []int{1}, Shape: []int{8, 16}},
				{Op: backend.OpAdd, In: []int{0, 2}, Shape: []int{8, 16}},
				{Op: backend.OpRoundF16, In: []int{3}, Shape: []int{8, 16}},
				{Op: backend.OpArg, Arg: 2, Shape: []int{16, 4}},
				{Op: backend.OpRoundF16, In: []int{5}, Shape: []int{16, 4}},
				{Op: backend.OpMatMul, In: []int{4, 6}, Shape: []int{8, 4}},
			}, Outputs: []backend.Output{{Node: 7, Arg: 3}}}
			if alsoF32 {
				g.Outputs, g.NumArgs = append(g.Outputs, backend.Output{Node: 3, Arg: 4}), 5
			}
			return g
		}
		rng := rand.New(rand.NewPCG(7, 7))
		in := [][]float32{randVals(rng, 8*16), randVals(rng, 16), randVals(rng, 16*4), make([]float32, 8*4)}
		g := build(false)
		if c := loweredOps(t, d, g); cpyNodes(t, d, g) != 1 || !strings.Contains(c, " f16]=1") {
			t.Errorf("an add read only by a round: want one CPY (the weight's cast) and an f16 product: %s", c)
		}
		runAndCompare(t, be, g, in, 1e-5)
		g = build(true)
		if c := cpyNodes(t, d, g); c != 2 {
			t.Errorf("an add that is an output too: %d CPY nodes, want 2 (the sum's cast and the weight's): %s", c, loweredOps(t, d, g))
		}
		runAndCompare(t, be, g, append(in, make([]float32, 8*16)), 1e-5)

		// Through a reshape and a permute (heads split from q, k and v):
		// the f16 sum's permuted copy is the round (a CONT), cast back to
		// f32 for the output; an f32 sum would take two CPY nodes.
		g = &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{8, 16}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{16}},
			{Op: backend.OpExpand, In: []int{1}, Shape: []int{8, 16}},
			{Op: backend.OpAdd, In: []int{0, 2}, Shape: []int{8, 16}},
			{Op: backend.OpReshape, In: []int{3}, Shape: []int{2, 4, 4, 4}},
			{Op: backend.OpPermute, In: []int{4}, Perm: []int{0, 2, 1, 3}, Shape: []int{2, 4, 4, 4}},
			{Op: backend.OpRoundF16, In: []int{5}, Shape: []int{2, 4, 4, 4}},
		}, Outputs: []backend.Output{{Node: 6, Arg: 2}}}
		if c := loweredOps(t, d, g); cpyNodes(t, d, g) != 1 || !strings.Contains(c, "CONT=1") {
			t.Errorf("a permuted add read only by a round: want one CONT (the f16 copy) and one CPY (back to f32): %s", c)
		}
		runAndCompare(t, be, g, [][]float32{in[0], in[1], make([]float32, 8*16)}, 1e-5)
	})
}
