package webgpu

import (
	"math"
	"testing"

	"github.com/ag-go/ag/backend"
)

// A get_rows of packed words is never fused (plan's TestFuseWordGather: its
// indices come from a reshape, which the planner inlines into any other
// get_rows, a generated kernel moving the words as f32 values), and the
// words, signaling NaNs and subnormals as f32, arrive bit for bit.
func TestWordGatherNotFused(t *testing.T) {
	be := openTest(t)
	words := []uint32{
		0x00003c00, 0x7f803c00, 0xffbfffff, // an f32 subnormal word, signaling NaNs (bf16 +Inf high)
		0x80008000, 0x3c00c000, 0x00000001,
		0x7fc00000, 0xff800001, 0x807f0001,
		0x40490fdb, 0x00008000, 0x7f800000,
	}
	const rows, W, w = 4, 3, 5 // records of 5 bf16 values, padded to 3 words
	tab := make([]float32, len(words))
	for i, x := range words {
		tab[i] = math.Float32frombits(x)
	}
	b := newGB(7)
	tn := b.arg(tab, rows, W)
	ix := b.arg([]float32{3, 0, 2, 3}, 2, 2)
	gather := b.op(backend.OpGetRows, []int{4, W}, tn, b.op(backend.OpReshape, []int{4}, ix))
	b.out(b.op(backend.OpUnpackBF16, []int{4, w}, gather))
	if err := b.g.Validate(); err != nil {
		t.Fatal(err)
	}
	got, _ := runGraph(t, be, &b.g, b.args, 1, true)
	for i, r := range []int{3, 0, 2, 3} {
		want := make([]float32, w)
		backend.UnpackHalves(want, tab[r*W:(r+1)*W], true)
		for c := range w {
			g, e := math.Float32bits(got[2][i*w+c]), math.Float32bits(want[c])
			if g != e && !(g&0x7fffffff > 0x7f800000 && e&0x7fffffff > 0x7f800000) {
				t.Errorf("record %d (row %d) value %d: bits %08x, want %08x", i, r, c, g, e)
			}
		}
	}
}

// A gather of 16-bit records larger than one binding: the table splits
// into ranges of rows (get_rows) and the unpack into ranges of whole
// records whose words and values both start at aligned offsets.
func TestSplitWordRows(t *testing.T) {
	be := openTest(t)
	withBindLimit(t, be, 4096)     // 1024 floats per binding
	const rows, w, n = 500, 7, 200 // 800 words gathered (one binding), 1400 values (two)
	W := backend.PackedLen(w)
	rng := newGB(5).rng
	vals := make([]float32, w)
	tab := make([]float32, rows*W)
	for r := range rows {
		for c := range vals {
			vals[c] = float32(rng.NormFloat64() * 100)
		}
		backend.PackHalves(tab[r*W:(r+1)*W], vals, false)
	}
	idx := make([]float32, n)
	for i := range idx {
		idx[i] = float32(rng.IntN(rows))
	}
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{rows, W}},
		{Op: backend.OpArg, Arg: 1, Shape: []int{n}},
		{Op: backend.OpGetRows, In: []int{0, 1}, Shape: []int{n, W}},
		{Op: backend.OpUnpackF16, In: []int{2}, Shape: []int{n, w}},
	}, Outputs: []backend.Output{{Node: 3, Arg: 2}}}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	unpacks := 0
	for _, s := range p.(*program).steps {
		if s.node == 3 {
			unpacks++
		}
	}
	p.Release()
	if unpacks < 2 {
		t.Fatalf("the unpack of %d x %d values ran as %d dispatch(es), want ranges", n, w, unpacks)
	}
	checkGraph(t, be, g, [][]float32{tab, idx, make([]float32, n*w)}, 0)
}
