package core

import (
	"fmt"
	"io"
	"strings"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// StepGraph is a step's graph as the device would run it, for people
// (ggmlR's .ag_graph_dump): every node with its op, shape and inputs, the
// op and layer of yours that recorded it, the composite it was decomposed
// from or whether the device runs it as one native kernel, the kernel it
// runs in (a backend that fuses, as webgpu, runs a chain of nodes in one),
// where its value lives, and the live intermediate memory after it, whose
// peak is where the step's memory peaks. Device.GraphOf makes one;
// WriteText and WriteDOT print it.
type StepGraph struct {
	// Device is the device's name (Caps.Name).
	Device string
	// Nodes are the graph's nodes in execution order (inputs first).
	Nodes []GraphNode
	// Kernels is the number of kernels (dispatches) that run the nodes.
	Kernels int
	// Memory is the step's estimate (Device.EstimateMemory's).
	Memory MemoryEstimate
	// PeakNode is the node after which the live intermediates are largest
	// (-1 when none are stored), PeakBytes their size there: unfused, an
	// upper bound where a backend fuses.
	PeakNode  int
	PeakBytes uint64
}

// GraphNode is one node of a StepGraph.
type GraphNode struct {
	Op    string // the IR op (backend.Op's name)
	Attrs string // its attributes ("axis=1", a window), "" if none
	Shape []int
	In    []int // the nodes it reads
	// Recorded is the public op that recorded it (core.MatMul's
	// "MatMul", a layer's composite), Layer the Device.Scope it was
	// recorded in; both "" for a value the step only reads.
	Recorded, Layer string
	// Pass is "forward", "backward" or "update".
	Pass string
	// Composite is the composite op (backend.OpSoftmaxCE, ...) this node is
	// a primitive of, where the device decomposes it; Native marks a
	// composite the device runs as one kernel of its own.
	Composite string
	Native    bool
	// Kernel numbers the kernel that computes it, from 0 in run order;
	// -1 where none does (an input, a view of another value, a node no
	// output needs).
	Kernel int
	// Store is where its value lives: "input", "slot k" (an intermediate
	// buffer), "view", "fused" (inside its reader's kernel) or "-".
	Store string
	// LiveBytes are the intermediates live after it (unfused).
	LiveBytes uint64
}

// fuser is a backend whose kernels compute more than one node: its fusion
// plan of a graph (webgpu).
type fuser interface {
	Fusion(g *backend.Graph) *plan.Fusion
}

// GraphOf records what step records, as EstimateMemory does, and instead of
// running it returns its graph as this device would run it (see
// StepGraph); the recorded values are then dropped (reading one is an
// error). The same caveats as EstimateMemory's apply to an optimizer's
// state and step count.
func (d *Device) GraphOf(step func() error) (*StepGraph, error) {
	var out *StepGraph
	err := d.recordedStep("GraphOf", step, func(s *stepGraph) error {
		out = &StepGraph{Device: d.caps.Name, Memory: s.est, PeakNode: -1}
		if len(s.g.Nodes) == 0 {
			return nil
		}
		pl, err := plan.Make(s.xg, plan.Options{Composites: d.caps.Composites})
		if err != nil {
			return err
		}
		out.Memory.Intermediates = pl.SlotBytes
		out.describe(s, pl, d.be)
		return nil
	})
	return out, err
}

// describe fills g's nodes from the recorded step s and its plan pl.
func (g *StepGraph) describe(s *stepGraph, pl *plan.Plan, be backend.Backend) {
	xg := s.xg
	var fp *plan.Fusion
	if f, ok := be.(fuser); ok {
		if fp = f.Fusion(xg); len(fp.Graph.Nodes) != len(xg.Nodes) {
			fp = nil // a rewrite that changed the node count: kernels unknown
		}
	}
	// the last node reading each value, for its liveness
	last := make([]int, len(xg.Nodes))
	for i := range xg.Nodes {
		last[i] = i
		for _, j := range xg.Nodes[i].In {
			last[j] = i
		}
	}
	for _, o := range xg.Outputs {
		last[o.Node] = len(xg.Nodes) - 1
	}
	ends := make([]uint64, len(xg.Nodes)) // bytes freed after node i
	var live uint64
	g.Nodes = make([]GraphNode, len(xg.Nodes))
	kernelOf := make([]int, len(xg.Nodes))
	for i := range kernelOf {
		kernelOf[i] = -1
	}
	for i := range xg.Nodes {
		n := &xg.Nodes[i]
		orig := i
		if s.origin != nil {
			orig = s.origin[i]
		}
		gn := GraphNode{Op: n.Op.String(), Attrs: n.AttrText(), Shape: n.Shape, In: n.In, Kernel: -1}
		if on := s.g.Nodes[orig].Op; on != n.Op && on.IsComposite() {
			gn.Composite = on.String()
		}
		gn.Native = n.Op.IsComposite()
		if t := s.src[orig]; t != nil {
			gn.Pass = t.pass.String()
			if n.Op != backend.OpArg {
				gn.Recorded, gn.Layer = t.user, t.scope
			}
		}
		stored := false
		switch l := pl.Loc[i]; {
		case n.Op == backend.OpArg:
			gn.Store = "input"
		case !pl.Needed[i]:
			gn.Store = "-"
		case pl.View[i]:
			gn.Store = "view"
		case fp != nil && fp.Inline[i]:
			gn.Store = "fused"
		case l.Kind == plan.Slot:
			gn.Store, stored = fmt.Sprintf("slot %d", l.Idx), true
		case l.Kind == plan.Arg:
			gn.Store = "output"
		default:
			gn.Store = "-"
		}
		if n.Op != backend.OpArg && pl.Needed[i] && kernelOf[i] < 0 {
			switch {
			case fp == nil:
				if !pl.View[i] {
					kernelOf[i] = g.Kernels
					g.Kernels++
				}
			case !fp.Inline[i] && !fp.Deferred[i]:
				// a view computes nothing, unless nodes are inlined into
				// it (a reshape whose kernel runs the sum it reads)
				if ms := fp.Computes(i); len(ms) > 1 || !pl.View[i] {
					for _, m := range ms {
						kernelOf[m] = g.Kernels
					}
					g.Kernels++
				}
			}
		}
		if stored {
			b := 4 * uint64(backend.NumElems(n.Shape))
			live += b
			ends[last[i]] += b
		}
		gn.LiveBytes = live
		if live > g.PeakBytes {
			g.PeakNode, g.PeakBytes = i, live
		}
		live -= ends[i]
		g.Nodes[i] = gn
	}
	for i := range g.Nodes {
		g.Nodes[i].Kernel = kernelOf[i]
	}
}

// WriteText prints g one node per line: index, op and attributes, shape,
// inputs, kernel, storage, live intermediates, and what recorded it; the
// peak is marked.
func (g *StepGraph) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "step graph on %s: %d nodes, %d kernels; %s\n", g.Device, len(g.Nodes), g.Kernels, g.Memory)
	if g.PeakNode >= 0 {
		fmt.Fprintf(&b, "intermediates peak after node %d at %s (unfused)\n", g.PeakNode, bytesText(g.PeakBytes))
	}
	for i, n := range g.Nodes {
		op := n.Op
		if n.Attrs != "" {
			op += " " + n.Attrs
		}
		kernel := "-"
		if n.Kernel >= 0 {
			kernel = fmt.Sprintf("k%d", n.Kernel)
		}
		fmt.Fprintf(&b, "%4d %-34s %-16v <- %-12v %-5s %-8s %10s", i, op, fmt.Sprint(n.Shape), fmt.Sprint(n.In), kernel, n.Store, bytesText(n.LiveBytes))
		b.WriteString(" " + n.origin())
		if i == g.PeakNode {
			b.WriteString("  <- memory peak")
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// origin says what recorded n, for WriteText and WriteDOT.
func (n *GraphNode) origin() string {
	var parts []string
	if n.Pass != "" {
		parts = append(parts, n.Pass)
	}
	if n.Layer != "" {
		parts = append(parts, n.Layer)
	}
	if n.Recorded != "" {
		parts = append(parts, n.Recorded)
	}
	s := strings.Join(parts, " ")
	switch {
	case n.Composite != "":
		s += " (of " + n.Composite + ")"
	case n.Native:
		s += " (native)"
	}
	return s
}

// WriteDOT prints g in Graphviz's DOT language (dot -Tsvg): a box per
// node labelled with its op, shape and what recorded it, nodes that share
// a kernel in one cluster, inputs as ellipses, the memory peak in red.
func (g *StepGraph) WriteDOT(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph step {\n  label=%q;\n  node [shape=box, fontsize=10];\n", fmt.Sprintf("step on %s: %d nodes, %d kernels, %s", g.Device, len(g.Nodes), g.Kernels, g.Memory))
	members := map[int][]int{}
	for i, n := range g.Nodes {
		if n.Kernel >= 0 {
			members[n.Kernel] = append(members[n.Kernel], i)
		}
	}
	node := func(i int) {
		n := &g.Nodes[i]
		label := fmt.Sprintf("%d %s %v", i, n.Op, n.Shape)
		if n.Attrs != "" {
			label += "\\n" + n.Attrs
		}
		if o := n.origin(); o != "" {
			label += "\\n" + o
		}
		attrs := ""
		switch {
		case n.Op == backend.OpArg.String():
			attrs = ", shape=ellipse"
		case i == g.PeakNode:
			attrs = ", color=red, penwidth=2"
		case n.Store == "view" || n.Store == "-":
			attrs = ", style=dashed"
		}
		fmt.Fprintf(&b, "  n%d [label=%q%s];\n", i, label, attrs)
	}
	done := make([]bool, len(g.Nodes))
	for k := 0; k < g.Kernels; k++ {
		if ms := members[k]; len(ms) > 1 {
			fmt.Fprintf(&b, "  subgraph cluster_k%d {\n    label=\"kernel %d\"; style=rounded;\n", k, k)
			for _, i := range ms {
				b.WriteString("  ")
				node(i)
				done[i] = true
			}
			b.WriteString("  }\n")
		}
	}
	for i := range g.Nodes {
		if !done[i] {
			node(i)
		}
	}
	for i, n := range g.Nodes {
		for _, j := range n.In {
			fmt.Fprintf(&b, "  n%d -> n%d;\n", j, i)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
