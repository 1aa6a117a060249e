package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// SetActivationStorage sets how values that a run's forward computes and
// its backward reads later (the activations a layer saves for its
// gradient) are held in between, for the runs lowered from now on, and
// returns the previous setting. PrecisionF32 (the default) keeps them as
// they are. PrecisionF16 and PrecisionBF16 store each such value in 16 bits
// (backend.OpPackF16) right after the forward computes it, so the f32 copy
// is freed once the forward is done with it, and the backward reads the
// value back (OpUnpackF16) where it first needs it: the activations take
// half the memory, the forward's own arithmetic is unchanged, and the
// backward computes with the values rounded as f16 or bf16 (autocast's f16
// activations round the same way). Parameters (the f32 master weights),
// inputs, gradients and optimizer state stay f32, so do index operands
// (they would not be exact in 16 bits), random draws and values smaller
// than MinHalfStoreElems. With SetMatMulPrecision(PrecisionF16) too, a
// parameter's f16 working copy (the RoundF16 its forward product reads and
// the backward's product reads again) is such a value: it is held in 16
// bits between the passes, apex's "f16 model weights, f32 master weights"
// without a second persistent copy.
//
// f16 holds magnitudes up to 65504: a larger activation is stored as an
// infinity, so the gradients that read it become Inf or NaN (and
// nn.GradScaler skips the step) while the loss stays finite; bf16 has
// f32's range and 8 significant bits instead of 11.
//
// A Checkpoint segment is recomputed in the backward from its inputs as
// they were stored, so its recomputed values carry that rounding too.
//
// Only a forward and backward in one run share activations this way (the
// usual step: forward, Backward, optimizer update, then a read). Values
// kept across runs for a later Backward stay f32. A recorded Capture keeps
// the setting it was recorded with. A device that cannot convert the
// format back (bf16 on ggml-vulkan: unpack_bf16 is in its
// Caps.Unsupported) returns an error wrapping ErrUnsupported and keeps its
// setting.
func (d *Device) SetActivationStorage(p Precision) (prev Precision, err error) {
	if p < PrecisionF32 || p > PrecisionBF16 {
		return 0, fmt.Errorf("core.Device.SetActivationStorage: unknown precision %d", int(p))
	}
	d.lock()
	defer d.mu.Unlock()
	if op := unpackOp(p); op != backend.OpInvalid && !d.caps.Supports(op) {
		return d.store, unsupportedf("core.Device.SetActivationStorage(%v): %s cannot read %v values back (%v is in its Caps.Unsupported)", p, d.caps.Name, p, op)
	}
	prev, d.store = d.store, p
	return prev, nil
}

// MinHalfStoreElems is the smallest value SetActivationStorage stores in
// 16 bits: below it the saved memory does not pay for two more kernels.
const MinHalfStoreElems = 4096

func packOp(p Precision) backend.Op {
	switch p {
	case PrecisionF32:
		return backend.OpInvalid
	case PrecisionF16:
		return backend.OpPackF16
	case PrecisionBF16:
		return backend.OpPackBF16
	}
	panic(fmt.Sprintf("core: unknown precision %d", int(p)))
}

func unpackOp(p Precision) backend.Op {
	switch packOp(p) {
	case backend.OpPackF16:
		return backend.OpUnpackF16
	case backend.OpPackBF16:
		return backend.OpUnpackBF16
	}
	return backend.OpInvalid
}

// halfNode is a node storeHalf added: its new index, and the old node it
// serves (a pack: the value it stores; an unpack: its first reader).
type halfNode struct {
	node, from int
	op         backend.Op
}

// storeHalf rewrites g for SetActivationStorage(p): each value a forward
// node computes (pass[i] == PassForward) that a backward node reads
// (PassBackward) gets a pack right after it and an unpack right before its
// first backward reader, which all its backward readers then read instead.
// Outputs, args, views, random draws, small values and values any node
// reads as indices are left alone. It returns where each old node went
// (old index -> new) and the nodes it added.
func storeHalf(g *backend.Graph, pass []profile.Pass, p Precision) (remap []int, added []halfNode) {
	pack, unpack := packOp(p), unpackOp(p)
	n := len(g.Nodes)
	remap = make([]int, n)
	if pack == backend.OpInvalid {
		for i := range remap {
			remap[i] = i
		}
		return remap, nil
	}
	stored := make([]bool, n)
	out := make([]bool, n)
	for _, o := range g.Outputs {
		out[o.Node] = true
	}
	words := g.WordGathers() // a table's words: stored already, and opaque
	for i := range g.Nodes {
		stored[i] = pass[i] == profile.PassForward && !out[i] && !words[i] && storable(&g.Nodes[i])
	}
	backRead := make([]bool, n)
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		for k, j := range nd.In {
			if isIndexOperand(nd.Op, k) {
				stored[j] = false
			}
			if pass[i] == profile.PassBackward {
				backRead[j] = true
			}
		}
	}
	for i := range stored {
		stored[i] = stored[i] && backRead[i]
	}
	nodes := make([]backend.Node, 0, n+8)
	packed := make([]int, n)   // new index of node i's pack, -1: none
	unpacked := make([]int, n) // new index of node i's unpack, -1: not yet
	for i := range packed {
		packed[i], unpacked[i] = -1, -1
	}
	for i := range g.Nodes {
		nd := g.Nodes[i]
		in := make([]int, len(nd.In))
		for k, j := range nd.In {
			in[k] = remap[j]
			if stored[j] && pass[i] == profile.PassBackward {
				if unpacked[j] < 0 {
					unpacked[j] = len(nodes)
					added = append(added, halfNode{len(nodes), i, unpack})
					nodes = append(nodes, backend.Node{Op: unpack, In: []int{packed[j]}, Shape: g.Nodes[j].Shape})
				}
				in[k] = unpacked[j]
			}
		}
		nd.In = in
		remap[i] = len(nodes)
		nodes = append(nodes, nd)
		if stored[i] {
			packed[i] = len(nodes)
			added = append(added, halfNode{len(nodes), i, pack})
			nodes = append(nodes, backend.Node{Op: pack, In: []int{remap[i]}, Shape: []int{backend.PackedLen(backend.NumElems(nd.Shape))}})
		}
	}
	g.Nodes = nodes
	for k := range g.Outputs {
		g.Outputs[k].Node = remap[g.Outputs[k].Node]
	}
	return remap, added
}

// storable reports whether a node's value may be stored in 16 bits: a
// computed value (not an arg, fill, view, random draw, in-place update or
// pack) of at least MinHalfStoreElems elements.
func storable(n *backend.Node) bool {
	if backend.NumElems(n.Shape) < MinHalfStoreElems {
		return false
	}
	switch n.Op.Info().Class {
	case backend.ClassLeaf, backend.ClassMovement, backend.ClassRandom, backend.ClassUpdate, backend.ClassPack:
		return false
	case backend.ClassUnary, backend.ClassBinary, backend.ClassReduce, backend.ClassRowwise,
		backend.ClassIndex, backend.ClassMatMul, backend.ClassAttention, backend.ClassComposite:
		return true
	}
	backend.Unknown("core.storable", n.Op)
	return false
}

// isIndexOperand reports whether input k of op is read as indices (or as
// the mask of an attention), which 16 bits would not hold exactly.
func isIndexOperand(op backend.Op, k int) bool {
	switch op {
	case backend.OpGetRows, backend.OpScatterAddRows:
		return k == 1
	case backend.OpOneHot:
		return k == 0
	case backend.OpAttention:
		return k == 3
	}
	if op.IsComposite() {
		return slices.Contains(backend.CompositeOf(op).Index, k) // labels
	}
	return false
}
