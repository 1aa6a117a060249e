package gpu

import (
	"errors"
	"slices"
)

// Reads waited for later (Device.ReadLater), shared by both layers: each
// read copies into a staging buffer of its own, kept for the next reads
// once taken.

// ReadLater queues a read of len(dst) bytes of b at off behind the work
// submitted so far, into a staging buffer of its own (laterStage), and
// returns without waiting (the layer's startLater submits the copy); the
// read's await and finish take the bytes. A read larger than one staging
// chunk reads at once (nil).
func (d *dev) ReadLater(b *Buffer, off uint64, dst []byte) (PendingRead, error) {
	n := uint64(len(dst))
	if n > MaxStaging {
		return nil, d.Read(b, off, dst)
	}
	st, err := d.laterStage(n)
	if err != nil {
		return nil, err
	}
	r := &laterRead{laterBase: laterBase{d: d, st: st, n: n, dst: dst}}
	if err := d.startLater(b, off, r); err != nil {
		d.giveStage(st)
		return nil, err
	}
	d.later = append(d.later, r)
	return r, nil
}

// errReadClosed is a read's error when the device closed before its wait
// took the bytes.
var errReadClosed = errors.New("backend closed before the read finished")

// laterBase is what a read in flight holds in both layers.
type laterBase struct {
	d   *dev
	st  stageBuf // the copy's destination, given back or destroyed once taken
	n   uint64
	dst []byte
	// complete: the bytes are in dst (or err says why not), taken by its
	// wait or earlier (completeRead: too many in flight, a throttle, close)
	complete bool
	err      error
}

// Reads waited for later (ReadLater) each copy into a staging buffer of
// their own. maxLaterFree bounds those kept for the next reads; MaxLater
// the reads in flight: past it the oldest completes (its wait then returns
// what it took), so reads never waited for, against LaterReader's
// contract, hold a bounded number of staging buffers.
const (
	maxLaterFree = 64
	MaxLater     = 256
)

// stageSize is the size of a later read's staging buffer for n bytes.
func stageSize(n uint64) uint64 { return max((n+3)&^3, 256) }

// laterStage returns a staging buffer of at least n bytes for a later
// read: one given back, or a fresh one of stageSize(n) bytes. Past
// MaxLater reads in flight the oldest completes first.
func (d *dev) laterStage(n uint64) (stageBuf, error) {
	for len(d.later) >= MaxLater {
		d.completeRead(d.later[0])
	}
	if i := slices.IndexFunc(d.laterFree, func(s stageBuf) bool { return s.size >= n }); i >= 0 {
		st := d.laterFree[i]
		d.laterFree = slices.Delete(d.laterFree, i, i+1)
		return st, nil
	}
	return d.newStage(stageSize(n))
}

// giveStage keeps a staging buffer for the next later read, or destroys it.
func (d *dev) giveStage(st stageBuf) {
	if len(d.laterFree) < maxLaterFree {
		d.laterFree = append(d.laterFree, st)
		return
	}
	st.destroy()
}

// dropStages destroys the staging buffers kept (close).
func (d *dev) dropStages() {
	for _, st := range d.laterFree {
		st.destroy()
	}
	d.laterFree = nil
}
