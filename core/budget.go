package core

import "fmt"

// SetMemoryBudget bounds the device memory ag holds on d (ggmlR's
// .ag_tape_mem_limit): the buffers of its values, of the pool of buffers
// kept for reuse, and of its compiled programs' intermediates. A run that
// would take more is refused before it runs, with an error naming what it
// needs, what is held and the budget, and its work is dropped as a failed
// run's (the values from before stay); an upload or a Zeros past it fails
// likewise. Buffers kept for reuse are given back first. 0 removes the
// bound. It returns the budget before.
//
// Intermediates count as the backend reports them where it does (webgpu),
// else as planned for the run (EstimateMemory's Intermediates: an upper
// bound where a backend fuses), planned when a program compiles under a
// budget: setting one drops the cached programs, so that the next runs
// compile and plan anew. A Capture recorded before the budget was set
// keeps its program, whose planned intermediates then count as none: set
// the budget before capturing.
func (d *Device) SetMemoryBudget(bytes uint64) (prev uint64) {
	d.lock()
	defer d.mu.Unlock()
	prev, d.budget = d.budget, bytes
	if prev == 0 && bytes > 0 {
		for c := &d.progs; c.head.next != &c.head; {
			c.evict(c.head.next)
		}
	}
	return prev
}

// MemoryHeld returns the bytes of device memory ag holds on d now: its
// values' buffers, the reuse pool's and the compiled programs' own (what
// SetMemoryBudget bounds, less a run's planned intermediates).
func (d *Device) MemoryHeld() uint64 {
	d.lock()
	defer d.mu.Unlock()
	return d.heldBytes()
}

// heldBytes is MemoryHeld with d.mu held.
func (d *Device) heldBytes() uint64 { return uint64(d.held + d.progs.bytes) }

// fitBudget fails when more bytes of new buffers, beside extra bytes of a
// run's intermediates, would take d past its budget, after giving back the
// pool's buffers and then the cached programs' (least recently used first;
// never keep, the run's own). Called with d.mu held.
func (d *Device) fitBudget(more, extra uint64, keep *progEntry) error {
	if d.budget == 0 {
		return nil
	}
	over := func() bool { return d.heldBytes()+more+extra > d.budget }
	if over() && d.pooled > 0 {
		d.flushPool()
	}
	for c := &d.progs; over() && c.bytes > 0; {
		e := c.head.prev
		if e == keep {
			e = e.prev
		}
		if e == &c.head {
			break
		}
		c.evict(e)
	}
	if held := d.heldBytes(); held+more+extra > d.budget {
		return fmt.Errorf("%s of new buffers and %s of intermediates, with %s held, would pass the memory budget of %s on %s (Device.SetMemoryBudget)",
			bytesText(more), bytesText(extra), bytesText(held), bytesText(d.budget), d.caps.Name)
	}
	return nil
}

// runFitsBudget checks a run before it allocates or runs: the outputs the
// pool cannot serve and the program's planned intermediates must fit the
// budget. Called with d.mu held.
func (d *Device) runFitsBudget(lw *lowering, e *progEntry) error {
	if d.budget == 0 {
		return nil
	}
	var need uint64
	have := map[int]int{} // pool buffers by length, as allocOutputs takes them
	for _, t := range lw.kept {
		n := t.Len()
		if have[n] < len(d.pool[n]) {
			have[n]++
			continue
		}
		need += 4 * uint64(n)
	}
	err := d.fitBudget(need, e.planned, e)
	if err != nil && e.cached && e.refs == 1 {
		// the refused run's program, compiled for it, holds memory too
		d.progs.evict(e)
	}
	return err
}
