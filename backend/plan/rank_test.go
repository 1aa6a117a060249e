package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
)

// rankCase is one graph of rank 5 or 6 nodes.
type rankCase struct {
	name string
	g    *backend.Graph
}

// randShape is a shape of rank r with dimensions 1 to 3 (some 1s, so that
// dropped and merged axes are exercised).
func randShape(rng *rand.Rand, r int) []int {
	s := make([]int, r)
	for k := range s {
		s[k] = 1 + rng.IntN(3)
	}
	return s
}

// broadcastOf is s with some dimensions 1 and maybe fewer leading axes.
func broadcastOf(rng *rand.Rand, s []int) []int {
	b := slices.Clone(s)
	for k := range b {
		if rng.IntN(2) == 0 {
			b[k] = 1
		}
	}
	return b[rng.IntN(2):]
}

// rankCases are the graphs the lowering is checked on: every primitive
// above the kernel rank, in shapes drawn at random and in the shapes that
// need the chains (permutes of 5 and 6 groups, broadcasts of alternating
// patterns).
func rankCases() []rankCase {
	rng := rand.New(rand.NewPCG(42, 6))
	var cs []rankCase
	add := func(name string, b *builder) { cs = append(cs, rankCase{name, &b.g}) }
	one := func(name string, s []int, n backend.Node) {
		b := &builder{}
		x := b.arg(s...)
		n.In = []int{x}
		b.out(b.node(n))
		add(fmt.Sprintf("%s/%v", name, s), b)
	}
	two := func(name string, sa, sb []int, n backend.Node) {
		b := &builder{}
		n.In = []int{b.arg(sa...), b.arg(sb...)}
		b.out(b.node(n))
		add(fmt.Sprintf("%s/%v,%v", name, sa, sb), b)
	}
	for _, r := range []int{5, 6} {
		for range 4 {
			s := randShape(rng, r)
			one("exp", s, backend.Node{Op: backend.OpExp, Shape: s})
			one("softmax", s, backend.Node{Op: backend.OpSoftmax, Shape: s})
			for ax := range r {
				o := slices.Clone(s)
				o[ax] = 1
				one("sum", s, backend.Node{Op: backend.OpSum, Shape: o, Axis: ax})
				one("max", s, backend.Node{Op: backend.OpMax, Shape: o, Axis: ax})
			}
			sb := broadcastOf(rng, s)
			sa := broadcastOf(rng, s)
			sa = append(slices.Repeat([]int{1}, r-len(sa)), sa...) // rank r: one operand above the rank
			out, _ := backend.BroadcastShape(sa, sb)
			two("add", sa, sb, backend.Node{Op: backend.OpAdd, Shape: out})
			two("sub", s, sb, backend.Node{Op: backend.OpSub, Shape: s})
			one("expand", sb, backend.Node{Op: backend.OpExpand, Shape: s})
			p := rng.Perm(r)
			one("permute", s, backend.Node{Op: backend.OpPermute, Shape: permuted(s, p), Perm: p})
			one("reshape", s, backend.Node{Op: backend.OpReshape, Shape: []int{backend.NumElems(s)}})
			one("slice_rows", s, backend.Node{Op: backend.OpSliceRows, Shape: append([]int{1}, s[1:]...), Start: s[0] - 1})
			{
				b := &builder{}
				x := b.arg(s...)
				pk := b.op(backend.OpPackF16, []int{backend.PackedLen(backend.NumElems(s))}, x)
				b.out(b.op(backend.OpUnpackF16, slices.Clone(s), pk))
				add(fmt.Sprintf("pack_unpack/%v", s), b)
			}
			{
				b := &builder{}
				x, y := b.arg(s...), b.arg(s...)
				b.out(b.op(backend.OpConcatRows, append([]int{2 * s[0]}, s[1:]...), x, y))
				add(fmt.Sprintf("concat_rows/%v", s), b)
			}
			{
				b := &builder{}
				x, idx := b.arg(s...), b.arg(4)
				gr := b.op(backend.OpGetRows, append([]int{4}, s[1:]...), x, idx)
				b.out(gr)
				b.out(b.op(backend.OpScatterAddRows, slices.Clone(s), gr, idx))
				add(fmt.Sprintf("get_scatter_rows/%v", s), b)
			}
			{
				batch := randShape(rng, r-2)
				m, k, n := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3)
				ta, tb := rng.IntN(2) == 0, rng.IntN(2) == 0
				sa, sb := append(slices.Clone(batch), m, k), append(slices.Clone(batch), k, n)
				if ta {
					sa = append(slices.Clone(batch), k, m)
				}
				if tb {
					sb = append(slices.Clone(batch), n, k)
				}
				two("matmul", sa, sb, backend.Node{Op: backend.OpMatMul, Shape: append(slices.Clone(batch), m, n), TransA: ta, TransB: tb})
			}
			{
				batch := randShape(rng, r-2)
				tq, tk, d := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3)
				keep := broadcastOf(rng, append(slices.Clone(batch), tq, tk))
				keep = append(slices.Repeat([]int{1}, r-len(keep)), keep...)
				b := &builder{}
				q := b.arg(append(slices.Clone(batch), tq, d)...)
				k := b.arg(append(slices.Clone(batch), tk, d)...)
				v := b.arg(append(slices.Clone(batch), tk, d)...)
				kp := b.arg(keep...)
				b.out(b.node(backend.Node{Op: backend.OpAttention, In: []int{q, k, v, kp}, Shape: append(slices.Clone(batch), tq, d), A: 0.5}))
				add(fmt.Sprintf("attention/%v,keep %v", batch, keep), b)
			}
		}
	}
	// the chains: 5 and 6 groups after merging
	s6 := []int{2, 3, 2, 3, 2, 3}
	for _, p := range [][]int{{5, 4, 3, 2, 1, 0}, {1, 0, 3, 2, 5, 4}, {2, 4, 0, 5, 1, 3}, {5, 0, 1, 2, 3, 4}, {1, 2, 3, 4, 5, 0}} {
		one("permute", s6, backend.Node{Op: backend.OpPermute, Shape: permuted(s6, p), Perm: p})
	}
	one("permute", []int{2, 3, 2, 3, 2}, backend.Node{Op: backend.OpPermute, Shape: []int{2, 3, 2, 3, 2}, Perm: []int{4, 3, 2, 1, 0}})
	one("expand", []int{2, 1, 3, 1, 2, 1}, backend.Node{Op: backend.OpExpand, Shape: []int{2, 3, 3, 3, 2, 3}})
	one("expand", []int{1, 3, 1, 3, 1, 3}, backend.Node{Op: backend.OpExpand, Shape: s6})
	two("mul", []int{2, 1, 2, 1, 2, 1}, []int{1, 3, 1, 3, 1, 3}, backend.Node{Op: backend.OpMul, Shape: s6})
	two("mul", []int{2, 3, 2, 3, 2, 3}, []int{1, 3, 1, 3, 1, 3}, backend.Node{Op: backend.OpMul, Shape: s6})
	two("maximum", []int{2, 1, 2, 3, 1, 3}, []int{1, 3, 2, 1, 2, 1}, backend.Node{Op: backend.OpMaximum, Shape: s6})
	{ // an optimizer update of a rank-5 parameter, its gradient computed at rank 5
		s := []int{2, 3, 1, 2, 3}
		b := &builder{}
		w, gr, m, v, hp := b.arg(s...), b.arg(s...), b.arg(s...), b.arg(s...), b.arg(7)
		g2 := b.op(backend.OpMul, s, gr, gr)
		b.op(backend.OpAdamW, s, w, g2, m, v, hp)
		sw, sg, sm, shp := b.arg(s...), b.arg(s...), b.arg(s...), b.arg(3)
		b.op(backend.OpSGD, s, sw, sg, sm, shp)
		add("adamw_sgd/[2 3 1 2 3]", b)
	}
	{ // random values at rank 6, read at rank 2
		b := &builder{}
		st := b.arg(backend.RandStateLen)
		u := b.node(backend.Node{Op: backend.OpRandUniform, In: []int{st}, Shape: s6, Start: 3})
		b.out(b.op(backend.OpReshape, []int{6, 36}, u))
		add("rand_uniform/[2 3 2 3 2 3]", b)
	}
	{ // a chain: the lowered shapes of one value read in several groupings
		s := []int{2, 1, 3, 2, 2, 3}
		b := &builder{}
		x, y := b.arg(s...), b.arg(1, 3, 1, 2, 1)
		e := b.op(backend.OpExp, s, x)
		a := b.op(backend.OpAdd, s, e, y)
		sm := b.node(backend.Node{Op: backend.OpSum, In: []int{a}, Shape: []int{2, 1, 3, 2, 1, 3}, Axis: 4})
		p := b.node(backend.Node{Op: backend.OpPermute, In: []int{a}, Shape: permuted(s, []int{3, 0, 5, 2, 4, 1}), Perm: []int{3, 0, 5, 2, 4, 1}})
		b.out(sm)
		b.out(p)
		b.out(b.op(backend.OpReshape, []int{12, 6}, a))
		b.out(b.op(backend.OpNeg, slices.Clone(s), a))
		add("chain", b)
	}
	return cs
}

func permuted(s, p []int) []int {
	out := make([]int, len(p))
	for k, a := range p {
		out[k] = s[a]
	}
	return out
}

// TestLowerRank: every case lowered for 4-d kernels computes exactly what
// the reference computes at its own rank, with no node above rank 4, and
// Make plans it; Make refuses the unlowered graph, naming the rank.
func TestLowerRank(t *testing.T) {
	for _, c := range rankCases() {
		t.Run(c.name, func(t *testing.T) {
			g := c.g
			if err := g.Validate(); err != nil {
				t.Fatalf("case graph: %v\n%s", err, g)
			}
			lg, origin := Expand(g, backend.Caps{})
			if lg == g || len(origin) != len(lg.Nodes) {
				t.Fatalf("Expand left the graph (origin %v)", origin)
			}
			if err := lg.Validate(); err != nil {
				t.Fatalf("lowered graph: %v\n%s", err, lg)
			}
			for i, n := range lg.Nodes {
				if len(n.Shape) > backend.NativeRank {
					t.Fatalf("node %d (%v %v) above rank %d\n%s", i, n.Op, n.Shape, backend.NativeRank, lg)
				}
				if origin[i] < 0 || origin[i] >= len(g.Nodes) {
					t.Fatalf("node %d has origin %d of %d nodes", i, origin[i], len(g.Nodes))
				}
			}
			if _, err := Make(lg, Options{}); err != nil {
				t.Fatalf("Make of the lowered graph: %v\n%s", err, lg)
			}
			if _, err := Make(g, Options{}); err == nil || !strings.Contains(err.Error(), "above the 4") {
				t.Errorf("Make of the rank-%d graph: %v, want an error naming the kernels' rank", maxRank(g), err)
			}
			want, got := rankArgs(g), rankArgs(g)
			if _, err := reference.Eval(g, want); err != nil {
				t.Fatal(err)
			}
			if _, err := reference.Eval(lg, got); err != nil {
				t.Fatal(err)
			}
			for a := range want {
				for k := range want[a] {
					if want[a][k] != got[a][k] && !(want[a][k] != want[a][k] && got[a][k] != got[a][k]) {
						t.Fatalf("arg %d [%d]: %g, want %g\ngraph:\n%s\nlowered:\n%s", a, k, got[a][k], want[a][k], g, lg)
					}
				}
			}
		})
	}
}

// TestLowerRankKernelRank: a backend whose kernels take rank 6 gets the
// graph itself; a graph of rank 4 is never touched.
func TestLowerRankKernelRank(t *testing.T) {
	c := rankCases()[0]
	if lg, origin := Expand(c.g, backend.Caps{KernelRank: backend.MaxRank}); lg != c.g || origin != nil {
		t.Errorf("Expand for kernels of rank %d rewrote the graph", backend.MaxRank)
	}
	if _, err := Make(c.g, Options{KernelRank: backend.MaxRank}); err != nil {
		t.Errorf("Make for kernels of rank %d: %v", backend.MaxRank, err)
	}
	b := &builder{}
	b.out(b.op(backend.OpExp, []int{2, 3, 4, 5}, b.arg(2, 3, 4, 5)))
	if lg, origin := Expand(&b.g, backend.Caps{}); lg != &b.g || origin != nil {
		t.Errorf("Expand rewrote a graph of rank 4")
	}
}

// TestLowerRankComposite: a native composite above the kernels' rank is
// decomposed and its primitives lowered; origin names the composite.
func TestLowerRankComposite(t *testing.T) {
	s := []int{2, 1, 3, 2, 4}
	b := &builder{}
	x := b.arg(s...)
	ln := b.node(backend.Node{Op: backend.OpLayerNorm, In: []int{x}, Shape: s, A: 1e-5})
	b.out(ln)
	caps := backend.Caps{Composites: []backend.Op{backend.OpLayerNorm}}
	lg, origin := Expand(&b.g, caps)
	for i, n := range lg.Nodes {
		if n.Op.IsComposite() || len(n.Shape) > backend.NativeRank {
			t.Fatalf("node %d is %v %v\n%s", i, n.Op, n.Shape, lg)
		}
		if origin[i] != x && origin[i] != ln {
			t.Errorf("node %d has origin %d", i, origin[i])
		}
	}
	want, got := rankArgs(&b.g), rankArgs(&b.g)
	if _, err := reference.Eval(&b.g, want); err != nil {
		t.Fatal(err)
	}
	if _, err := reference.Eval(lg, got); err != nil {
		t.Fatal(err)
	}
	for k := range want[1] {
		if d := want[1][k] - got[1][k]; d > 1e-12 || d < -1e-12 {
			t.Fatalf("[%d]: %g, want %g", k, got[1][k], want[1][k])
		}
	}
	// of rank 4 it stays native
	b4 := &builder{}
	x4 := b4.arg(2, 3, 2, 4)
	b4.out(b4.node(backend.Node{Op: backend.OpLayerNorm, In: []int{x4}, Shape: []int{2, 3, 2, 4}, A: 1e-5}))
	if lg, _ := Expand(&b4.g, caps); lg != &b4.g {
		t.Errorf("a native composite of rank 4 was rewritten")
	}
}

func maxRank(g *backend.Graph) int {
	r := 0
	for _, n := range g.Nodes {
		r = max(r, len(n.Shape))
	}
	return r
}

// rankArgs are distinct values for g's args (indices in range where the
// arg is read as indices, whole words where it is unpacked).
func rankArgs(g *backend.Graph) [][]float64 {
	need := make([]int, g.NumArgs)
	index := make([]int, g.NumArgs) // rows an index arg selects from (0: not indices)
	hyper := make([]bool, g.NumArgs)
	for _, n := range g.Nodes {
		if n.Op == backend.OpArg {
			need[n.Arg] = max(need[n.Arg], backend.NumElems(n.Shape))
		}
		switch n.Op {
		case backend.OpGetRows:
			index[g.Nodes[n.In[1]].Arg] = g.Nodes[n.In[0]].Shape[0]
		case backend.OpAdamW, backend.OpSGD:
			hyper[g.Nodes[n.In[len(n.In)-1]].Arg] = true
		}
	}
	for _, o := range g.Outputs {
		need[o.Arg] = max(need[o.Arg], backend.NumElems(g.Nodes[o.Node].Shape))
	}
	args := make([][]float64, g.NumArgs)
	for a := range args {
		args[a] = make([]float64, need[a])
		for k := range args[a] {
			switch {
			case index[a] > 0:
				args[a][k] = float64((k*7 + 1) % index[a])
			case hyper[a]:
				args[a][k] = []float64{0.01, 0.9, 0.999, 1e-8, 0.01, 0.1, 0.01, 1}[k]
			default:
				args[a][k] = float64((k*37+a*11)%23)/8 - 1.4
			}
		}
	}
	return args
}

// TestChainOf: for every order of 5 and 6 groups, the chain of permutes
// reaches it, each permute of 2 to 4 contiguous segments, in at most 2
// (5 groups) or 3 (6 groups) permutes; a reversal of 6 takes 2.
func TestChainOf(t *testing.T) {
	for n, most := range map[int]int{5: 2, 6: 3} {
		count := 0
		var all func(p []int, used int)
		all = func(p []int, used int) {
			if len(p) == n {
				count++
				cur := identity(n)
				chain := chainOf(p)
				for _, mv := range chain {
					if k := len(mv.cuts) - 1; k < 2 || k > backend.NativeRank || mv.cuts[0] != 0 || mv.cuts[k] != n {
						t.Fatalf("%v: move %+v", p, mv)
					}
					var next []int
					for _, s := range mv.perm {
						next = append(next, cur[mv.cuts[s]:mv.cuts[s+1]]...)
					}
					cur = next
				}
				if !slices.Equal(cur, p) || len(chain) > most {
					t.Fatalf("%v: the chain %+v gives %v in %d permutes (at most %d)", p, chain, cur, len(chain), most)
				}
				return
			}
			for i := range n {
				if used&(1<<i) == 0 {
					all(append(slices.Clone(p), i), used|1<<i)
				}
			}
		}
		all(nil, 0)
		if want := map[int]int{5: 120, 6: 720}[n]; count != want {
			t.Fatalf("%d orders of %d", count, n)
		}
	}
	if c := chainOf([]int{5, 4, 3, 2, 1, 0}); len(c) != 2 {
		t.Errorf("a reversal of 6 groups: %d permutes %+v, want 2", len(c), c)
	}
}

// TestLowerRankInvalid: an invalid graph is not lowered (a rank-7 arg
// would become a valid 4-d one): Make refuses it, naming the limit.
func TestLowerRankInvalid(t *testing.T) {
	b := &builder{}
	b.out(b.op(backend.OpNeg, []int{1, 1, 1, 1, 1, 2, 2}, b.arg(1, 1, 1, 1, 1, 2, 2)))
	lg, origin := Expand(&b.g, backend.Caps{})
	if lg != &b.g || origin != nil {
		t.Fatalf("Expand rewrote a graph of rank 7:\n%s", lg)
	}
	if _, err := Make(lg, Options{}); err == nil || !strings.Contains(err.Error(), "backend.MaxRank = 6") {
		t.Errorf("Make of rank 7: %v, want the limit named", err)
	}
}
