package webgpu

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Compile plans a graph: where each node's value lives (an arg, a pooled
// intermediate buffer reused by liveness, or a view of another value), the
// dispatches of every node with their pipelines and parameters (written once
// into one parameter buffer), and bind groups for everything that does not
// depend on Run's args.

// refKind says which buffer a binding reads.
type refKind uint8

const (
	refArg    refKind = iota // Run's args[idx]
	refSlot                  // the program's pooled intermediate idx
	refParams                // the program's parameter buffer
)

// bref is one binding of a dispatch: bytes [off, off+size) of a buffer.
type bref struct {
	kind      refKind
	idx       int
	off, size uint64
}

// step is one dispatch of a node.
type step struct {
	node    int
	k       *kernel
	pipe    *gpipe
	binds   []bref
	params  []uint32
	x, y, z uint32
	// fixed is the bind group when no binding refers to an arg; else
	// groups caches bind groups by the ids of the arg buffers bound.
	fixed  *gbind
	groups map[argKey]*gbind
}

// argKey identifies the arg buffers a step binds (at most 6 bindings).
type argKey [6]uint64

// loc is where a node's value lives.
type loc struct {
	kind refKind // refArg or refSlot
	idx  int
}

type program struct {
	b        *Backend
	nodes    int
	numArgs  int
	argNeed  []int // elements each arg must hold
	steps    []step
	slots    []*gbuf
	params   *gbuf
	copies   []outCopy
	released bool
}

// outCopy copies an output's value into its arg after the compute pass.
type outCopy struct {
	src   loc
	dst   int
	bytes uint64
}

// Compile turns a graph into a program.
func (b *Backend) Compile(g *backend.Graph) (backend.Program, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("webgpu.Compile: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("webgpu.Compile: backend closed")
	}
	p := &program{b: b, nodes: len(g.Nodes), numArgs: g.NumArgs, argNeed: make([]int, g.NumArgs)}
	if err := p.build(g); err != nil {
		p.release()
		return nil, fmt.Errorf("webgpu.Compile: %w", err)
	}
	return p, nil
}

func (p *program) build(g *backend.Graph) error {
	locs, nslots, slotBytes := planMemory(g)
	for i, n := range g.Nodes {
		if n.Op == backend.OpArg {
			p.argNeed[n.Arg] = max(p.argNeed[n.Arg], backend.NumElems(n.Shape))
		}
		if l := locs[i]; l.kind == refArg {
			p.argNeed[l.idx] = max(p.argNeed[l.idx], backend.NumElems(n.Shape))
		}
	}
	for _, o := range g.Outputs {
		ne := backend.NumElems(g.Nodes[o.Node].Shape)
		p.argNeed[o.Arg] = max(p.argNeed[o.Arg], ne)
		if l := locs[o.Node]; l.kind != refArg || l.idx != o.Arg {
			p.copies = append(p.copies, outCopy{src: l, dst: o.Arg, bytes: uint64(ne) * 4})
		}
	}
	for s := 0; s < nslots; s++ {
		buf, err := p.b.newBuffer(slotBytes[s])
		if err != nil {
			return fmt.Errorf("intermediate buffer %d of %d bytes: %w", s, slotBytes[s], err)
		}
		p.slots = append(p.slots, buf)
	}
	for i := range g.Nodes {
		if err := p.lower(g, i, locs); err != nil {
			return fmt.Errorf("node %d (%s %v): %w", i, g.Nodes[i].Op, g.Nodes[i].Shape, err)
		}
	}
	// The parameters of all steps go into one buffer, each at an offset
	// aligned for storage bindings, written once here.
	align := uint64(max(p.b.d.info.storageAlign, 4))
	var words []uint32
	offs := make([]uint64, len(p.steps))
	for i := range p.steps {
		for uint64(len(words))*4%align != 0 {
			words = append(words, 0)
		}
		offs[i] = uint64(len(words)) * 4
		words = append(words, p.steps[i].params...)
	}
	if len(words) > 0 {
		buf, err := p.b.newBuffer(uint64(len(words)) * 4)
		if err != nil {
			return fmt.Errorf("parameter buffer: %w", err)
		}
		p.params = buf
		if err := p.b.d.write(buf, 0, u32Bytes(words)); err != nil {
			return fmt.Errorf("parameter buffer: %w", err)
		}
	}
	for i := range p.steps {
		s := &p.steps[i]
		s.binds[0] = bref{kind: refParams, off: offs[i], size: uint64(max(len(s.params), 1)) * 4}
		for _, r := range s.binds {
			if r.size > p.b.bindLimit {
				return fmt.Errorf("node %d (%s): a binding of %d bytes exceeds maxStorageBufferBindingSize %d and this op cannot be split", s.node, g.Nodes[s.node].Op, r.size, p.b.bindLimit)
			}
		}
		pipe, err := p.b.pipeline(s.k)
		if err != nil {
			return err
		}
		s.pipe = pipe
		if !slices.ContainsFunc(s.binds, func(r bref) bool { return r.kind == refArg }) {
			bg, err := p.b.d.newBindGroup(pipe, p.entries(s, nil))
			if err != nil {
				return fmt.Errorf("node %d (%s): bind group: %w", s.node, g.Nodes[s.node].Op, err)
			}
			s.fixed = bg
		}
	}
	return nil
}

// entries resolves a step's bindings against the run's args.
func (p *program) entries(s *step, args []*buffer) []bindEntry {
	es := make([]bindEntry, len(s.binds))
	for i, r := range s.binds {
		var g *gbuf
		switch r.kind {
		case refArg:
			g = args[r.idx].g
		case refSlot:
			g = p.slots[r.idx]
		case refParams:
			g = p.params
		}
		es[i] = bindEntry{buf: g, off: r.off, size: r.size}
	}
	return es
}

// planMemory decides where every node's value lives. Args and in-place
// updates live in their args; reshapes are views of their input; an output
// that nobody reads as an arg is written straight into its arg; every other
// value gets a pooled slot, reused once the last reader of the value it
// held has run (a node's output slot is taken before its inputs' are given
// back, so no dispatch binds one buffer as both input and output).
func planMemory(g *backend.Graph) (locs []loc, nslots int, slotBytes []uint64) {
	nn := len(g.Nodes)
	locs = make([]loc, nn)
	readArg := make([]bool, g.NumArgs)
	for _, n := range g.Nodes {
		if n.Op == backend.OpArg {
			readArg[n.Arg] = true
		}
	}
	direct := make([]int, nn)
	for i := range direct {
		direct[i] = -1
	}
	taken := make([]bool, g.NumArgs)
	for _, o := range g.Outputs {
		n := g.Nodes[o.Node]
		if n.Op == backend.OpArg || n.Op == backend.OpReshape || n.Op.InPlace() || readArg[o.Arg] || taken[o.Arg] || direct[o.Node] >= 0 {
			continue
		}
		direct[o.Node], taken[o.Arg] = o.Arg, true
	}
	// owner[i] is the node whose storage holds node i's value.
	owner := make([]int, nn)
	last := make([]int, nn)
	for i, n := range g.Nodes {
		owner[i], last[i] = i, -1
		switch {
		case n.Op == backend.OpReshape:
			owner[i] = owner[n.In[0]]
		case n.Op.InPlace():
			owner[i] = owner[n.In[0]]
		}
		for _, j := range n.In {
			last[owner[j]] = max(last[owner[j]], i)
		}
	}
	for _, o := range g.Outputs {
		last[owner[o.Node]] = math.MaxInt
	}
	var free []int // free slots
	slotOf := make([]int, nn)
	for i, n := range g.Nodes {
		slotOf[i] = -1
		switch {
		case n.Op == backend.OpArg:
			locs[i] = loc{refArg, n.Arg}
		case owner[i] != i:
			locs[i] = locs[owner[i]]
		case direct[i] >= 0:
			locs[i] = loc{refArg, direct[i]}
		default:
			need := uint64(max(backend.NumElems(n.Shape), 1)) * 4
			s := pickSlot(free, slotBytes, need)
			if s < 0 {
				s = len(slotBytes)
				slotBytes = append(slotBytes, need)
			} else {
				free = slices.DeleteFunc(free, func(f int) bool { return f == s })
				slotBytes[s] = max(slotBytes[s], need)
			}
			slotOf[i] = s
			locs[i] = loc{refSlot, s}
		}
		// Give back the slots whose last reader is this node, and this
		// node's own slot when nothing reads it.
		released := map[int]bool{}
		give := func(o int) {
			if slotOf[o] >= 0 && !released[o] {
				released[o] = true
				free = append(free, slotOf[o])
			}
		}
		for _, j := range n.In {
			if last[owner[j]] == i {
				give(owner[j])
			}
		}
		if owner[i] == i && last[i] < 0 {
			give(i)
		}
	}
	return locs, len(slotBytes), slotBytes
}

// pickSlot returns the smallest free slot holding need bytes, else the
// largest free slot (grown by the caller), else -1.
func pickSlot(free []int, sizes []uint64, need uint64) int {
	best, largest := -1, -1
	for _, s := range free {
		if sizes[s] >= need && (best < 0 || sizes[s] < sizes[best]) {
			best = s
		}
		if largest < 0 || sizes[s] > sizes[largest] {
			largest = s
		}
	}
	if best >= 0 {
		return best
	}
	return largest
}
