package core

import (
	"fmt"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core/internal/goid"
)

// segment is what Checkpoint remembers of the ops f recorded: Backward
// differentiates a copy of them, recorded when it gets there, rather than
// the originals, so the originals' values die at the end of the forward.
type segment struct {
	nodes []*Tensor // f's nodes in recording order, the output last
	// ext are the values the nodes read from outside (inputs, parameters,
	// constants).
	ext []*Tensor
}

// Checkpoint returns f(x), recorded so that Backward recomputes the values
// inside f instead of keeping them from the forward (gradient, or
// activation, checkpointing): the memory of f's intermediates is freed
// after the forward, at the price of running f's ops twice. The result and
// the gradients are those of f(x) itself; random draws inside f (dropout)
// are drawn again from the same place in the device's random stream, so
// the recomputation drops the same elements.
//
// The saving is made when the forward and its Backward run in one sync (a
// lazy step, a Capture, StepCapture): a sync between them keeps what the
// Backward will need, as without Checkpoint, and the Backward uses it.
//
// f records ops on x's device and returns one tensor; parameters and other
// values it reads need no declaring. When f syncs (reads a value), or in
// eager mode, there is nothing to recompute and the result is plain f(x):
// the same numbers, without the memory saving.
func Checkpoint(f func(*Tensor) *Tensor, x *Tensor) *Tensor {
	needTensors("Checkpoint", x)
	if f == nil {
		panic("core.Checkpoint: nil function")
	}
	d := x.dev
	d.lock()
	start, runs := len(d.pending), d.stats.Runs
	d.mu.Unlock()
	y := f(x)
	if y == nil {
		panic("core.Checkpoint: the function returned nil")
	}
	if y.dev != d {
		panic(fmt.Sprintf("core.Checkpoint: the function returned a value on %s for an input on %s", y.dev.label(), d.label()))
	}
	if y == nil {
		panic("core.Checkpoint: the function returned nil")
	}
	g := goid.Get()
	d.lock()
	defer d.mu.Unlock()
	if d.stats.Runs != runs || len(d.pending) < start || y.state() != statePending || !y.requiresGrad {
		return y // f synced, eager mode, or no gradient: plain f()
	}
	in := map[*Tensor]bool{}
	var seg segment
	for _, t := range d.pending[start:] {
		// In-place updates (a batch norm's running statistics) happen once:
		// a copy would apply them again, so they stay outside the segment.
		if t.g == g && !t.op.InPlace() {
			in[t] = true
		}
	}
	if !in[y] {
		return y // f returned a value it did not make
	}
	// Only the nodes y depends on, in recording order.
	need := map[*Tensor]bool{y: true}
	for i := len(d.pending) - 1; i >= start; i-- {
		t := d.pending[i]
		if !need[t] {
			continue
		}
		for _, x := range t.inputs {
			if in[x] {
				need[x] = true
			}
		}
	}
	seen := map[*Tensor]bool{}
	for _, t := range d.pending[start:] {
		if !need[t] {
			continue
		}
		seg.nodes = append(seg.nodes, t)
		for _, x := range t.inputs {
			if !in[x] && !seen[x] {
				seen[x] = true
				seg.ext = append(seg.ext, x)
			}
		}
	}
	y.more().ckpt = &seg
	return y
}

// recompute records a copy of s's nodes reading s.ext, labelled as the
// originals, in the backward pass, and returns the walk of the copies (in
// recording order) and the copy of the output. Called without the lock,
// from Backward, whose mode m is this goroutine's.
func (s *segment) recompute(m *gmode) ([]walked, *Tensor) {
	copies := make(map[*Tensor]*Tensor, len(s.nodes))
	order := make([]walked, 0, len(s.nodes))
	var c *Tensor
	for _, n := range s.nodes {
		ins := make([]*Tensor, len(n.inputs))
		needs := make([]bool, len(n.inputs))
		for k, x := range n.inputs {
			if cx := copies[x]; cx != nil {
				ins[k] = cx
			} else {
				ins[k] = x
			}
			needs[k] = ins[k].requiresGrad
		}
		// a recomputed node is a node of the gradient's call, not a call,
		// and leaves a call the walk opened for a gradient node to take
		open := m.callOpen
		m.user, m.scope, m.callOpen = n.user, n.scope, false
		c = n.dev.push(&Tensor{op: n.op, shape: n.shape, attr: n.attr, gather: n.gather}, nil, n.user, false, ins...)
		n.dev.lock()
		c.requiresGrad = n.requiresGrad // recorded under Backward's no-grad mode
		c.recomputed = true
		c.callHead, c.callTail = n.callHead, n.callTail // its gradient is a call where n's is
		m.callOpen = open
		if n.op == backend.OpRandUniform {
			c.more().sameDraw = n // the same numbers: lowered at n's place in the stream
		}
		n.dev.mu.Unlock()
		if cu := n.customOp(); cu != nil {
			// a Custom's copy is differentiated through its backward, from
			// the copies of its inputs
			cins := make([]*Tensor, len(cu.ins))
			needs = make([]bool, len(cu.ins))
			for k, x := range cu.ins {
				if cx := copies[x]; cx != nil {
					cins[k] = cx
				} else {
					cins[k] = x
				}
				needs[k] = cins[k].requiresGrad
			}
			n.dev.lock()
			c.more().custom = &custom{name: cu.name, ins: cins, backward: cu.backward}
			n.dev.mu.Unlock()
			ins = cins
		}
		copies[n] = c
		order = append(order, walked{t: c, inputs: ins, needs: needs})
	}
	return order, c
}
