package webgpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// attnTestCase is one attention graph over q, k, v, keep (args 0-3) into
// arg 4, with its args filled.
type attnTestCase struct {
	name string
	g    *backend.Graph
	args [][]float32
}

// attnGraph builds attention of the given sizes with random q, k, v in
// [-2, 2] and a keep mask of shape keepShape drawn by mask(index in keep).
func attnGraph(rng *rand.Rand, batch []int, tq, tk, d, dv int, keepShape []int, mask func(i int) float32) attnTestCase {
	lead := func(s ...int) []int { return append(append([]int(nil), batch...), s...) }
	shapes := [][]int{lead(tq, d), lead(tk, d), lead(tk, dv), keepShape}
	g := &backend.Graph{Nodes: argNodes(shapes), NumArgs: 5}
	g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAttention, In: []int{0, 1, 2, 3}, Shape: lead(tq, dv), A: float32(1 / math.Sqrt(float64(d)))})
	g.Outputs = []backend.Output{{Node: 4, Arg: 4}}
	args := make([][]float32, 5)
	for i := range 3 {
		a := make([]float32, backend.NumElems(shapes[i]))
		for j := range a {
			a[j] = float32(4*rng.Float64() - 2)
		}
		args[i] = a
	}
	args[3] = make([]float32, backend.NumElems(keepShape))
	for i := range args[3] {
		args[3][i] = mask(i)
	}
	args[4] = make([]float32, backend.NumElems(g.Nodes[4].Shape))
	name := fmt.Sprintf("%vx%dx%d/d%d/dv%d/keep%v", batch, tq, tk, d, dv, keepShape)
	return attnTestCase{name: name, g: g, args: args}
}

// attnCases cover the kernel's paths the conformance sizes do not reach:
// D over several chunks (odd and multiple of 4), Dv over several slices,
// keys split into parts for few workgroups, and keep masks broadcast over
// either batch dimension of four.
func attnCases() []attnTestCase {
	rng := rand.New(rand.NewPCG(3, 9))
	random := func(i int) float32 { return float32(rng.IntN(3) / 2) } // a third attend
	causal := func(tq, tk int) func(i int) float32 {
		return func(i int) float32 {
			if i%tk <= (i/tk)%tq {
				return 1
			}
			return 0
		}
	}
	return []attnTestCase{
		attnGraph(rng, []int{2}, 33, 70, 100, 130, []int{1, 33, 70}, causal(33, 70)),
		attnGraph(rng, []int{1}, 5, 300, 136, 72, []int{1, 5, 300}, random),
		attnGraph(rng, nil, 3, 1000, 16, 16, []int{1, 1}, func(int) float32 { return 1 }),
		attnGraph(rng, nil, 70, 1000, 7, 5, []int{70, 1000}, causal(70, 1000)),
		attnGraph(rng, []int{2, 3}, 9, 40, 8, 12, []int{1, 3, 9, 40}, random),
		attnGraph(rng, []int{2, 3}, 9, 40, 5, 3, []int{2, 1, 9, 40}, random),
		attnGraph(rng, []int{2, 3}, 9, 40, 5, 3, []int{2, 3, 1, 1}, func(i int) float32 { return float32(i % 2) }),
		attnSpecials(2, 4, 3),
		attnSpecials(1, 8, 8),
		attnSpecials(1, 130, 70),
	}
}

// attnSpecials is ir.go's attention line: 9 queries against 70 keys (three
// tiles) whose K and V rows hold NaN and infinities at some keys, and
// queries attending them or not. Per query: 0 avoids every special key
// (keep NaN attends, -0 does not), 1 attends a v holding NaN (NaN), 2 a -Inf
// score in the first tile then finite ones and -Inf in the second (finite),
// 3 only -Inf scores (NaN), 4 a +Inf score (NaN), 5 no key (0), 6 a q
// holding NaN, 7 a q holding +Inf (NaN both), 8 a -Inf score in the first
// tile whose v holds NaN, then a finite one (NaN in that column: weight 0
// times NaN).
func attnSpecials(batch, d, dv int) attnTestCase {
	rng := rand.New(rand.NewPCG(uint64(d), uint64(dv)))
	const tq, tk = 9, 70
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	c := attnGraph(rng, []int{batch}, tq, tk, d, dv, []int{1, tq, tk}, func(int) float32 { return 0 })
	q, k, v, keep := c.args[0], c.args[1], c.args[2], c.args[3]
	for b := range batch {
		for i := range tq {
			q[(b*tq+i)*d] = 0.5 + rng.Float32() // -Inf in k[0] gives -Inf
		}
		q[(b*tq+6)*d+d-1] = nan
		q[(b*tq+7)*d] = inf
		row := func(j int) []float32 { return k[(b*tk+j)*d:][:d] }
		row(5)[d/2] = nan
		row(9)[0] = inf
		row(13)[0] = -inf
		row(40)[0] = -inf
		row(66)[0] = inf
		v[(b*tk+3)*dv+dv-1] = nan
		v[(b*tk+7)*dv] = inf
		row(14)[0] = -inf
		v[(b*tk+14)*dv+dv/2] = nan
	}
	set := func(i int, keys ...int) {
		for _, j := range keys {
			keep[i*tk+j] = 1
		}
	}
	for j := range tk {
		switch j {
		case 3, 5, 7, 9, 13, 14, 40, 66:
		default:
			keep[j] = 1
		}
	}
	keep[20] = nan
	keep[21] = float32(math.Copysign(0, -1))
	for j := range tk {
		if j != 5 && j != 9 && j != 13 && j != 14 && j != 66 {
			keep[tk+j] = 1
		}
	}
	set(2, 13, 40, 45, 69)
	set(3, 13, 40)
	set(4, 0, 9, 50)
	set(6, 0, 33)
	set(7, 1, 2)
	set(8, 14, 45)
	c.name = fmt.Sprintf("specials/%dx%dx%d/d%d/dv%d", batch, tq, tk, d, dv)
	return c
}

// TestAttention runs attnCases against the float64 reference (special
// values included: NaN must meet NaN), with the default tiling and with
// others: more and fewer queries per workgroup, shorter tiles, wider chunks
// of D and slices of Dv, and no split into parts.
func TestAttention(t *testing.T) {
	be := openTest(t)
	t.Run("default", func(t *testing.T) { testAttention(t, be) })
	d := attnDefault
	for _, c := range []struct {
		name string
		f    func(*attnTuning)
	}{
		{"BQ128-BK32", func(tu *attnTuning) { tu.BQ, tu.BK = 128, 32 }},
		{"BQ64-BK16", func(tu *attnTuning) { tu.BQ, tu.BK, tu.BKChunks = 64, 16, 16 }},
		{"BQ32-BK8", func(tu *attnTuning) { tu.BQ, tu.BK = 32, 8 }},
		{"chunk32-slice32-BK8", func(tu *attnTuning) { tu.Chunk4, tu.Slice4, tu.BK, tu.BKChunks = 32, 32, 8, 8 }},
		{"chunk4-slice2-nosplit", func(tu *attnTuning) { tu.Chunk4, tu.Slice4, tu.SplitBelow = 4, 2, 0 }},
	} {
		tu := d
		c.f(&tu)
		be.attnForce = &tu
		t.Run(c.name, func(t *testing.T) { testAttention(t, be) })
	}
	be.attnForce = nil
}

func testAttention(t *testing.T, be *Backend) {
	for _, c := range attnCases() {
		t.Run(c.name, func(t *testing.T) { checkGraph(t, be, c.g, c.args, 1e-4) })
	}
}

// TestAttentionInGraph runs attention among other nodes: q computed by a
// pointwise op and k a reshape (views and chains that fusion handles), the
// result read by a pointwise chain and as a reshape, and the per-node
// timer, which must give the attention kernel's time to the attention
// node.
func TestAttentionInGraph(t *testing.T) {
	be := openTest(t)
	rng := rand.New(rand.NewPCG(5, 5))
	const b, tq, tk, d = 2, 37, 50, 12
	shapes := [][]int{{b, tq, d}, {b * tk * d}, {b, tk, d}, {1, tq, tk}}
	g := &backend.Graph{Nodes: argNodes(shapes), NumArgs: 6}
	add := func(n backend.Node) int { g.Nodes = append(g.Nodes, n); return len(g.Nodes) - 1 }
	q := add(backend.Node{Op: backend.OpAffine, In: []int{0}, Shape: shapes[0], A: 0.5, B: 0.1})
	k := add(backend.Node{Op: backend.OpReshape, In: []int{1}, Shape: []int{b, tk, d}})
	at := add(backend.Node{Op: backend.OpAttention, In: []int{q, k, 2, 3}, Shape: []int{b, tq, d}, A: 0.3})
	y := add(backend.Node{Op: backend.OpReLU, In: []int{add(backend.Node{Op: backend.OpAdd, In: []int{at, q}, Shape: shapes[0]})}, Shape: shapes[0]})
	r := add(backend.Node{Op: backend.OpReshape, In: []int{at}, Shape: []int{b * tq * d}})
	g.Outputs = []backend.Output{{Node: y, Arg: 4}, {Node: r, Arg: 5}}
	args := make([][]float32, 6)
	for i, s := range shapes {
		args[i] = make([]float32, backend.NumElems(s))
		for j := range args[i] {
			args[i][j] = float32(4*rng.Float64() - 2)
		}
	}
	for j := range args[3] {
		args[3][j] = float32(j % 3 % 2) // a third of the keys masked
	}
	args[4] = make([]float32, b*tq*d)
	args[5] = make([]float32, b*tq*d)
	checkGraph(t, be, g, args, 1e-4)

	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		buf, err := be.Alloc(len(a))
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free(buf)
		bufs[i] = buf
	}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	times := backend.NewNodeTimes(len(g.Nodes))
	if _, err := p.(backend.NodeTimer).RunTimed(bufs, times); err != nil {
		t.Fatal(err)
	}
	// (its duration may be 0: an empty pass's time is taken off each
	// kernel's, and on a loaded CPU device the empty pass can take longer)
	if times.How[at] != backend.TimeMeasured || times.Dur[at] < 0 {
		t.Errorf("attention node timed %v (%v), want its kernel's time measured", times.Dur[at], times.How[at])
	}
}
