package core

import (
	"errors"
	"fmt"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
	"github.com/ag-go/ag/profile"
)

// MemoryEstimate is the device memory a step needs, from its recorded
// graph, before it runs (see Device.EstimateMemory). Sizes are bytes.
type MemoryEstimate struct {
	// Inputs are the values the step reads that exist before it:
	// parameters, optimizer state, data already on the device, and host
	// data it would upload.
	Inputs uint64
	// Outputs are the new values the step keeps: gradients, results, and
	// values a Backward still to come needs.
	Outputs uint64
	// Intermediates is the peak of the step's temporaries, planned as the
	// backends plan them (liveness, reuse, views) but without fusion: an
	// upper bound for a backend that fuses elementwise chains.
	Intermediates uint64
}

// Total is the sum of the parts: the step's memory at its peak.
func (e MemoryEstimate) Total() uint64 { return e.Inputs + e.Outputs + e.Intermediates }

// String writes the estimate for people.
func (e MemoryEstimate) String() string {
	return fmt.Sprintf("%s total: inputs %s, outputs %s, intermediates %s", bytesText(e.Total()), bytesText(e.Inputs), bytesText(e.Outputs), bytesText(e.Intermediates))
}

// errEstimate marks the values EstimateMemory recorded: they never run.
var errEstimate = errors.New("core: a value recorded for EstimateMemory (it never runs)")

// EstimateMemory records what step records - typically a forward, a
// Backward of its loss and an optimizer's update - and, instead of running
// it, plans its memory and returns the estimate; the recorded values are
// then dropped (reading one is an error) and the gradients are as before.
// Pending work from before is run first. Things step does outside the
// device stay done: an optimizer's first step allocates its state (and that
// state then counts in Inputs of later estimates), and its step count
// advances, so estimate with a step function of its own or reset the count.
// Use it to pick a batch size or to see what Checkpoint saves.
func (d *Device) EstimateMemory(step func() error) (MemoryEstimate, error) {
	var e MemoryEstimate
	err := d.recordedStep("EstimateMemory", step, func(s *stepGraph) error {
		e = s.est
		if len(s.g.Nodes) == 0 {
			return nil
		}
		pl, err := plan.Make(s.xg, plan.Options{Composites: d.caps.Composites})
		if err != nil {
			return err
		}
		e.Intermediates = pl.SlotBytes
		return nil
	})
	return e, err
}

// stepGraph is a step recorded for EstimateMemory or GraphOf: its graph as
// core would lower it (half storage applied), that graph as the device
// compiles it (xg: the composites it does not run natively decomposed,
// origin naming each node's node of g, nil when nothing was), the tensor
// behind each node of g (nil for nodes core added), and the estimate's
// inputs and outputs.
type stepGraph struct {
	g, xg  *backend.Graph
	origin []int
	src    []*Tensor
	est    MemoryEstimate
}

// recordedStep records what step records, builds its graph and calls use
// with it (d.mu held); the recorded values are then dropped, never run.
// fn names the caller in errors.
func (d *Device) recordedStep(fn string, step func() error, use func(*stepGraph) error) error {
	if step == nil {
		return fmt.Errorf("core.Device.%s: nil step", fn)
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("core.Device.%s: the pending work before: %w", fn, err)
	}
	if err := step(); err != nil {
		d.lock()
		d.dropPending(errEstimate)
		d.mu.Unlock()
		return fmt.Errorf("core.Device.%s: the step: %w", fn, err)
	}
	d.lock()
	defer d.mu.Unlock()
	defer d.dropPending(errEstimate)
	s := &stepGraph{g: &backend.Graph{}}
	g := s.g
	d.keepSet()
	nodeOf := make(map[*Tensor]int, len(d.pending))
	argOf := map[*storage]int{}
	for _, t := range d.pending {
		n := t.attr.node()
		n.Op, n.Shape = t.op, t.shape
		n.In = make([]int, len(t.inputs))
		for i, in := range t.inputs {
			if idx, ok := nodeOf[in]; ok {
				n.In[i] = idx
				continue
			}
			if in.state() != stateRealized || in.stor == nil {
				return fmt.Errorf("core.Device.%s: the step reads %v, which holds no value", fn, in)
			}
			idx, ok := argOf[in.stor]
			if !ok {
				idx = len(g.Nodes)
				g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpArg, Shape: in.shape, Arg: g.NumArgs})
				s.src = append(s.src, in)
				g.NumArgs++
				argOf[in.stor] = idx
				s.est.Inputs += 4 * uint64(in.stor.n)
			}
			n.In[i] = idx
		}
		if t.gather {
			gatherNode(g, t, &n)
			s.src = append(s.src, nil)
		}
		nodeOf[t] = len(g.Nodes)
		g.Nodes = append(g.Nodes, n)
		s.src = append(s.src, t)
		if d.kept(t) {
			g.Outputs = append(g.Outputs, backend.Output{Node: nodeOf[t], Arg: g.NumArgs})
			g.NumArgs++
			if !t.op.InPlace() {
				s.est.Outputs += 4 * uint64(t.Len())
			}
		}
	}
	if len(g.Nodes) > 0 {
		pass := make([]profile.Pass, len(g.Nodes))
		for t, i := range nodeOf {
			pass[i] = t.pass
		}
		remap, _ := storeHalf(g, pass, d.store)
		if remap != nil {
			src := make([]*Tensor, len(g.Nodes))
			for old, t := range s.src {
				src[remap[old]] = t
			}
			s.src = src
		}
		// planned as the device compiles it: the composites it does not
		// run natively decomposed (their intermediates count)
		s.xg, s.origin = plan.Expand(g, d.caps)
	}
	if err := use(s); err != nil {
		return fmt.Errorf("core.Device.%s: %w", fn, err)
	}
	return nil
}
