package core

import (
	"fmt"

	"github.com/ag-go/ag/backend"
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
