package core

import (
	"time"

	"github.com/ag-go/ag/core/internal/goid"
	"github.com/ag-go/ag/profile"
)

// Concurrency. A Device is safe for concurrent use: every call takes its
// lock, so calls from several goroutines are serialized and each sees the
// device between two others. What spans calls belongs to one goroutine:
//
//   - NoGrad's function and Backward turn gradient recording off, and
//     Backward and the optimizers' updates label new nodes for the profiler,
//     only for ops the same goroutine records; other goroutines go on
//     recording (with gradients) in the meantime.
//   - A Capture's recording is exclusive: it records whatever is pending on
//     the device, so while it runs, other goroutines' calls on the device
//     wait until it ends.
//
// Work recorded by several goroutines shares one pending graph, and a sync
// from any goroutine runs all of it. The values other goroutines recorded
// are kept by such a run (they may still be inputs of ops those goroutines
// record next), so a goroutine never finds its values spent by another's
// sync. A failed run drops all pending work, every goroutine's.

// gmode is what a goroutine inside NoGrad, Backward or an optimizer update
// records with.
type gmode struct {
	noGrad int
	// createGraph: Grad records a gradient that is differentiable itself
	// (GradOptions.CreateGraph), so composites' gradient ops are recorded
	// as their decompositions (see Device.recordGrad).
	createGraph bool
	pass        profile.Pass
	// timed: the time since mark (the mode's start or its last op) is the
	// create time of the next op: a Backward's walk between the ops it
	// records belongs to making them.
	timed bool
	mark  time.Time
	// user names the public op the recorded nodes belong to ("GELUErf" for
	// the nodes of its composite, "MatMul" for the nodes of MatMul's
	// gradient); "" means each node's own function. scope is the layer path
	// ("0.Linear"). Both reach the profiler.
	user, scope string
	// callOpen: the next node recorded under user begins a call of it (a
	// composite entered, a gradient begun); that node takes it (see push).
	// opened: this mode's composite named the call (see composite), and
	// last is the call's last node so far, marked its tail when the
	// composite returns.
	callOpen, opened bool
	last             *Tensor
}

// lock takes the device lock, waiting while another goroutine records a
// Capture. Every public entry point takes the lock through it.
func (d *Device) lock() {
	d.mu.Lock()
	if d.recOwner == 0 {
		return
	}
	me := goid.Get()
	for d.recOwner != 0 && d.recOwner != me {
		d.recDone.Wait()
	}
}

// modeStack is a goroutine's current mode and the ones its nested
// changes will restore.
type modeStack struct {
	cur   gmode
	saved []gmode
}

// modeOf returns the recording mode of the calling goroutine: gradient
// recording on or off, and the profiler pass of new nodes. Called with d.mu
// held; free of goroutine lookups while no goroutine is in a mode.
func (d *Device) modeOf(g uintptr) *gmode {
	if len(d.modes) == 0 {
		return nil
	}
	// One goroutine records a step's ops, mostly inside a mode (Backward,
	// a layer's Scope): the last one found answers without the map, whose
	// lookup at every op was a fiftieth of a lazy step.
	if d.lastMode != nil && d.lastModeG == g {
		return &d.lastMode.cur
	}
	if st := d.modes[g]; st != nil {
		d.lastModeG, d.lastMode = g, st
		return &st.cur
	}
	return nil
}

// withMode changes the calling goroutine's mode by set, until restore is
// called (on the same goroutine); it returns the mode, which only this
// goroutine reads and writes while the change lasts. Modes nest: each
// change pushes the mode it replaces. restore is one func made at Open,
// not a closure per call: layers and composites change modes at every op
// they record, and those closures were a sixth of a lazy step's
// allocations.
func (d *Device) withMode(set func(m *gmode)) (m *gmode, restore func()) {
	g := goid.Get()
	d.lock()
	if d.modes == nil {
		d.modes = map[uintptr]*modeStack{}
	}
	st := d.modes[g]
	if st == nil {
		// the stack the last goroutine to leave its modes left behind
		if st = d.spareMode; st != nil {
			d.spareMode = nil
		} else {
			st = &modeStack{}
		}
		st.cur = gmode{pass: profile.PassForward}
		d.modes[g] = st
	}
	st.saved = append(st.saved, st.cur)
	set(&st.cur)
	d.mu.Unlock()
	return &st.cur, d.popMode
}

// restoreMode undoes the calling goroutine's latest withMode (Device.popMode
// is this method's value).
func (d *Device) restoreMode() {
	g := goid.Get()
	d.lock()
	defer d.mu.Unlock()
	st := d.modes[g]
	if st == nil || len(st.saved) == 0 {
		panic("core: internal: a mode restored that was not entered on this goroutine")
	}
	inner := st.cur
	st.cur = st.saved[len(st.saved)-1]
	st.saved = st.saved[:len(st.saved)-1]
	if inner.timed && st.cur.timed {
		// The inner mode's ops were charged the time up to its mark: the
		// outer's next op starts from there, not from the outer's older
		// mark, which counted a composite's ops twice (a Backward whose
		// gradients call composites attributed more than its wall time).
		st.cur.mark = inner.mark
	}
	if st.cur.user != "" {
		// The inner mode went on the outer's call (an inner composite
		// keeps the outer's name): a node it recorded took the call.
		st.cur.callOpen, st.cur.last = inner.callOpen, inner.last
	} else if inner.opened && inner.last != nil {
		inner.last.callTail = true // the composite's call ends here
	}
	if len(st.saved) == 0 {
		delete(d.modes, g)
		if d.lastMode == st {
			d.lastMode = nil
		}
		d.spareMode = st
	}
}

// enterMode turns gradient recording off for the calling goroutine and, when
// setPass, labels its new nodes with pass, until the returned func restores
// the previous mode. A timed mode charges the time between the ops it
// records to their create time.
func (d *Device) enterMode(pass profile.Pass, setPass, timed bool) (restore func()) {
	_, restore = d.withMode(func(m *gmode) {
		m.noGrad++
		if setPass {
			m.pass = pass
		}
		if timed {
			m.timed, m.mark = true, time.Now()
		}
	})
	return restore
}

// composite names the nodes a composite op records after it (the
// outermost composite wins: GELUErf's Erf is GELUErf), until restore.
func (d *Device) composite(fn string) (restore func()) {
	_, restore = d.withMode(func(m *gmode) {
		if m.user == "" {
			m.user, m.callOpen, m.opened, m.last = fn, true, true, nil
		}
		timeBetween(m)
	})
	return restore
}

// timeBetween makes m timed, from now, when profiling: inside a layer's
// Scope or a composite the host time between ops is ag's (or the layer's)
// work of making them - the shape checks, the Tensors allocated, the mode
// changes - which the op's own recording did not time, so that a small
// model's forward was mostly unattributed. A mode timed already (a
// Backward's) keeps its mark.
func timeBetween(m *gmode) {
	if !m.timed && profiling() {
		m.timed, m.mark = true, time.Now()
	}
}

// Composite runs f with the ops this goroutine records on d reported in
// profiles as one op named name (their IR ops one level down): a composite
// op of your own, or a loss. Inside another composite the outer name wins.
func (d *Device) Composite(name string, f func()) {
	defer d.composite(name)()
	f()
}

// Scope runs f with the ops this goroutine records on d labelled with the
// layer name (nested scopes join with "."), so that profiles group time by
// layer as well as by op. nn's layers call it; a model of your own can too.
func (d *Device) Scope(name string, f func()) {
	_, restore := d.withMode(func(m *gmode) {
		if m.scope == "" {
			m.scope = name
		} else {
			m.scope += "." + name
		}
		timeBetween(m)
	})
	defer restore()
	f()
}

// UpdatePass runs f, an optimizer's step, with the ops this goroutine
// records on d in the update pass of profiles and gradient recording off.
// With profiling on, the host time between those ops (the
// hyperparameters, a schedule, the loop over the parameters) is their
// create time, as a Backward's walk is the backward's: outside it, only
// the recording of each op was timed, and a small model's step left most
// of its update unattributed. nn's optimizers call it; an optimizer of
// your own can too.
func (d *Device) UpdatePass(f func()) {
	defer d.enterMode(profile.PassUpdate, true, profiling())()
	f()
}

// NoGrad runs f with gradient recording off for the ops this goroutine
// records on this device: they build no backward recipe and keep no values
// for one (inference, evaluation). Other goroutines are not affected.
func (d *Device) NoGrad(f func()) {
	defer d.enterMode(0, false, false)()
	f()
}
