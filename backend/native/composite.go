//go:build ggml

package native

import (
	"slices"

	"github.com/ag-go/ag/backend"
)

// nativeLowering is how this backend runs one composite op of the IR
// natively, with ggml's fused kernels: each composite's lowering lives in a
// file of its own (composite_*.go) and registers here; Caps.Composites
// lists them (less those a device's probe refuses), and plan.Expand
// decomposes every other composite before Compile.
type nativeLowering struct {
	// tensors, plus perInput for each input, bounds the ggml tensors lower
	// creates (see tensorsFor).
	tensors, perInput int
	// sized, where set, is the bound for a node instead (a lowering whose
	// tensors grow with an attribute: col2im's kernel offsets).
	sized func(n *backend.Node) int
	lower func(l *lowering, n *backend.Node) tensor
}

// nativeComposites are the composites lowered natively, by op.
var nativeComposites = map[backend.Op]nativeLowering{}

// lowerComposite registers the native lowering of op.
func lowerComposite(op backend.Op, tensors int, lower func(l *lowering, n *backend.Node) tensor) bool {
	backend.CompositeOf(op) // panics on an op that is not one
	nativeComposites[op] = nativeLowering{tensors: tensors, lower: lower}
	return true
}

// lowerVariadic registers the native lowering of op, whose tensors grow
// with its input count.
func lowerVariadic(op backend.Op, tensors, perInput int, lower func(l *lowering, n *backend.Node) tensor) bool {
	lowerComposite(op, tensors, lower)
	c := nativeComposites[op]
	c.perInput = perInput
	nativeComposites[op] = c
	return true
}

// lowerSized registers the native lowering of op, whose tensors for node n
// are at most sized(n).
func lowerSized(op backend.Op, sized func(n *backend.Node) int, lower func(l *lowering, n *backend.Node) tensor) bool {
	lowerComposite(op, 0, lower)
	c := nativeComposites[op]
	c.sized = sized
	nativeComposites[op] = c
	return true
}

// nativeOps lists the composites lowered natively, in op order.
func nativeOps() []backend.Op {
	ops := make([]backend.Op, 0, len(nativeComposites))
	for op := range nativeComposites {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}
