package core

import (
	"fmt"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// Backward appends the gradient of t (a one-element tensor, usually a loss)
// with respect to every tensor it depends on to the device's pending graph,
// and accumulates the result into the Grad of each leaf that requires grad
// (params; a frozen one, see SetRequiresGrad, gets none, and no node is
// recorded for a gradient that could only reach frozen ones). It does not
// run anything: the backward becomes part of the next sync's program,
// together with the forward and any optimizer update.
//
// Each node is differentiated once: a second Backward through the same nodes
// is an error, like PyTorch without retain_graph. Grad with RetainGraph or
// CreateGraph leaves them to a Backward after it (a gradient penalty's
// loss); Backward always records constants, so use Grad with CreateGraph
// for a gradient to differentiate again.
func (t *Tensor) Backward() error {
	if t == nil {
		return fmt.Errorf("core: Backward of a nil tensor")
	}
	if t.Len() != 1 {
		return fmt.Errorf("core: Backward of a tensor of shape %v: want one element (a scalar loss)", t.shape)
	}
	d := t.dev
	// The walk and the ops it records are the backward's create time: the
	// timed mode charges the time between ops to the next op.
	m, restore := d.withMode(func(m *gmode) {
		m.noGrad++
		m.createGraph = false // a Backward inside a Grad's hook records constants
		m.pass = profile.PassBackward
		if profiling() {
			m.timed, m.mark = true, time.Now()
		}
	})
	defer restore()
	d.lock()
	if !t.requiresGrad {
		d.mu.Unlock()
		return fmt.Errorf("core: Backward of %v: it does not depend on any tensor that requires grad", t)
	}
	r := &gradRun{fn: "core: Backward", user: "Backward"}
	order, err := topo(t, r)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	r.walk(t, order, m)
	return nil
}

// gradRun is one walk of the gradient: Backward's, into the leaves'
// Grad, or Grad's, to its inputs.
type gradRun struct {
	fn   string // the errors' prefix: "core: Backward" or "core.Grad"
	user string // the seed's call in profiles
	// stop, for Grad, are the tensors whose gradients it returns: the
	// walk ends there, and other leaves are left out; got receives them.
	// nil for Backward, which accumulates into every leaf that requires
	// grad.
	stop map[*Tensor]bool
	got  map[*Tensor]*Tensor
	// retain leaves the walked nodes differentiable again (Grad with
	// RetainGraph or CreateGraph); create records the gradient with
	// gradients on (CreateGraph).
	retain, create bool
}

// walk records the gradient of t over order (topo's), seeded with ones.
func (r *gradRun) walk(t *Tensor, order []walked, m *gmode) {
	d := t.dev
	// the seed, and the sums into the leaves' gradients: one call
	m.user, m.callOpen = r.user, true
	// sized once: grown, it allocated at every step
	grads := make(map[*Tensor]*Tensor, len(order))
	grads[t] = d.Full(1, t.shape...)
	var walk func(order []walked)
	walk = func(order []walked) {
		for i := len(order) - 1; i >= 0; i-- {
			n := order[i].t
			g := grads[n]
			delete(grads, n)
			if g == nil {
				continue
			}
			if r.stop[n] {
				r.got[n] = g // complete: every consumer of n came later in order
			}
			if n.isLeaf() {
				if r.stop != nil {
					continue
				}
				d.lock()
				prev := n.grad
				d.mu.Unlock()
				sum := g
				m.user, m.scope, m.callOpen = r.user, "", false
				if prev != nil {
					sum = Add(prev, g)
				}
				d.lock()
				sum.keep = true
				n.grad = sum
				d.grads = append(d.grads, gradUndo{leaf: n, prev: prev})
				d.mu.Unlock()
				continue
			}
			if order[i].ckpt {
				// Differentiate a copy of the checkpointed ops, recorded
				// now: the gradients flow to the segment's inputs (order[i]'s
				// inputs, which come earlier in order).
				inner, c := n.ckptSeg().recompute(m)
				grads[c] = g
				walk(inner)
				if !r.retain {
					d.lock()
					// The originals are differentiated through the copy: a run
					// need not keep them for this Backward.
					for _, o := range n.ckptSeg().nodes {
						o.backwarded = true
					}
					d.mu.Unlock()
				}
				continue
			}
			// The gradient's nodes belong to the op and layer they differentiate
			// (the profile shows "MatMul" in the backward, not "mul"). m is
			// this goroutine's own mode: no other goroutine touches it.
			// The gradient of a call is one call: walking back, it opens at
			// the call's last node and the first gradient node recorded
			// takes it, whichever node records one (the head's gradient may
			// record none: Sub's is its input's); it closes at the head.
			m.user, m.scope = n.user, n.scope
			m.callOpen = m.callOpen || n.callTail
			var all []*Tensor // the gradients of every input, made together
			if n.op == backend.OpAttention {
				all = attentionVJP(n, order[i].inputs, g, order[i].needs)
			}
			if c := n.customOp(); c != nil {
				all = c.grads(n, order[i].inputs, g)
			}
			for k, in := range order[i].inputs {
				if !order[i].needs[k] {
					continue // no work for inputs without gradient (data, labels)
				}
				var gin *Tensor
				if all != nil {
					gin = all[k]
				} else {
					gin = vjp(n, order[i].inputs, g, k)
				}
				if gin == nil {
					continue
				}
				if prev := grads[in]; prev != nil {
					gin = Add(prev, gin)
				}
				grads[in] = gin
			}
			if n.callHead {
				m.callOpen = false // the call began here: its gradient is done
			}
			if !r.retain {
				d.lock()
				n.backwarded = true
				d.mu.Unlock()
			}
		}
	}
	walk(order)
}

func (t *Tensor) isLeaf() bool { return t.op == backend.OpInvalid }

// walked is a node of Backward's walk with what it read under the lock: its
// inputs and which of them need a gradient.
type walked struct {
	t      *Tensor
	inputs []*Tensor
	needs  []bool
	ckpt   bool // differentiate t's Checkpoint segment by recomputing it
}

// topo orders the requires-grad subgraph under t, inputs first. Called with
// the device lock held: it reads the recipes that a sync may change.
// Visited nodes are marked with a new generation rather than kept in a map,
// and the walked nodes' lists are cut from two shared slices: Backward runs
// every lazy step, over every node.
func topo(t *Tensor, r *gradRun) ([]walked, error) {
	d := t.dev
	// Sized for the pending graph, which the walk mostly covers: grown
	// from nothing they were a tenth of a lazy step's allocations.
	hint := len(d.pending) + 16
	order := make([]walked, 0, hint)
	inSlab := make([]*Tensor, 0, 2*hint)
	needSlab := make([]bool, 0, 2*hint)
	d.markGen++
	gen := d.markGen
	// visit reports whether a leaf that requires grad now is under n: a
	// node recorded before its parameters were frozen (SetRequiresGrad)
	// still says requiresGrad, and a gradient through it would reach no
	// one, so it is left out of the order and its consumers do not make one.
	var visit func(n *Tensor) (bool, error)
	visit = func(n *Tensor) (bool, error) {
		if !n.requiresGrad {
			return false, nil
		}
		if n.consumedGen == gen {
			return n.gradLive, nil
		}
		n.consumedGen = gen
		if n.isLeaf() {
			// Grad's walk reaches only its inputs, Backward's every leaf
			n.gradLive = r.stop == nil || r.stop[n]
			if n.gradLive {
				order = append(order, walked{t: n})
			}
			return n.gradLive, nil
		}
		if n.backwarded {
			return false, fmt.Errorf("%s: %v was already differentiated by an earlier Backward (or a Grad without RetainGraph)", r.fn, n)
		}
		if n.state() == stateFailed {
			return false, fmt.Errorf("%s: %v was dropped by a failed run: %w", r.fn, n, n.failure())
		}
		if n.inputs == nil {
			return false, fmt.Errorf("%s: the graph of %v is gone (its values were not kept)", r.fn, n)
		}
		ins := n.inputs
		// A checkpointed value not yet run: Backward recomputes its segment
		// from the segment's inputs. Once run, the run kept what the
		// segment's own backward needs (see keepSet): that is cheaper.
		ckpt := n.ckptSeg() != nil && n.state() == statePending
		if ckpt && r.create {
			// its recomputed copy is recorded without gradients
			return false, fmt.Errorf("%s: CreateGraph through the Checkpoint segment of %v: not supported (differentiate the segment without Checkpoint)", r.fn, n)
		}
		if ckpt {
			ins = n.ckptSeg().ext
		} else if c := n.customOp(); c != nil {
			ins = c.ins // differentiated through the user's backward
		}
		inSlab = append(inSlab, ins...)
		needSlab = append(needSlab, make([]bool, len(ins))...)
		end := len(inSlab)
		w := walked{t: n, inputs: inSlab[end-len(ins) : end : end], needs: needSlab[end-len(ins) : end : end], ckpt: ckpt}
		live := false
		for k, in := range ins {
			switch in.state() {
			case stateSpent:
				return false, fmt.Errorf("%s: %v needs %v, which was not kept", r.fn, n, in)
			case stateFailed:
				return false, fmt.Errorf("%s: %v needs %v, which was dropped by a failed run: %w", r.fn, n, in, in.failure())
			}
			l, err := visit(in)
			if err != nil {
				return false, err
			}
			w.needs[k] = l
			live = live || l
		}
		live = live || r.stop[n] // an input of Grad computed from others
		n.gradLive = live
		if live {
			order = append(order, w)
		}
		return live, nil
	}
	live, err := visit(t)
	if err == nil && !live && r.stop != nil {
		err = fmt.Errorf("%s: %v does not depend on any of the inputs", r.fn, t)
	} else if err == nil && !live {
		err = fmt.Errorf("core: Backward of %v: every parameter it depends on is frozen (SetRequiresGrad(false))", t)
	}
	return order, err
}
