package backend

import "slices"

// NodeCost is a node's relative cost for splitting the time of a kernel or
// run among nodes that were not timed one by one: the roofline of a device
// doing 10 flops per byte moved, max(flops, 10 x bytes), where bytes are
// the node's inputs and output and flops its arithmetic (2MNK for a
// product, a few per element for transcendental functions). A rule stated
// once, so that every "split" and "estimated" time in a profile means the
// same thing. Nodes that run no kernel (args, views) cost 0.
func NodeCost(g *Graph, i int) float64 { return nodeCost(g, i, nil) }

// nodeCost is NodeCost of node i inside a kernel that computes the nodes
// of inKernel: a value passed between two of them stays in registers, so
// it is neither read nor written by either (nil: a kernel of its own).
func nodeCost(g *Graph, i int, inKernel map[int]bool) float64 {
	n := &g.Nodes[i]
	out := float64(NumElems(n.Shape))
	bytes := 4 * out
	if inKernel != nil && readsIn(g, i, inKernel) {
		bytes = 0 // its consumer in the kernel takes it from registers
	}
	for _, j := range n.In {
		if !inKernel[j] {
			bytes += 4 * float64(NumElems(g.Nodes[j].Shape))
		}
	}
	var flops float64
	switch n.Op.Info().Class {
	case ClassLeaf:
		if n.Op == OpArg {
			return 0
		}
		bytes = 4 * out
	case ClassMovement:
		if n.Op == OpReshape {
			return 0
		}
	case ClassUnary, ClassBinary:
		flops = max(n.Op.Info().Flops, 1) * out
	case ClassIndex:
		flops = out
	case ClassReduce:
		flops = float64(NumElems(g.Nodes[n.In[0]].Shape))
	case ClassRowwise:
		flops = 12 * out
	case ClassMatMul:
		a := g.Nodes[n.In[0]].Shape
		k := a[len(a)-1]
		if n.TransA {
			k = a[len(a)-2]
		}
		flops = 2 * out * float64(k)
	case ClassAttention:
		// Two products of Tq x Tk per batch and head (scores, then the sum
		// over values) and a softmax of the scores; the scores stay inside.
		q, k := g.Nodes[n.In[0]].Shape, g.Nodes[n.In[1]].Shape
		r := len(q)
		rows := float64(NumElems(q[:r-1]))
		tk := float64(k[r-2])
		dv := out / rows
		flops = rows * tk * (2*float64(q[r-1]) + 2*dv + 12)
	case ClassUpdate:
		flops = 12 * out
	case ClassPack:
		flops = 2 * float64(NumElems(g.Nodes[n.In[0]].Shape)) // a value's rounding is a few integer ops
	case ClassComposite:
		c := composites[n.Op]
		flops = c.Flops * out
		if c.FlopsOf != nil {
			flops = c.FlopsOf(n, func(k int) []int { return g.Nodes[n.In[k]].Shape })
		}
	case ClassRandom:
		bytes = 4 * out
		flops = 20 * out // a Philox block (10 rounds of 2 products) per 4 values
	default:
		Unknown("backend.NodeCost", n.Op)
	}
	return max(flops, 10*bytes)
}

// readsIn reports whether a node of the kernel reads node i.
func readsIn(g *Graph, i int, inKernel map[int]bool) bool {
	for j := range inKernel {
		if j != i && slices.Contains(g.Nodes[j].In, i) {
			return true
		}
	}
	return false
}

// CostShares returns the fractions of a kernel's time that the nodes it
// computes (members) get by NodeCost, counting only the bytes that kernel
// moves: a member read by another member hands its value over in
// registers (a product's ReLU epilogue reads and writes nothing but the
// product's result, once). Equal shares when none costs anything.
func CostShares(g *Graph, members []int) []float64 {
	in := make(map[int]bool, len(members))
	for _, j := range members {
		in[j] = true
	}
	var total float64
	sh := make([]float64, len(members))
	for k, j := range members {
		sh[k] = nodeCost(g, j, in)
		total += sh[k]
	}
	for k := range sh {
		if total == 0 {
			sh[k] = 1 / float64(len(sh))
		} else {
			sh[k] /= total
		}
	}
	return sh
}
