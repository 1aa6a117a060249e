package core

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ag-go/ag/backend"
)

// Later is a read asked of the device and not yet waited for
// (Tensor.ReadLater, Capture.CallLater, nn.StepCapture.StepLater). Wait
// returns the values as they were when the read was asked for: work
// submitted after it does not change them.
//
// A training loop that asks for step k's loss and waits for it a few steps
// later keeps the GPU busy meanwhile. That pays most in the browser, where
// a read waits a round trip to the GPU process (1-3 ms on a GPU, however
// small the step), and on native webgpu it hides the host's work on the
// next steps (a lazy step's recording and lowering) behind the device's.
// On the devices without Caps.LaterReads (the CPU backends, ggml) the
// values are read when asked for, and Wait only returns them.
type Later struct {
	fn    string
	mu    sync.Mutex
	wait  func() error // nil once waited for (or read at once)
	flat  []float32
	sizes []int // the outputs' lengths, in flat's order
	out   [][]float32
	err   error
}

// Ready returns a Later whose values are read already: for a Trainer whose
// step reads its loss at once but whose caller takes Laters.
func Ready(values ...[]float32) *Later {
	return &Later{fn: "Later", out: values}
}

// newLater is a read of flat's outputs (of the given lengths) that wait
// completes (nil: complete).
func newLater(fn string, flat []float32, sizes []int, wait func() error) *Later {
	l := &Later{fn: fn, flat: flat, sizes: sizes, wait: wait}
	if wait == nil {
		l.split()
	}
	return l
}

func (l *Later) split() { l.out = splitOutputs(l.flat, l.sizes) }

// splitOutputs cuts flat into outputs of the given lengths, in order.
func splitOutputs(flat []float32, sizes []int) [][]float32 {
	out := make([][]float32, len(sizes))
	off := 0
	for i, n := range sizes {
		out[i] = flat[off : off+n : off+n]
		off += n
	}
	return out
}

// Wait blocks until the read is done and returns the values, one slice
// per output (one for Tensor.ReadLater), or the error of the read or of
// the work before it (or of a nil Later). Calling it again returns the
// same. It is safe from any goroutine and holds no lock of the device
// while it waits.
func (l *Later) Wait() ([][]float32, error) {
	if l == nil { // a Trainer's StepLater that returned neither a Later nor an error
		return nil, errors.New("core: Wait of a nil *Later")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wait != nil {
		err := l.wait()
		l.wait = nil
		if err != nil {
			l.err = fmt.Errorf("core: %s: %w", l.fn, err)
		} else {
			l.split()
		}
	}
	return l.out, l.err
}

// Item is Wait for a read whose first output has one element (a loss):
// that element.
func (l *Later) Item() (float32, error) {
	out, err := l.Wait()
	if err != nil {
		return 0, err
	}
	if len(out) == 0 || len(out[0]) != 1 {
		n := 0
		if len(out) > 0 {
			n = len(out[0])
		}
		return 0, fmt.Errorf("core: Later.Item of %s: its first output has %d elements, want 1", l.fn, n)
	}
	return out[0][0], nil
}

// laterReader is the backend's LaterReader where its reads return before
// the values are in (Caps.LaterReads); elsewhere reads are taken when
// asked, by the paths Data and Call take (a read folded into its run).
func (d *Device) laterReader() (backend.LaterReader, bool) {
	lr, ok := d.be.(backend.LaterReader)
	return lr, ok && d.caps.LaterReads
}

// readLater starts the backend's read of len(dst) values of buf and counts
// the download (site names it). Only where laterReader holds: the callers
// checked under the same lock, and a reopened backend is the same driver's.
func (d *Device) readLater(buf backend.Buffer, dst []float32, site string) (func() error, error) {
	lr, ok := d.laterReader()
	if !ok {
		panic("core: internal: a read later on a backend that reads when asked")
	}
	wait, err := lr.ReadLater(buf, 0, dst)
	if err == nil {
		d.count(false, len(dst), site)
	}
	return wait, err
}

// ReadLater asks for the tensor's values and returns without waiting for
// them: pending work on the device runs first (it is a sync point, as
// Data), and the read is queued behind it. See Later.
func (t *Tensor) ReadLater() (*Later, error) {
	const fn = "Tensor.ReadLater"
	needTensors(fn, t)
	d := t.dev
	d.lock()
	if _, ok := d.laterReader(); !ok {
		// reads are taken when asked: Data's path (the read folded into the run)
		d.mu.Unlock()
		v, err := d.syncRead(t, fn)
		if err != nil {
			return nil, err
		}
		return newLater(fn, v, []int{len(v)}, nil), nil
	}
	defer d.mu.Unlock()
	// as syncRead: the run leaves t unregistered
	defer d.ownHeld(t)
	rec, err := d.run([]*Tensor{t}, fn, nil)
	if rec != nil {
		defer d.prof.run(rec)
	}
	if err != nil {
		return nil, err
	}
	if err := t.readable(fn); err != nil {
		return nil, err
	}
	t0 := time.Now()
	s := t.stor
	out := make([]float32, s.n)
	sizes := []int{s.n}
	if s.buf == nil {
		copy(out, s.host)
		return newLater(fn, out, sizes, nil), nil
	}
	wait, err := d.readLater(s.buf, out, fn)
	if err != nil {
		return nil, fmt.Errorf("core: %s of %v: %w", fn, t, err)
	}
	if rec != nil {
		rec.Download = time.Since(t0)
		rec.DownloadPass = t.pass
	}
	return newLater(fn, out, sizes, wait), nil
}
