package webgpu

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// Compile plans a graph: where each node's value lives (an arg, a pooled
// intermediate buffer reused by liveness, or a view of another value), the
// dispatches of every node with their pipelines and parameters (written once
// into one parameter buffer), and bind groups for everything that does not
// depend on Run's args.

// refKind says which buffer a binding reads.
type refKind uint8

// The places a plan gives values (plan.Kind), then this package's own.
const (
	refNone = refKind(plan.None) // no storage: the value is computed inside another kernel
	refArg  = refKind(plan.Arg)  // Run's args[idx]
	refSlot = refKind(plan.Slot) // the program's pooled intermediate idx
)

const (
	refParams   refKind = 16 + iota // the program's parameter buffer
	refScratch                      // the program's scratch buffer (partial results)
	refScratchT                     // the transposed copies of matmul operands (read while refScratch is written)
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
	pipe    *gpu.Pipeline
	binds   []bref
	params  []uint32
	x, y, z uint32
	// fixed is the bind group when no binding refers to an arg; else
	// groups caches bind groups by the ids of the arg buffers bound.
	fixed  *gpu.BindGroup
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
	bg  *gpu.BindGroup
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
	slots    []*gpu.Buffer
	params   *gpu.Buffer
	copies   []outCopy
	released bool
	keyBuf   []uint64 // bindGroup's key buffer
	fp       *plan.Fusion
	lim      plan.DispatchLimits // the device's, with the binding limit tests may lower
	// scratch holds partial results between two dispatches of one node
	// (split-K matmuls, split reductions); they run one after the other, so
	// one buffer of the largest size serves all.
	scratch      *gpu.Buffer
	scratchBytes uint64
	// scratchT holds a matmul operand transposed first (mmPlan.tB): a
	// second buffer, since a dispatch may not read the buffer it writes.
	scratchT      *gpu.Buffer
	scratchTBytes uint64
	memBytes      int64              // intermediates, for MemoryBytes
	clock         *backend.NodeClock // RunTimed's per-node timing
}

// MemoryBytes reports the device memory the program holds: intermediates,
// scratch and parameters (backend.ProgramSizer).
func (p *program) MemoryBytes() int64 {
	n := p.memBytes + int64(p.scratchBytes) + int64(p.scratchTBytes)
	if p.params != nil {
		n += int64(p.params.Size())
	}
	return n
}

// outCopy copies an output's value into its arg after the compute pass.
type outCopy struct {
	src   loc
	dst   int
	bytes uint64
}

// Compile turns a graph into a program.
func (b *Backend) Compile(g *backend.Graph) (backend.Program, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("webgpu.Compile: backend closed")
	}
	p := &program{b: b, nodes: len(g.Nodes), numArgs: g.NumArgs, argNeed: make([]int, g.NumArgs),
		lim: plan.DispatchLimits{MaxGroupsPerDim: int(b.info.MaxWGPerDim), MaxBindingBytes: b.bindLimit, OffsetAlign: int(b.info.StorageAlign)}}
	if b.liveProgs == nil {
		b.liveProgs = map[*program]struct{}{}
	}
	b.liveProgs[p] = struct{}{}
	if err := p.build(g); err != nil {
		p.release()
		return nil, fmt.Errorf("webgpu.Compile: %w", err)
	}
	return p, nil
}

// plan runs the shared planner (package plan) on the fused graph: inlined
// nodes have no storage, a fused kernel reads the leaves of its chain,
// optimizer groups run at their last member (Fusion.Options), slices are
// copies (storage binds at aligned offsets only) and output copies follow
// the compute pass.
func (p *program) plan(fp *plan.Fusion) (*plan.Plan, error) {
	free := uint64(0)
	if p.b.total > p.b.allocated {
		free = p.b.total - p.b.allocated
	}
	o := fp.Options()
	o.CopiesAtEnd = true
	// the composites it runs natively (Caps.Composites); plan.Expand
	// decomposed the others first
	o.Unsupported, o.Device, o.Composites = p.b.info.Unsupported, p.b.info.Name, nativeComposites
	o.Limits = plan.Limits{
		MaxStoreElems: int(p.b.info.MaxBuffer / 4),
		MaxIndexElems: math.MaxUint32, // kernels index with u32
		FreeBytes:     free,
	}
	return plan.Make(fp.Graph, o)
}

// fuseCaps are what the generated kernels fuse (fusedgen.go): pointwise
// chains, evaluated inside their reader, as epilogues of matmuls and
// reductions and as prologues of reductions; optimizer updates in groups.
// Every kernel binds its parameter buffer besides its values.
func (b *Backend) fuseCaps() plan.FuseCaps {
	reduce := func(op backend.Op) bool { return op == backend.OpSum || op == backend.OpMax }
	return plan.FuseCaps{
		MaxBindings:     max(int(b.info.MaxStorageBuffers), 4),
		FixedBindings:   1,
		MaxBindingBytes: b.bindLimit,
		Inline:          plan.Pointwise,
		Prologue:        reduce,
		Core:            func(op backend.Op) bool { return op == backend.OpMatMul || reduce(op) },
		GroupUpdates:    true,
	}
}

// Fusion is the fusion plan Compile makes of g: which nodes share a kernel
// (core.Device.GraphOf shows it).
func (b *Backend) Fusion(g *backend.Graph) *plan.Fusion {
	if b.noFuse {
		return plan.Unfused(g)
	}
	return plan.Fuse(g, b.fuseCaps())
}

func (p *program) build(g *backend.Graph) error {
	info := p.b.info
	fp := p.b.Fusion(g)
	g = fp.Graph
	p.fp = fp
	pl, err := p.plan(fp)
	if err != nil {
		return err
	}
	locs := make([]loc, len(g.Nodes))
	for i, l := range pl.Loc { // (no Off: slices are copies, reshapes views at 0)
		locs[i] = loc{refKind(l.Kind), l.Idx}
	}
	p.argNeed = pl.ArgNeed
	for _, c := range pl.AtEnd {
		p.copies = append(p.copies, outCopy{src: locs[c.Node], dst: c.Arg, bytes: 4 * uint64(backend.NumElems(g.Nodes[c.Node].Shape))})
	}
	for s, ne := range pl.Slots {
		buf, err := p.b.newBuffer(4 * uint64(max(ne, 1)))
		if err != nil {
			return fmt.Errorf("intermediate buffer %d of %d bytes: %w", s, 4*ne, err)
		}
		p.slots = append(p.slots, buf)
	}
	p.memBytes = int64(pl.SlotBytes)
	// RunTimed splits a fused kernel's time among the nodes it computes.
	p.clock = backend.NewNodeClock(g, backend.Calibration{Budget: timingBudget}, nil, fp.Kernels(pl.Needed))
	for i := range g.Nodes {
		var err error
		switch {
		case !pl.Needed[i] || fp.Inline[i] || fp.Deferred[i]:
			continue
		case fp.Group[i] != nil:
			err = p.lowerGroup(fp, i, locs)
		case fp.Fused(i), g.Nodes[i].Op == backend.OpSum, g.Nodes[i].Op == backend.OpMax:
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
	if p.scratchTBytes > 0 {
		buf, err := p.b.newBuffer(p.scratchTBytes)
		if err != nil {
			return fmt.Errorf("scratch buffer of %d bytes: %w", p.scratchTBytes, err)
		}
		p.scratchT = buf
	}
	// The parameters of all steps go into one buffer, written once here.
	params := make([][]uint32, len(steps))
	for i, s := range steps {
		params[i] = s.params
	}
	words, offs := plan.PackParams(params, int(info.StorageAlign))
	buf, err := p.b.newBuffer(uint64(len(words)) * 4)
	if err != nil {
		return fmt.Errorf("parameter buffer: %w", err)
	}
	p.params = buf
	if err := p.b.d.Write(buf, 0, gpu.BytesOf(words)); err != nil {
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
			bg, err := p.b.d.NewBindGroup(pipe, p.entries(s, nil))
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
func (p *program) entries(s *step, args []*buffer) []gpu.BindEntry {
	es := make([]gpu.BindEntry, len(s.binds))
	for i, r := range s.binds {
		var g *gpu.Buffer
		switch r.kind {
		case refArg:
			g = args[r.idx].g
		case refSlot:
			g = p.slots[r.idx]
		case refParams:
			g = p.params
		case refScratch:
			g = p.scratch
		case refScratchT:
			g = p.scratchT
		}
		es[i] = gpu.BindEntry{Buf: g, Off: r.off, Size: r.size}
	}
	return es
}
