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
	refArg     refKind = iota // Run's args[idx]
	refSlot                   // the program's pooled intermediate idx
	refParams                 // the program's parameter buffer
	refNone                   // no storage: the value is computed inside another kernel
	refScratch                // the program's scratch buffer (partial results)
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
	groups map[argKey]cachedGroup
	// alt, for a dispatch that fuses several in-place updates, is the
	// members' own dispatches, run instead when bound buffers alias.
	alt []step
}

// argKey identifies the arg buffers a step binds: the ids of the first
// ones, and a hash of all of them (fused kernels bind more).
type argKey [8]uint64

// cachedGroup is a bind group made for the arg buffers of ids.
type cachedGroup struct {
	bg  *gbind
	ids []uint64
}

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
	keyBuf   []uint64 // bindGroup's key buffer
	fp       *fusePlan
	// scratch holds partial results between two dispatches of one node
	// (split-K matmuls, split reductions); they run one after the other, so
	// one buffer of the largest size serves all.
	scratch      *gbuf
	scratchBytes uint64
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
	info := p.b.d.info
	fp := planFusion(g, fuseLimits{maxBinds: max(int(info.maxStorageBuffers), 4), bindLimit: p.b.bindLimit}, !p.b.noFuse)
	g = fp.g
	p.fp = fp
	locs, nslots, slotBytes := planMemory(g, fp)
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
		var err error
		switch {
		case fp.inl[i] || fp.deferred[i]:
			continue
		case fp.group[i] != nil:
			err = p.lowerGroup(fp, i, locs)
		case fp.fused(i), g.Nodes[i].Op == backend.OpSum, g.Nodes[i].Op == backend.OpMax:
			err = p.lowerFused(fp, i, locs)
		default:
			err = p.lower(g, i, locs)
		}
		if err != nil {
			return fmt.Errorf("node %d (%s %v): %w", i, g.Nodes[i].Op, g.Nodes[i].Shape, err)
		}
	}
	steps := p.allSteps()
	if p.scratchBytes > 0 {
		buf, err := p.b.newBuffer(p.scratchBytes)
		if err != nil {
			return fmt.Errorf("scratch buffer of %d bytes: %w", p.scratchBytes, err)
		}
		p.scratch = buf
	}
	// The parameters of all steps go into one buffer, each at an offset
	// aligned for storage bindings, written once here.
	align := uint64(max(info.storageAlign, 4))
	var words []uint32
	offs := make([]uint64, len(steps))
	for i, s := range steps {
		for uint64(len(words))*4%align != 0 {
			words = append(words, 0)
		}
		offs[i] = uint64(len(words)) * 4
		words = append(words, s.params...)
		if len(s.params) == 0 {
			words = append(words, 0) // the binding is one word at least
		}
	}
	if len(words) == 0 {
		words = []uint32{0}
	}
	buf, err := p.b.newBuffer(uint64(len(words)) * 4)
	if err != nil {
		return fmt.Errorf("parameter buffer: %w", err)
	}
	p.params = buf
	if err := p.b.d.write(buf, 0, u32Bytes(words)); err != nil {
		return fmt.Errorf("parameter buffer: %w", err)
	}
	for i, s := range steps {
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

// allSteps lists every dispatch the program may run: its steps and their
// fallbacks.
func (p *program) allSteps() []*step {
	var out []*step
	for i := range p.steps {
		s := &p.steps[i]
		out = append(out, s)
		for k := range s.alt {
			out = append(out, &s.alt[k])
		}
	}
	return out
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
		case refScratch:
			g = p.scratch
		}
		es[i] = bindEntry{buf: g, off: r.off, size: r.size}
	}
	return es
}

// planMemory decides where every node's value lives. Args and in-place
// updates live in their args; reshapes of stored values are views of them;
// nodes fused into another kernel have no storage; an output that nobody
// reads as an arg is written straight into its arg (also through a reshape
// of it); every other value gets a pooled slot, reused once the last kernel
// reading it has run (a kernel's output slot is taken before its inputs'
// are given back, so no dispatch binds one buffer as both input and output).
// Deferred in-place updates read their inputs where their group runs.
func planMemory(g *backend.Graph, fp *fusePlan) (locs []loc, nslots int, slotBytes []uint64) {
	nn := len(g.Nodes)
	locs = make([]loc, nn)
	readArg := make([]bool, g.NumArgs)
	for _, n := range g.Nodes {
		if n.Op == backend.OpArg {
			readArg[n.Arg] = true
		}
	}
	// view[i]: node i is stored in its input's storage.
	view := func(i int) bool {
		n := &g.Nodes[i]
		return n.Op.InPlace() || (n.Op == backend.OpReshape && !fp.inl[n.In[0]] && !fp.fused(i))
	}
	// owner[i] is the node whose storage holds node i's value.
	owner := make([]int, nn)
	for i := range g.Nodes {
		owner[i] = i
		if !fp.inl[i] && view(i) {
			owner[i] = owner[g.Nodes[i].In[0]]
		}
	}
	direct := make([]int, nn)
	for i := range direct {
		direct[i] = -1
	}
	taken := make([]bool, g.NumArgs)
	for _, o := range g.Outputs {
		w := owner[o.Node]
		n := g.Nodes[w]
		if n.Op == backend.OpArg || n.Op.InPlace() || readArg[o.Arg] || taken[o.Arg] || direct[w] >= 0 {
			continue
		}
		direct[w], taken[o.Arg] = o.Arg, true
	}
	// pos[i] is where node i's kernel runs.
	pos := make([]int, nn)
	for i := range pos {
		pos[i] = i
	}
	for last, members := range fp.group {
		for _, j := range members {
			pos[j] = last
		}
	}
	last := make([]int, nn)
	for i := range last {
		last[i] = -1
	}
	for i := range g.Nodes {
		if fp.inl[i] {
			continue
		}
		reads := g.Nodes[i].In
		if fp.fused(i) {
			reads = fp.reads(i)
		}
		for _, j := range reads {
			last[owner[j]] = max(last[owner[j]], pos[i])
		}
	}
	for _, o := range g.Outputs {
		last[owner[o.Node]] = math.MaxInt
	}
	freeAt := make([][]int, nn)
	for i, l := range last {
		if l >= 0 && l < nn && owner[i] == i {
			freeAt[l] = append(freeAt[l], i)
		}
	}
	var free []int // free slots
	slotOf := make([]int, nn)
	for i := range slotOf {
		slotOf[i] = -1
	}
	for i, n := range g.Nodes {
		switch {
		case fp.inl[i]:
			locs[i] = loc{refNone, 0}
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
			if last[i] < 0 {
				free = append(free, s) // nothing reads it
			}
		}
		for _, o := range freeAt[i] {
			if slotOf[o] >= 0 {
				free = append(free, slotOf[o])
			}
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
