package core

import (
	"testing"

	"github.com/ag-go/ag/backend"
)

// countingBackend counts allocations of more than one value and reports a memory size of its own.
type countingBackend struct {
	backend.Backend
	allocs int
	total  uint64
}

func (c *countingBackend) Alloc(n int) (backend.Buffer, error) {
	if n > 1 {
		c.allocs++ // (the loss, one value, is new each step until collected)
	}
	return c.Backend.Alloc(n)
}

func (c *countingBackend) Memory() (free, total uint64, err error) { return c.total, c.total, nil }

// lazyStep returns a lazy training step of a small two-layer model whose
// gradients (16 KiB and 2 KiB) are new values at every step.
func lazyStep(t *testing.T, dev *Device) func() {
	w1 := dev.Param(make([]float32, 64*64), 64, 64)
	w2 := dev.Param(make([]float32, 64*8), 64, 8)
	x := dev.Full(0.5, 16, 64).Keep()
	return func() {
		w1.ZeroGrad()
		w2.ZeroGrad()
		loss := Sum(MatMul(Tanh(MatMul(x, w1)), w2))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := loss.Data(); err != nil {
			t.Fatal(err)
		}
	}
}

// The pool of freed buffers scales with the device (a large model's
// gradients must fit, or every lazy step allocates them anew), and a lazy
// step reuses every buffer of the step before.
func TestPoolReusesStepBuffers(t *testing.T) {
	dev := open(t)
	cb := &countingBackend{Backend: dev.be, total: 16 << 30}
	dev.lock()
	dev.be = cb
	got := dev.poolBytes()
	dev.mu.Unlock()
	if got != 2<<30 {
		t.Errorf("pool bound on a 16 GiB device %d, want 2 GiB (1/%d)", got, poolShare)
	}
	step := lazyStep(t, dev)
	step()
	step()
	before := cb.allocs
	for range 3 {
		step()
	}
	if cb.allocs != before {
		t.Errorf("%d allocations of gradients in 3 lazy steps after the first two, want 0 (the pool's buffers)", cb.allocs-before)
	}
}

// unknownMemory is a backend whose memory cannot be queried (WebGPU on a
// hardware GPU).
type unknownMemory struct{ countingBackend }

func (u *unknownMemory) Memory() (free, total uint64, err error) {
	return 0, 0, backend.ErrMemoryUnknown
}

// Where the device's memory is unknown the pool's bound grows to the runs'
// outputs: a step keeping more than minPoolBytes (shrunk here to 4 KiB)
// still reuses its buffers at the next step.
func TestPoolGrowsWithRunsOnUnknownMemory(t *testing.T) {
	dev := open(t)
	um := &unknownMemory{countingBackend{Backend: dev.be}}
	dev.lock()
	dev.be = um
	dev.poolMax = 0
	if dev.poolBytes(); !dev.poolAdapts {
		t.Fatal("poolAdapts false on a device whose memory is unknown")
	}
	dev.poolMax = 4 << 10 // below lazyStep's gradients
	dev.mu.Unlock()
	step := lazyStep(t, dev)
	step()
	step()
	before := um.allocs
	for range 3 {
		step()
	}
	if um.allocs != before {
		t.Errorf("%d allocations of gradients in 3 lazy steps after the first two, want 0 (pool bound %d bytes)", um.allocs-before, dev.poolMax)
	}
}
