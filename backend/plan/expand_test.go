package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
)

// TestExpand: an undeclared composite becomes its primitives, wired to
// the composite's inputs and readers, its output moved to the node that
// holds its value, and origin naming the composite for each primitive; a
// declared one stays; Make refuses a composite the backend did not declare.
func TestExpand(t *testing.T) {
	s := []int{3, 5}
	b := &builder{}
	x := b.arg(s...)
	ln := b.node(backend.Node{Op: backend.OpLayerNorm, In: []int{x}, Shape: s, A: 1e-5})
	y := b.op(backend.OpNeg, s, ln)
	b.out(y)
	b.out(ln)
	g := &b.g

	if _, err := Make(g, Options{}); err == nil || !strings.Contains(err.Error(), "layer_norm") {
		t.Errorf("Make of an undeclared composite: %v, want an error naming it", err)
	}
	native := backend.Caps{Composites: []backend.Op{backend.OpLayerNorm}}
	if same, origin := Expand(g, native); same != g || origin != nil {
		t.Errorf("Expand with the composite native: a new graph (origin %v), want g itself", origin)
	}
	if _, err := Make(g, Options{Composites: native.Composites}); err != nil {
		t.Errorf("Make of a declared composite: %v", err)
	}

	xg, origin := Expand(g, backend.Caps{})
	if err := xg.Validate(); err != nil {
		t.Fatalf("expanded graph: %v\n%s", err, xg)
	}
	if len(origin) != len(xg.Nodes) || len(xg.Nodes) <= len(g.Nodes) {
		t.Fatalf("expanded to %d nodes, origin %v", len(xg.Nodes), origin)
	}
	for i, n := range xg.Nodes {
		if n.Op.IsComposite() {
			t.Errorf("node %d is still %v", i, n.Op)
		}
		if want := origin[i]; (want == ln) != (i > 0 && i < len(xg.Nodes)-1) {
			t.Errorf("node %d (%v) has origin %d", i, n.Op, want)
		}
	}
	last := len(xg.Nodes) - 1
	if xg.Nodes[last].Op != backend.OpNeg || origin[last] != y || xg.Outputs[0].Node != last {
		t.Errorf("the reader of the composite: %v, outputs %v\n%s", xg.Nodes[last], xg.Outputs, xg)
	}
	if o := xg.Outputs[1].Node; origin[o] != ln || xg.Nodes[last].In[0] != o {
		t.Errorf("the composite's output is node %d, the reader reads %v\n%s", o, xg.Nodes[last].In, xg)
	}
	if g.Nodes[y].In[0] != ln || len(g.Nodes) != 3 {
		t.Errorf("Expand changed its input graph:\n%s", g)
	}

	// Times fold back: a composite's are its primitives' together.
	xt := backend.NewNodeTimes(len(xg.Nodes))
	for i := range xt.Dur {
		xt.Dur[i], xt.How[i] = time.Duration(i+1), backend.TimeMeasured
	}
	into := backend.NewNodeTimes(len(g.Nodes))
	FoldTimes(into, xt, origin)
	var want time.Duration
	for i, o := range origin {
		if o == ln {
			want += time.Duration(i + 1)
		}
	}
	if into.Dur[ln] != want || into.Dur[y] != time.Duration(last+1) || slices.Contains(into.How, backend.TimeNone) {
		t.Errorf("folded times %v (%v), want %v at the composite", into.Dur, into.How, want)
	}
}

// TestExpandKeepsRefusedComposite: a composite its Check refuses (a
// cross_entropy of more than MaxClasses classes) stays whole, so that
// Validate names it and not the one_hot of its decomposition.
func TestExpandKeepsRefusedComposite(t *testing.T) {
	b := &builder{}
	x := b.arg(2, backend.MaxClasses+1)
	lab := b.arg(2)
	ce := b.op(backend.OpCrossEntropy, []int{}, x, lab)
	b.out(ce)
	xg, _ := Expand(&b.g, backend.Caps{})
	err := xg.Validate()
	if err == nil || !strings.Contains(err.Error(), "cross_entropy") || !strings.Contains(err.Error(), "16777217 classes") {
		t.Errorf("Validate of the expanded graph: %v, want cross_entropy's refusal of 16777217 classes\n%s", err, xg)
	}
}
