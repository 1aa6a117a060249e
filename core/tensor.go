package core

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// ErrNotKept is returned when reading a tensor whose value was computed by an
// earlier run and not kept (see Tensor.Keep). Lazy execution plans the memory
// of intermediates; only values someone asked for outlive the run.
var ErrNotKept = errors.New("value was not kept")

// ErrReleased is returned when a released tensor is used.
var ErrReleased = errors.New("tensor was released")

// ErrRunFailed is wrapped by the errors of values whose run failed: a sync
// that fails (out of memory, a compile error, a lost device) drops the work it
// was running and reports the failure once; the values that work would have
// computed read as this error (together with the original one) ever after.
// Values computed before the failure - parameters, optimizer state, buffers,
// earlier results - are untouched, so training can go on.
var ErrRunFailed = errors.New("value was dropped because the run that would compute it failed")

// state of a tensor's value.
type state uint32

const (
	statePending  state = iota // recorded, not yet run
	stateRealized              // value in storage (device buffer or host)
	stateSpent                 // computed by a run and not kept
	stateReleased              // released by the user
	stateFailed                // dropped by a failed run (Tensor.err says why)
)

var stateNames = [...]string{statePending: "pending", stateRealized: "realized", stateSpent: "spent", stateReleased: "released", stateFailed: "failed"}

// Tensor is a handle to an f32 value of up to backend.MaxRank (6) dimensions,
// row-major, on a Device: either a realized value (device memory, or host
// memory while the device is closed) or a pending node of the device's lazy
// graph. Ranks 5 and 6 run on every backend as nodes of rank 4 at most
// (plan.Expand lowers them).
//
// Tensors are created by Device.Tensor, Device.Param, Device.Zeros and the op
// functions of this package. Like their Device, they are safe for concurrent
// use: every method takes the device's lock.
type Tensor struct {
	dev   *Device
	shape []int    // never changes
	stor  *storage // realized value
	x     *extra   // fields few tensors use (see extra)

	// recipe (pending, or kept for a backward still to come)
	inputs []*Tensor
	// in holds inputs of up to two: most nodes have one or two, and a
	// slice of its own per node was a quarter of a lazy step's
	// allocations (BenchmarkStepHost).
	in    [2]*Tensor // cleared with inputs (dropInputs)
	attr  attrs      // scalar/axis/perm/trans attributes of op
	seq   int        // position in the device's pending list
	g     uintptr    // the goroutine that recorded it (goid)
	user  string     // the public op that recorded it, for profiles
	scope string     // the layer it was recorded in (Device.Scope)
	grad  *Tensor
	// keepSet's marks: equal to the device's markGen when the last
	// keepSet found t consumed by a pending node (kept: to outlive the run).
	// topo marks the nodes it visited in consumedGen too, with a
	// generation of its own.
	consumedGen, keptGen uint64

	// The small fields together, so that they share a word: a Tensor
	// is made per op per step.
	st           atomic.Uint32
	op           backend.Op
	pass         profile.Pass // forward, backward or update (for the profiler)
	requiresGrad bool
	param        bool // persistent leaf owned by the user (Param)
	// trainable: made by Param, so SetRequiresGrad may turn its gradient
	// off and on (Zeros' leaves are persistent too, and never train)
	trainable bool
	// gradLive: in the last topo, a leaf that requires grad now is
	// reachable through t (read only where consumedGen says t was visited)
	gradLive   bool
	keep       bool // keep the value after the run that computes it
	backwarded bool // Backward already went through this node
	recomputed bool // a Checkpoint's copy, made by Backward
	// callHead and callTail: the first and last node of a call (a user's
	// MSELoss of several nodes is one call), in its pass. Profiles count
	// calls by the head; a Backward, walking back, counts the gradient of
	// a call from its tail until its head (see Backward).
	callHead, callTail bool
	// gather, on an unpack recorded by HalfTable.Gather: its inputs are a
	// 16-bit table's words and the indices, lowered as a get_rows of the
	// words that the unpack reads (gatherNode), so words never make a Tensor.
	gather bool
}

// extra holds the Tensor fields few tensors use, apart: most tensors are a
// lazy step's, made every step, and their size is most of its allocation.
type extra struct {
	err       error       // why a failed value was dropped
	ckpt      *segment    // Checkpoint's: Backward differentiates a recomputed copy
	sameDraw  *Tensor     // a recomputed draw: the numbers of this earlier one
	constData []float32   // a Constant's values (never written)
	inverse   *inverseMap // Gather's gradient by these constant indices
	custom    *custom     // Custom's: Backward calls the user's gradient
}

// more returns t's extra fields, made on first use, to be set.
func (t *Tensor) more() *extra {
	if t.x == nil {
		t.x = &extra{}
	}
	return t.x
}

// failure is why t was dropped by a failed run (nil if it was not).
func (t *Tensor) failure() error {
	if t.x == nil {
		return nil
	}
	return t.x.err
}

// ckptSeg is the Checkpoint segment t ends, or nil.
func (t *Tensor) ckptSeg() *segment {
	if t.x == nil {
		return nil
	}
	return t.x.ckpt
}

// recomputedFrom is the draw whose numbers t, a recomputed draw, repeats.
func (t *Tensor) recomputedFrom() *Tensor {
	if t.x == nil {
		return nil
	}
	return t.x.sameDraw
}

// constValues are a Constant's values, or nil for any other tensor.
func (t *Tensor) constValues() []float32 {
	if t.x == nil {
		return nil
	}
	return t.x.constData
}

// gatherInverse is the cached inverse of t's indices (see Gather), or nil.
func (t *Tensor) gatherInverse() *inverseMap {
	if t.x == nil {
		return nil
	}
	return t.x.inverse
}

// attrs are the attributes of a recorded op: backend.Node's fields less
// those the lowering fills (op, inputs, shape, arg). A Tensor holds them
// for every op, so they are kept small: a lazy step makes a few hundred
// Tensors, and their bytes were most of its allocation.
type attrs struct {
	A, B float32
	// int32: an axis is below backend.MaxRank, and with the flags it fills
	// the word after A and B
	Axis           int32
	TransA, TransB bool
	Start          int
	Perm           []int
}

// node returns a's fields as a backend.Node's, for the lowering to fill.
func (a attrs) node() backend.Node {
	return backend.Node{A: a.A, B: a.B, Axis: int(a.Axis), Start: a.Start, Perm: a.Perm, TransA: a.TransA, TransB: a.TransB}
}

// state is atomic because String reads it without the device lock (it is
// called while formatting messages, with or without the lock held).
func (t *Tensor) state() state     { return state(t.st.Load()) }
func (t *Tensor) setState(s state) { t.st.Store(uint32(s)) }

// Shape returns a copy of the tensor's dimensions.
func (t *Tensor) Shape() []int { return append([]int(nil), t.shape...) }

// Dim returns dimension i (negative counts from the end). It panics, naming
// the shape, when i is out of range.
func (t *Tensor) Dim(i int) int {
	j := i
	if j < 0 {
		j += len(t.shape)
	}
	if j < 0 || j >= len(t.shape) {
		panic(fmt.Sprintf("core.Tensor.Dim: dimension %d of shape %v", i, t.shape))
	}
	return t.shape[j]
}

// Rank is the number of dimensions (0 for a scalar).
func (t *Tensor) Rank() int { return len(t.shape) }

// Len is the number of elements.
func (t *Tensor) Len() int { return backend.NumElems(t.shape) }

// Device returns the device the tensor lives on.
func (t *Tensor) Device() *Device { return t.dev }

// RequiresGrad reports whether Backward computes a gradient for t.
func (t *Tensor) RequiresGrad() bool {
	t.dev.lock()
	defer t.dev.mu.Unlock()
	return t.requiresGrad
}

// SetRequiresGrad turns the gradient of a parameter (Device.Param) off -
// freezing it, as PyTorch's requires_grad_(False) - or on again, and
// returns t. A frozen parameter still takes part in the forward, but
// Backward computes no gradient for it: the backward records no node for it
// nor for any value whose gradient could only reach frozen parameters, and
// the forward keeps nothing for it (ops recorded after freezing carry no
// gradient; a graph recorded before is pruned by Backward). Thawing counts
// for the ops recorded after it. Freezing drops the gradient it had, so
// Grad is nil and the optimizers, which update the parameters that have a
// gradient, leave it as it is. A Capture recorded under the other setting
// records again.
//
// It panics for any other tensor: only a parameter's gradient can be
// switched (use Detach to cut the gradient through a value).
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	d := t.dev
	d.lock()
	if !t.trainable {
		d.mu.Unlock()
		panic(fmt.Sprintf("core.Tensor.SetRequiresGrad: %v is not a parameter (Device.Param): only a parameter's gradient is switched; Detach cuts the gradient through a value", t))
	}
	if t.requiresGrad == on {
		d.mu.Unlock()
		return t
	}
	t.requiresGrad = on
	d.mu.Unlock()
	if !on {
		t.ZeroGrad()
	}
	return t
}

// IsParam reports whether t was made by Device.Param, frozen or not (see
// SetRequiresGrad).
func (t *Tensor) IsParam() bool { return t.trainable }

// Detach returns a new tensor of t's value through which no gradient flows,
// as PyTorch's detach: ops on it are constants to Backward, and t's own
// gradient is unchanged. It is a view of t (no copy, no kernel), pending
// like any op's result: read it after the run only if it is kept (see Keep).
func (t *Tensor) Detach() *Tensor {
	needTensors("Detach", t)
	return detach("Detach", t)
}

// WithGrad returns a view of t (no copy, no kernel) that requires grad, so
// that Grad can differentiate with respect to it: a gradient penalty's
// input, as PyTorch's x.requires_grad_() before torch.autograd.grad. It is
// not a parameter: Backward gives it no Grad, and stops there unless t
// itself requires grad. Inside NoGrad it is t's plain view.
func (t *Tensor) WithGrad() *Tensor {
	needTensors("WithGrad", t)
	// requiring grad before push, which keeps that outside NoGrad: an eager
	// run then keeps the view's graph, as a lazy one does
	return t.dev.push(&Tensor{op: backend.OpReshape, requiresGrad: true}, t.shape, "WithGrad", false, t)
}

// Op returns the name of the op that produced t ("data" for data, "param"
// for parameters).
func (t *Tensor) Op() string {
	switch {
	case t.param:
		return "param"
	case t.op == backend.OpInvalid || t.op == backend.OpArg:
		return "data"
	}
	return t.op.String()
}

// String describes the tensor without syncing, e.g. `Tensor[64 1024] relu (pending)`.
func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	return fmt.Sprintf("Tensor%v %s (%s)", t.shape, t.Op(), stateNames[t.state()])
}

// Keep asks that t's value outlive the run that computes it, so it can be
// read (Data) or used by later ops after that run. Without asking, a run
// keeps its results (values that no other pending op consumes), the values
// passed to Data, Item or Device.Sync, gradients, and the values a Backward
// still to come needs; it plans away the memory of the other intermediates.
// A kept value holds device memory until it is garbage collected: in a
// training loop, read it or Release it each step, so the next step's value
// takes the same buffer (see the package doc). Keep returns t.
func (t *Tensor) Keep() *Tensor {
	t.dev.lock()
	t.keep = true
	t.dev.mu.Unlock()
	return t
}

// Data returns the tensor's values. It is a sync point: pending work on the
// device runs first.
func (t *Tensor) Data() ([]float32, error) {
	return t.dev.syncRead(t, "Data")
}

// Item returns the value of a one-element tensor. It is a sync point.
func (t *Tensor) Item() (float32, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("core: Item of a tensor of shape %v (%d elements, want 1)", t.shape, t.Len())
	}
	v, err := t.Data()
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// Grad returns the gradient accumulated by Backward, or nil when there is
// none. The gradient is a tensor of t's shape; reading it is a sync point.
// After a failed run the gradient is the one from before that run's Backward.
func (t *Tensor) Grad() *Tensor {
	t.dev.lock()
	defer t.dev.mu.Unlock()
	return t.grad
}

// ZeroGrad drops the accumulated gradient (the next Backward starts afresh)
// and gives its device memory back for reuse at once.
func (t *Tensor) ZeroGrad() {
	d := t.dev
	d.lock()
	defer d.mu.Unlock()
	g := t.grad
	if g == nil {
		return
	}
	t.grad = nil
	switch {
	case g.state() == statePending:
		g.keep = false
	case g.state() == stateRealized && g.stor != nil && !d.readers(g):
		d.dropStorage(g.stor, true)
		g.stor = nil
		g.setState(stateReleased)
	}
}

// OnDevice reports whether t's value is in device memory now (false for a
// pending value, and for a value on the host: data not yet used by a run,
// a small value made for one step once that step is done (see the package
// doc), or a value moved there by Device.Close).
func (t *Tensor) OnDevice() bool {
	t.dev.lock()
	defer t.dev.mu.Unlock()
	return t.state() == stateRealized && t.stor != nil && t.stor.buf != nil
}

// Release frees the tensor's device memory now instead of at garbage
// collection. Pending work that reads t runs first. Using t afterwards is an
// error (ErrReleased).
func (t *Tensor) Release() error {
	d := t.dev
	d.lock()
	defer d.mu.Unlock()
	if t.state() == stateReleased {
		return nil
	}
	if t.state() == statePending || d.readers(t) {
		if err := d.syncLocked(nil, "Release"); err != nil {
			return err
		}
	}
	if t.stor != nil {
		d.dropStorage(t.stor, !t.param && t.op != backend.OpInvalid)
		t.stor = nil
	}
	t.setState(stateReleased)
	t.dropInputs()
	t.grad = nil
	return nil
}

// check panics with a clear message when t cannot be an op input. Called
// with the device lock held. A failed input is not a programming error: the
// sync that lowers it returns the failure.
func (t *Tensor) check(op string, i int) {
	switch t.state() {
	case stateSpent:
		panic(fmt.Sprintf("core.%s: input %d (%v) was computed by an earlier run and not kept: call Keep() on it before that run", op, i, t))
	case stateReleased:
		panic(fmt.Sprintf("core.%s: input %d (%v) was released", op, i, t))
	}
}

// dropInputs lets t's recipe go: its inputs slice and the array that may
// back it, which would otherwise keep the ancestors alive.
func (t *Tensor) dropInputs() {
	t.inputs = nil
	t.in = [2]*Tensor{}
	if t.x != nil {
		t.x.custom = nil // a Custom's inputs are its recipe too
	}
}
