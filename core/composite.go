package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core/internal/goid"
)

// A composite op of the IR (backend.Composite) is declared in backend with
// its decomposition; core adds, in a file of its own (composite_*.go), its
// function for users and its gradient, registered here.
type composite struct {
	// grad is the gradient for input k of node n (inputs in) given the
	// output's gradient g, recorded in ops of the IR; nil when none flows
	// to that input.
	grad func(n *Tensor, in []*Tensor, g *Tensor, k int) *Tensor
	// labels, when set, names the input holding class indices and their
	// class count, checked on the host before a sync (checkLabels).
	labels func(t *Tensor) (idx *Tensor, classes int)
}

// composites are core's half of the composite ops.
var composites = map[backend.Op]*composite{}

// defineComposite registers core's half of op.
func defineComposite(op backend.Op, c composite) bool {
	backend.CompositeOf(op) // panics on an op that is not one
	composites[op] = &c
	return true
}

// compositeOf returns core's half of op; it panics on a composite core
// does not know (one declared in backend with no gradient here).
func compositeOf(op backend.Op) *composite {
	c := composites[op]
	if c == nil {
		panic(fmt.Sprintf("core: composite %v has no gradient in core (core/composite_*.go)", op))
	}
	return c
}

// noGrad is the gradient of an op that only Backward records (with
// gradients off): asking for it is a bug.
func noGrad(n *Tensor, _ []*Tensor, _ *Tensor, _ int) *Tensor {
	panic(fmt.Sprintf("core: the gradient of %v is not implemented", n.op))
}

// creatingGraph reports whether the calling goroutine is inside a Grad
// with CreateGraph.
func (d *Device) creatingGraph() bool {
	d.lock()
	defer d.mu.Unlock()
	m := d.modeOf(goid.Get())
	return m != nil && m.createGraph
}

// decomposed records composite op over ins as the primitive nodes of its
// decomposition (backend.Decompose), each a core node with its own
// gradient: the value is the one the backends that do not lower op
// natively compute.
func (d *Device) decomposed(fn string, op backend.Op, shape []int, attr attrs, ins ...*Tensor) *Tensor {
	n := attr.node()
	n.Op, n.Shape = op, shape
	vals := slices.Clone(ins)
	idx := make([]int, len(ins))
	shapes := make([][]int, len(ins))
	for k, in := range ins {
		idx[k], shapes[k] = k, in.shape
	}
	out := backend.Decompose(&n, idx, shapes, func(p backend.Node) int {
		pin := make([]*Tensor, len(p.In))
		for k, i := range p.In {
			pin[k] = vals[i]
		}
		a := attrs{A: p.A, B: p.B, Axis: int32(p.Axis), Start: p.Start, Perm: p.Perm, TransA: p.TransA, TransB: p.TransB}
		vals = append(vals, d.push(&Tensor{op: p.Op, attr: a}, p.Shape, fn, true, pin...))
		return len(vals) - 1
	})
	return vals[out]
}
