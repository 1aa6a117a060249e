package backend

// SampleGraph is a small graph exercising op, with its output in the last
// arg: native backends probe with it which ops a device runs, and the
// conformance suite runs it for every op on every backend (TestEveryOp), so
// that an op missing from any backend's switch fails there. Attributes are
// chosen where every op is defined (positive inputs are the caller's).
func SampleGraph(op Op) *Graph {
	arg := func(a int, shape ...int) Node { return Node{Op: OpArg, Arg: a, Shape: shape} }
	g := &Graph{}
	switch op.Info().Class {
	case ClassLeaf:
		if op == OpArg {
			g.Nodes = []Node{arg(0, 2, 3)}
		} else {
			g.Nodes = []Node{{Op: op, Shape: []int{2, 3}, A: 1.5}}
		}
	case ClassBinary:
		g.Nodes = []Node{arg(0, 2, 1), arg(1, 3), {Op: op, In: []int{0, 1}, Shape: []int{2, 3}}}
	case ClassUnary, ClassRowwise:
		g.Nodes = []Node{arg(0, 2, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}, A: 0.25, B: 2}}
	case ClassReduce:
		g.Nodes = []Node{arg(0, 2, 3, 4), {Op: op, In: []int{0}, Shape: []int{2, 1, 4}, Axis: 1}}
	case ClassMovement:
		switch op {
		case OpReshape:
			g.Nodes = []Node{arg(0, 2, 3), {Op: op, In: []int{0}, Shape: []int{3, 2}}}
		case OpPermute:
			g.Nodes = []Node{arg(0, 2, 3, 4), {Op: op, In: []int{0}, Shape: []int{4, 2, 3}, Perm: []int{2, 0, 1}}}
		case OpExpand:
			g.Nodes = []Node{arg(0, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}}}
		case OpSliceRows:
			g.Nodes = []Node{arg(0, 4, 3), {Op: op, In: []int{0}, Shape: []int{2, 3}, Start: 1}}
		case OpConcatRows:
			g.Nodes = []Node{arg(0, 2, 3), arg(1, 1, 3), {Op: op, In: []int{0, 1}, Shape: []int{3, 3}}}
		default:
			Unknown("backend.SampleGraph", op)
		}
	case ClassIndex:
		switch op {
		case OpGetRows:
			g.Nodes = []Node{arg(0, 4, 3), arg(1, 2), {Op: op, In: []int{0, 1}, Shape: []int{2, 3}}}
		case OpScatterAddRows:
			g.Nodes = []Node{arg(0, 2, 3), arg(1, 2), {Op: op, In: []int{0, 1}, Shape: []int{4, 3}}}
		case OpOneHot:
			g.Nodes = []Node{arg(0, 2), {Op: op, In: []int{0}, Shape: []int{2, 5}}}
		default:
			Unknown("backend.SampleGraph", op)
		}
	case ClassMatMul:
		g.Nodes = []Node{arg(0, 2, 3), arg(1, 3, 4), {Op: op, In: []int{0, 1}, Shape: []int{2, 4}}}
	case ClassAttention:
		g.Nodes = []Node{arg(0, 2, 3, 4), arg(1, 2, 5, 4), arg(2, 2, 5, 3), arg(3, 1, 3, 5),
			{Op: op, In: []int{0, 1, 2, 3}, Shape: []int{2, 3, 3}, A: 0.5}}
	case ClassUpdate:
		ins := make([]int, op.Info().Inputs)
		for k := range ins {
			ins[k] = k
			g.Nodes = append(g.Nodes, arg(k, 2, 3))
		}
		hp := map[Op]int{OpAdamW: 7, OpSGD: 3}[op]
		g.Nodes[len(ins)-1] = arg(len(ins)-1, hp)
		g.Nodes = append(g.Nodes, Node{Op: op, In: ins, Shape: []int{2, 3}})
	case ClassRandom:
		g.Nodes = []Node{arg(0, RandStateLen), {Op: op, In: []int{0}, Shape: []int{2, 3}, Start: 3}}
	case ClassPack:
		switch op {
		case OpPackF16, OpPackBF16: // odd: the last word's high half is padding
			g.Nodes = []Node{arg(0, 5), {Op: op, In: []int{0}, Shape: []int{3}}}
		case OpUnpackF16, OpUnpackBF16:
			g.Nodes = []Node{arg(0, 3), {Op: op, In: []int{0}, Shape: []int{5}}}
		default:
			Unknown("backend.SampleGraph", op)
		}
	case ClassComposite:
		args, n := CompositeOf(op).Sample()
		g.Nodes = nil
		for k, s := range args {
			g.Nodes = append(g.Nodes, arg(k, s...))
		}
		n.Op = op // n.In names args 0..len(args)-1: nodes 0.. here
		g.Nodes = append(g.Nodes, n)
	default:
		Unknown("backend.SampleGraph", op)
	}
	g.NumArgs = 5
	g.Outputs = []Output{{Node: len(g.Nodes) - 1, Arg: 4}}
	if op.InPlace() {
		g.NumArgs = 6
		g.Outputs[0].Arg = 5
	}
	return g
}
