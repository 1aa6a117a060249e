package plan

import (
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// builder makes small graphs for the planner's tests.
type builder struct{ g backend.Graph }

func (b *builder) node(n backend.Node) int {
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1
}
func (b *builder) arg(shape ...int) int {
	b.g.NumArgs++
	return b.node(backend.Node{Op: backend.OpArg, Arg: b.g.NumArgs - 1, Shape: shape})
}
func (b *builder) op(op backend.Op, shape []int, in ...int) int {
	return b.node(backend.Node{Op: op, In: in, Shape: shape})
}
func (b *builder) out(node int) {
	b.g.Outputs = append(b.g.Outputs, backend.Output{Node: node, Arg: b.g.NumArgs})
	b.g.NumArgs++
}

// decisionsGraph reads arg 0 after writing an output into it, views a value
// twice, computes one output in place and leaves a dead node.
func decisionsGraph() (b *builder, y, z, rs, sl, w int) {
	s := []int{4, 6}
	b = &builder{}
	x := b.arg(s...)                                                                               // node 0, arg 0
	y = b.op(backend.OpNeg, s, x)                                                                  // 1
	b.g.Outputs = append(b.g.Outputs, backend.Output{Node: y, Arg: 0})                             // arg 0 read later
	z = b.op(backend.OpExp, s, x)                                                                  // 2
	rs = b.op(backend.OpReshape, []int{24}, z)                                                     // 3: view
	sl = b.node(backend.Node{Op: backend.OpSliceRows, In: []int{z}, Shape: []int{2, 6}, Start: 1}) // 4: view (cpu)
	w = b.op(backend.OpAdd, s, z, y)                                                               // 5
	b.out(w)                                                                                       // direct
	b.out(b.op(backend.OpNeg, []int{24}, rs))                                                      // 6
	b.out(b.op(backend.OpNeg, []int{2, 6}, sl))                                                    // 7
	b.op(backend.OpExp, s, w)                                                                      // 8: dead
	return
}

// TestDecisions checks the plan's choices directly (the backends' suites
// check that the programs they build from it compute the right values).
func TestDecisions(t *testing.T) {
	b, y, z, rs, sl, w := decisionsGraph()
	pl, err := Make(&b.g, Options{SliceViews: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.AtEnd) != 1 || pl.AtEnd[0] != (Copy{Node: y, Arg: 0}) {
		t.Errorf("the output of node 1 into arg 0 (read by node 2) is copied at the end; AtEnd = %v", pl.AtEnd)
	}
	if pl.Loc[y].Kind != Slot {
		t.Errorf("node 1 lives in a slot: %+v", pl.Loc[y])
	}
	if l := pl.Loc[w]; l.Kind != Arg || l.Idx != 1 {
		t.Errorf("node 5 is computed straight into arg 1: %+v", l)
	}
	if !pl.View[rs] || !pl.View[sl] || pl.Loc[rs] != pl.Loc[z] || pl.Loc[sl].Off != pl.Loc[z].Off+6 {
		t.Errorf("reshape and slice of node 2 are views: %v %v, locs %+v %+v %+v", pl.View[rs], pl.View[sl], pl.Loc[z], pl.Loc[rs], pl.Loc[sl])
	}
	// y lives to the end and z until node 7: they never share a slot.
	if pl.Loc[y] == pl.Loc[z] {
		t.Errorf("nodes 1 and 2 share %+v", pl.Loc[y])
	}
	if pl.Needed[8] {
		t.Error("dead node 8 is planned")
	}
	if pl.ArgNeed[0] != 24 || pl.ArgNeed[1] != 24 {
		t.Errorf("ArgNeed %v", pl.ArgNeed)
	}
	// Without slice views (WebGPU) the slice is computed, and copies wait
	// for the end.
	pl, err = Make(&b.g, Options{CopiesAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	if pl.View[sl] || pl.Loc[sl].Kind != Slot || !pl.View[rs] {
		t.Errorf("without SliceViews: slice view %v loc %+v, reshape view %v", pl.View[sl], pl.Loc[sl], pl.View[rs])
	}
	for i := range pl.After {
		if len(pl.After[i]) > 0 {
			t.Errorf("CopiesAtEnd, but node %d copies after itself", i)
		}
	}
}

// A view of an arg that an update writes later would see the new value.
func TestNoViewOfWrittenArg(t *testing.T) {
	b := &builder{}
	w := b.arg(6)
	g := b.arg(6)
	m := b.arg(6)
	v := b.arg(6)
	hp := b.arg(7)
	r := b.op(backend.OpReshape, []int{2, 3}, w)
	b.op(backend.OpAdamW, []int{6}, w, g, m, v, hp)
	y := b.op(backend.OpNeg, []int{2, 3}, r)
	b.out(y)
	pl, err := Make(&b.g, Options{SliceViews: true})
	if err != nil {
		t.Fatal(err)
	}
	if pl.View[r] || pl.Loc[r].Kind != Slot {
		t.Errorf("reshape of an updated arg is a view: %+v", pl.Loc[r])
	}
	if !pl.View[6] || pl.Loc[6] != (Loc{Kind: Arg, Idx: w}) {
		t.Errorf("the update lives in its arg: %+v", pl.Loc[6])
	}
}

// Inlined nodes have no storage and their kernel's reads keep the leaves.
func TestInlineAndReads(t *testing.T) {
	b := &builder{}
	x := b.arg(8)
	e := b.op(backend.OpExp, []int{8}, x) // inlined into n
	n := b.op(backend.OpNeg, []int{8}, e)
	b.out(n)
	inl := make([]bool, len(b.g.Nodes))
	inl[e] = true
	pl, err := Make(&b.g, Options{Inline: inl, Reads: func(i int) []int {
		if i == n {
			return []int{x}
		}
		return b.g.Nodes[i].In
	}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Loc[e].Kind != None || len(pl.Slots) != 0 || pl.Loc[n].Kind != Arg {
		t.Errorf("inline: %+v %+v slots %v", pl.Loc[e], pl.Loc[n], pl.Slots)
	}
}

// Limits fail the plan, naming the sizes.
func TestLimits(t *testing.T) {
	b := &builder{}
	x := b.arg(1000)
	y := b.op(backend.OpExp, []int{1000}, x)
	b.out(b.op(backend.OpNeg, []int{1000}, y))
	for _, c := range []struct {
		lim  Limits
		want string
	}{
		{Limits{MaxIndexElems: 999}, "1000 elements, more than the 999"},
		{Limits{MaxStoreElems: 999}, "largest buffer"},
		{Limits{FreeBytes: 100}, "4000 bytes at their peak, more than the 100 bytes free"},
	} {
		_, err := Make(&b.g, Options{Limits: c.lim})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.lim, err, c.want)
		}
	}
	if _, err := Make(&b.g, Options{Limits: Limits{MaxIndexElems: 1000, MaxStoreElems: 1000, FreeBytes: 4000}}); err != nil {
		t.Errorf("within limits: %v", err)
	}
}

// TestUnsupported: Make refuses an op the device states it cannot run
// (Caps.Unsupported), naming the device, and plans the graph without it.
func TestUnsupported(t *testing.T) {
	b, _, _, _, _, _ := decisionsGraph()
	_, err := Make(&b.g, Options{Unsupported: []backend.Op{backend.OpExp}, Device: "dev0"})
	if err == nil || !strings.Contains(err.Error(), "exp is not supported on dev0") {
		t.Errorf("Make with exp unsupported: %v, want an error naming exp and dev0", err)
	}
	if _, err := Make(&b.g, Options{Unsupported: []backend.Op{backend.OpAttention}}); err != nil {
		t.Errorf("Make without attention in the graph: %v", err)
	}
}
