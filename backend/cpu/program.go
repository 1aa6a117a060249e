package cpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// ErrReleased is returned by Run on a released program.
var ErrReleased = errors.New("cpu: program released")

// program is a compiled graph: one closure per computed node, built at
// compile time with its strides, blocking and task splits, so that Run only
// binds the arg slices and calls them.
type program struct {
	cpu      *CPU
	numArgs  int
	nodes    int
	argNeed  []int // floats each arg must hold (0: unused, may be nil)
	bufs     []*Buffer
	vals     [][]float32 // per node: where its value lives during a run
	binds    []bind
	steps    []step
	atEnd    []plan.Copy
	slots    [][]float32
	memBytes int64 // the intermediates' bytes (MemoryBytes)
	released bool
	clock    *backend.NodeClock // RunTimed: every run timed per kernel
}

// MemoryBytes reports the program's intermediate memory (backend.ProgramSizer).
func (p *program) MemoryBytes() int64 { return p.memBytes }

// bind points vals[node] at args[arg][off:off+n] for one run.
type bind struct{ node, arg, off, n int }

type step struct {
	node   int
	fn     func() // nil for values that need no computing (args, views)
	copies []plan.Copy
}

var (
	_ backend.Program      = (*program)(nil)
	_ backend.NodeTimer    = (*program)(nil)
	_ backend.ProgramSizer = (*program)(nil)
)

// Run executes the graph once. RunInfo.DeviceTime is the host time of the
// run; Launches is 1 (one call into the backend).
func (p *program) Run(args []backend.Buffer) (backend.RunInfo, error) {
	p.cpu.mu.Lock()
	defer p.cpu.mu.Unlock()
	return p.runLocked(args, nil)
}

// RunTimed is Run with the host time of each node's kernel, measured in
// every run (backend.EveryRun; TimeNone for nodes that are views or were
// not needed).
func (p *program) RunTimed(args []backend.Buffer, t *backend.NodeTimes) (backend.RunInfo, error) {
	if err := t.Check("cpu.RunTimed", p.nodes); err != nil {
		return backend.RunInfo{}, err
	}
	p.cpu.mu.Lock()
	defer p.cpu.mu.Unlock()
	return p.clock.Run(t, p, args)
}

// TimeKernels is a run with each kernel's host time appended to ks
// (backend.Kernels; called with the backend's lock held).
func (p *program) TimeKernels(args []backend.Buffer, ks []backend.KernelTime) ([]backend.KernelTime, backend.RunInfo, error) {
	info, err := p.runLocked(args, &ks)
	return ks, info, err
}

// RunWhole is Run with the backend's lock held (backend.Kernels).
func (p *program) RunWhole(args []backend.Buffer) (backend.RunInfo, error) {
	return p.runLocked(args, nil)
}

// runLocked is Run with the backend's lock held: each kernel's host time
// appended to times where it is given.
func (p *program) runLocked(args []backend.Buffer, times *[]backend.KernelTime) (backend.RunInfo, error) {
	start := time.Now()
	if p.released {
		return backend.RunInfo{}, fmt.Errorf("cpu.Run: %w", ErrReleased)
	}
	if len(args) != p.numArgs {
		return backend.RunInfo{}, fmt.Errorf("cpu.Run: %d args, graph takes %d", len(args), p.numArgs)
	}
	for i, need := range p.argNeed {
		if need == 0 {
			continue
		}
		b, err := asBuffer("Run", args[i])
		if err != nil {
			return backend.RunInfo{}, fmt.Errorf("arg %d: %w", i, err)
		}
		if len(b.data) < need {
			return backend.RunInfo{}, fmt.Errorf("cpu.Run: arg %d holds %d values, graph uses %d", i, len(b.data), need)
		}
		p.bufs[i] = b
	}
	for _, b := range p.binds {
		p.vals[b.node] = p.bufs[b.arg].data[b.off : b.off+b.n]
	}
	for i := range p.steps {
		s := &p.steps[i]
		if s.fn != nil {
			if times != nil {
				t0 := time.Now()
				s.fn()
				*times = append(*times, backend.KernelTime{Node: s.node, Dur: time.Since(t0)})
			} else {
				s.fn()
			}
		}
		for _, c := range s.copies {
			copy(p.bufs[c.Arg].data, p.vals[c.Node])
		}
	}
	for _, c := range p.atEnd {
		copy(p.bufs[c.Arg].data, p.vals[c.Node])
	}
	// Drop references to the caller's buffers so they can be collected.
	for _, b := range p.binds {
		p.vals[b.node] = nil
	}
	clear(p.bufs)
	return backend.RunInfo{DeviceTime: time.Since(start), Launches: 1}, nil
}

// Release drops the program's intermediate memory.
func (p *program) Release() {
	p.cpu.mu.Lock()
	defer p.cpu.mu.Unlock()
	p.released = true
	p.slots, p.vals, p.steps = nil, nil, nil
}
