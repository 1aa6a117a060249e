package core

import (
	"errors"
	"fmt"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// ErrNotKept is returned when reading a tensor whose value was computed by an
// earlier run and not kept (see Tensor.Keep). Lazy execution plans the memory
// of intermediates; only values someone asked for outlive the run.
var ErrNotKept = errors.New("value was not kept")

// ErrReleased is returned when a released tensor is used.
var ErrReleased = errors.New("tensor was released")

// state of a tensor's value.
type state uint8

const (
	statePending  state = iota // recorded, not yet run
	stateRealized              // value in storage (device buffer or host)
	stateSpent                 // computed by a run and not kept
	stateReleased              // released by the user
)

// Tensor is a handle to an f32 value of up to 4 dimensions, row-major, on a
// Device: either a realized value (device memory, or host memory while the
// device is closed) or a pending node of the device's lazy graph.
//
// Tensors are created by Device.Tensor, Device.Param, Device.Zeros and the op
// functions of this package. They are not safe for concurrent mutation, like
// the Device they belong to.
type Tensor struct {
	dev   *Device
	shape []int
	st    state
	stor  *storage // realized value

	// recipe (pending, or kept for a backward still to come)
	op     backend.Op
	inputs []*Tensor
	attr   backend.Node // scalar/axis/perm/trans attributes of op
	pass   profile.Pass // forward, backward or update (for the profiler)
	seq    int          // position in the device's pending list

	requiresGrad bool
	param        bool // persistent leaf owned by the user (Param)
	keep         bool // keep the value after the run that computes it
	backwarded   bool // Backward already went through this node
	grad         *Tensor
}

// Shape returns a copy of the tensor's dimensions.
func (t *Tensor) Shape() []int { return append([]int(nil), t.shape...) }

// Dim returns dimension i (negative counts from the end).
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Rank is the number of dimensions (0 for a scalar).
func (t *Tensor) Rank() int { return len(t.shape) }

// Len is the number of elements.
func (t *Tensor) Len() int { return backend.NumElems(t.shape) }

// Device returns the device the tensor lives on.
func (t *Tensor) Device() *Device { return t.dev }

// RequiresGrad reports whether Backward computes a gradient for t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// Op returns the name of the op that produced t ("arg" for data, "param" for
// parameters).
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
	where := map[state]string{statePending: "pending", stateRealized: "realized", stateSpent: "spent", stateReleased: "released"}[t.st]
	return fmt.Sprintf("Tensor%v %s (%s)", t.shape, t.Op(), where)
}

// Keep asks that t's value outlive the run that computes it, so it can be
// read (Data) or used by later ops after that run. Without asking, a run
// keeps its results (values that no other pending op consumes), the values
// passed to Data, Item or Device.Sync, gradients, and the values a Backward
// still to come needs; it plans away the memory of the other intermediates.
// Keep returns t.
func (t *Tensor) Keep() *Tensor {
	t.keep = true
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
func (t *Tensor) Grad() *Tensor { return t.grad }

// ZeroGrad drops the accumulated gradient (the next Backward starts afresh)
// and gives its device memory back for reuse at once.
func (t *Tensor) ZeroGrad() {
	g := t.grad
	if g == nil {
		return
	}
	t.grad = nil
	d := g.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case g.st == statePending:
		g.keep = false
	case g.st == stateRealized && g.stor != nil && !d.readers(g):
		d.dropStorage(g.stor, true)
		g.stor = nil
		g.st = stateReleased
	}
}

// OnDevice reports whether t's value is in device memory now (false for a
// pending value, and for a value on the host: data not yet used by a run, or
// moved there by Device.Close).
func (t *Tensor) OnDevice() bool {
	t.dev.mu.Lock()
	defer t.dev.mu.Unlock()
	return t.st == stateRealized && t.stor != nil && t.stor.buf != nil
}

// Release frees the tensor's device memory now instead of at garbage
// collection. Pending work that reads t runs first. Using t afterwards is an
// error (ErrReleased).
func (t *Tensor) Release() error {
	if t.st == stateReleased {
		return nil
	}
	d := t.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.st == statePending || d.readers(t) {
		if err := d.syncLocked(nil, "Release"); err != nil {
			return err
		}
	}
	if t.stor != nil {
		d.dropStorage(t.stor, !t.param && t.op != backend.OpInvalid)
		t.stor = nil
	}
	t.st = stateReleased
	t.inputs = nil
	t.grad = nil
	return nil
}

// check panics with a clear message when t cannot be an op input.
func (t *Tensor) check(op string, i int) {
	switch t.st {
	case stateSpent:
		panic(fmt.Sprintf("core.%s: input %d (%v) was computed by an earlier run and not kept: call Keep() on it before that run", op, i, t))
	case stateReleased:
		panic(fmt.Sprintf("core.%s: input %d (%v) was released", op, i, t))
	}
}
