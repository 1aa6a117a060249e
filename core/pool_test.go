package core

import (
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"weak"

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

// argsBackend records the buffers bound to every run.
type argsBackend struct {
	backend.Backend
	runs [][]backend.Buffer
}

func (a *argsBackend) Compile(g *backend.Graph) (backend.Program, error) {
	p, err := a.Backend.Compile(g)
	if err != nil {
		return nil, err
	}
	return argsProgram{p, a}, nil
}

type argsProgram struct {
	backend.Program
	a *argsBackend
}

func (p argsProgram) Run(args []backend.Buffer) (backend.RunInfo, error) {
	p.a.runs = append(p.a.runs, slices.Clone(args))
	return p.Program.Run(args)
}

// A lazy step whose batch and hyperparameters are new host data at every
// step, and whose loss is read with Item, runs on the same buffers at every
// step, with the garbage collector off: the small values made for one step
// go back to the host (see hostSmall), and each arg takes back its
// buffer from the pool (see getBufAt). (A backend that records a repeated run
// ahead needs this; webgpu's TestLazyStepRecordedAhead checks that one.)
func TestLazyStepKeepsItsBuffers(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dev := open(t)
	ab := &argsBackend{Backend: dev.be}
	dev.lock()
	dev.be = ab
	dev.mu.Unlock()
	w := dev.Param(make([]float32, 8*4), 8, 4)
	vel, err := dev.Zeros(8, 4)
	if err != nil {
		t.Fatal(err)
	}
	var last *Tensor
	var lastData []float32
	for step := range 7 {
		xs := make([]float32, 4*8)
		for i := range xs {
			xs[i] = float32((i+step)%5) - 2
		}
		// the batch is as large as w's gradient, a value that comes and
		// goes every step too: the gradient of the step before goes to
		// the pool at ZeroGrad, the batch at the end of its run
		w.ZeroGrad()
		x := dev.Tensor(xs, 4, 8)
		hp := dev.Tensor([]float32{0.1, 0.9, 0}, 3)
		loss := Sum(Tanh(MatMul(x, w)))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		SGDUpdate(w, w.Grad(), vel, hp)
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
		if x.OnDevice() || hp.OnDevice() || loss.OnDevice() {
			t.Fatalf("step %d: batch, hyperparameters, loss on the device: %t %t %t, want all on the host", step, x.OnDevice(), hp.OnDevice(), loss.OnDevice())
		}
		last, lastData = x, xs
	}
	for k := 2; k < len(ab.runs); k++ {
		if !slices.Equal(ab.runs[k], ab.runs[k-1]) {
			t.Fatalf("run %d bound other buffers than run %d: %v, then %v", k, k-1, ab.runs[k-1], ab.runs[k])
		}
	}
	if !w.OnDevice() || !vel.OnDevice() {
		t.Error("the parameter or its velocity left the device")
	}
	// A value lent to one run is uploaded again when used again, and
	// stays on the device from then on.
	up := dev.Stats().Uploads
	got, err := Sum(last).Item()
	if err != nil {
		t.Fatal(err)
	}
	var want float32
	for _, v := range lastData {
		want += v
	}
	if got != want {
		t.Errorf("sum of the last batch after it went back to the host: %v, want %v", got, want)
	}
	if !last.OnDevice() || dev.Stats().Uploads != up+1 {
		t.Errorf("a value used again: on the device %t, %d uploads, want true and 1", last.OnDevice(), dev.Stats().Uploads-up)
	}
}

// A small result read whole lives on the host after the read and reads
// the same as an input of a later run; a small input lent to one run reads
// the same when used again; an in-place update's state stays on the
// device even when it was made from host data (Tensor, not Zeros), so the
// update of the next step reads its new value.
func TestLentValuesUsedAgain(t *testing.T) {
	dev := open(t)
	a := dev.Tensor([]float32{1, 2, 3}, 3)
	b := Add(a, a)
	if v, err := b.Data(); err != nil || !slices.Equal(v, []float32{2, 4, 6}) {
		t.Fatalf("a+a = %v, %v", v, err)
	}
	if a.OnDevice() || b.OnDevice() {
		t.Errorf("after the read: a on the device %t, a+a %t, want false (small values made for one run)", a.OnDevice(), b.OnDevice())
	}
	c := Mul(a, b)
	if v, err := c.Data(); err != nil || !slices.Equal(v, []float32{2, 8, 18}) {
		t.Fatalf("a*(a+a) = %v, %v", v, err)
	}
	if !a.OnDevice() || !b.OnDevice() {
		t.Errorf("used twice: a on the device %t, a+a %t, want true", a.OnDevice(), b.OnDevice())
	}

	w := dev.Param([]float32{1, -2, 3, 0.5}, 4)
	vel := dev.Tensor(make([]float32, 4), 4) // host data as the velocity
	want := []float64{1, -2, 3, 0.5}
	wantVel := make([]float64, 4)
	for range 3 {
		w.ZeroGrad()
		loss := Sum(Mul(w, w))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		SGDUpdate(w, w.Grad(), vel, dev.Tensor([]float32{0.1, 0.9, 0}, 3))
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			wantVel[i] = 0.9*wantVel[i] + 2*want[i]
			want[i] -= 0.1 * wantVel[i]
		}
	}
	got, err := w.Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Fatalf("w after 3 SGD steps with momentum: %v, want %v", got, want)
		}
	}
	if !vel.OnDevice() {
		t.Error("the velocity, updated in place, went back to the host")
	}
}

// TestLastRunHoldsNoTensors checks that the device lets go of a run's
// tensors once the run is done: the lowering it keeps for the next run's
// maps and slices (see retire) is emptied, so that a value nobody holds is
// collected and its memory goes back without another run.
func TestLastRunHoldsNoTensors(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1, 2, 3, 4}, 4)
	step := func() (weak.Pointer[Tensor], weak.Pointer[Tensor]) {
		sq := Mul(w, w)
		loss := Sum(sq)
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
		return weak.Make(sq), weak.Make(loss)
	}
	for i := range 3 { // the second and third runs reuse the first's lowering
		w.ZeroGrad()
		sq, loss := step()
		runtime.GC()
		runtime.GC()
		if sq.Value() != nil || loss.Value() != nil {
			t.Fatalf("step %d: after a GC the device still holds the run's tensors (intermediate held %v, loss held %v)", i, sq.Value() != nil, loss.Value() != nil)
		}
	}
}

// Recording an op of one or two inputs allocates its Tensor and nothing
// else: the inputs live in the Tensor, and a shape an op computes is an
// input's or cut from the device's chunk (ownShape). A lazy step records
// every op again each step, so each allocation more is one per op per step.
func TestRecordingAllocatesOneTensor(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	dev := open(t)
	x := dev.Tensor(make([]float32, 4*8), 4, 8)
	w := dev.Param(make([]float32, 8*8), 8, 8)
	b := dev.Param(make([]float32, 8), 8)
	idx := dev.Tensor([]float32{0, 1, 2, 3}, 4)
	ops := []struct {
		name string
		f    func()
	}{
		{"Add (same shapes)", func() { Add(x, x) }},
		{"Add (broadcast bias)", func() { Add(x, b) }},
		{"MatMul", func() { MatMul(x, w) }},
		{"MatMulT", func() { MatMulT(w, x, false, true) }},
		{"Reshape", func() { Reshape(x, 32) }},
		{"SumAxis", func() { SumAxis(x, 0, true) }},
		{"Gather", func() { Gather(w, idx) }},
		{"Full", func() { dev.Full(1, 4, 8) }},
	}
	for _, op := range ops {
		// averaged over runs: the pending list and the shape chunk grow now and then
		if n := testing.AllocsPerRun(200, op.f); n > 1 {
			t.Errorf("%s: %v allocations per op, want 1 (its Tensor)", op.name, n)
		}
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// A value is registered (counted live, with a cleanup on its tensor) only
// once it holds a device buffer past the call that gave it one (see own):
// a lazy step's batch, hyperparameters and small loss go back to the host
// and are never registered, so with the collector off the live values do
// not grow with the steps; values that keep their buffers - a large read
// result, large data, a small one updated in place - are registered, and
// Close rescues them.
func TestOnlyValuesOnTheDeviceRegistered(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dev := open(t)
	w := dev.Param(make([]float32, 8*4), 8, 4)
	vel := dev.Tensor(make([]float32, 8*4), 8, 4) // host data as the velocity
	live := func() int {
		dev.lock()
		defer dev.mu.Unlock()
		return len(dev.live)
	}
	registered := func(x *Tensor) bool {
		dev.lock()
		defer dev.mu.Unlock()
		_, ok := dev.live[x.stor]
		return ok && x.stor.owned
	}
	var before int
	for step := range 6 {
		w.ZeroGrad()
		x := dev.Tensor(make([]float32, 4*8), 4, 8)
		loss := Sum(Tanh(MatMul(x, w)))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		SGDUpdate(w, w.Grad(), vel, dev.Tensor([]float32{0.1, 0.9, 0}, 3))
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
		if registered(x) || registered(loss) {
			t.Fatalf("step %d: batch registered %t, loss %t: want neither (on the host after the step)", step, registered(x), registered(loss))
		}
		if step == 1 {
			before = live()
		}
	}
	if n := live(); n != before {
		t.Errorf("live values %d after 4 more steps, %d before: want no growth", n, before)
	}
	if !registered(vel) || !registered(w) || !registered(w.Grad()) {
		t.Errorf("registered: velocity (updated in place) %t, parameter %t, gradient %t: want all", registered(vel), registered(w), registered(w.Grad()))
	}
	// lent to the run by its first reader, then updated in place by it
	w2, vel2 := dev.Param(make([]float32, 4), 4), dev.Tensor(make([]float32, 4), 4)
	sum := Sum(vel2)
	SGDUpdate(w2, dev.Full(1, 4), vel2, dev.Tensor([]float32{0.1, 0.9, 0}, 3))
	if err := dev.Sync(sum); err != nil {
		t.Fatal(err)
	}
	if !vel2.OnDevice() || !registered(vel2) {
		t.Errorf("a value lent to a run that updates it: on the device %t, registered %t: want both", vel2.OnDevice(), registered(vel2))
	}
	big := dev.Tensor(make([]float32, 2*hostSmall), 2*hostSmall)
	bigOut := Scale(big, 2)
	if _, err := bigOut.Data(); err != nil {
		t.Fatal(err)
	}
	if !registered(big) || !registered(bigOut) {
		t.Errorf("large values on the device: data registered %t, result read %t: want both", registered(big), registered(bigOut))
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if v, err := bigOut.Data(); err != nil || len(v) != 2*hostSmall {
		t.Errorf("a large result after Close: %d values, %v", len(v), err)
	}
}

// failingBackend's programs fail to run.
type failingBackend struct{ backend.Backend }

func (f failingBackend) Compile(g *backend.Graph) (backend.Program, error) {
	p, err := f.Backend.Compile(g)
	return failingProgram{p}, err
}

type failingProgram struct{ backend.Program }

func (failingProgram) Run([]backend.Buffer) (backend.RunInfo, error) {
	return backend.RunInfo{}, errors.New("lost device")
}

// A value lent to a run that fails keeps its buffer, and is registered
// (see own): its collection must free it.
func TestLentValueOfAFailedRunRegistered(t *testing.T) {
	dev := open(t)
	dev.lock()
	dev.be = failingBackend{dev.be}
	dev.mu.Unlock()
	x := dev.Tensor([]float32{1, 2, 3}, 3)
	if _, err := Sum(x).Item(); err == nil {
		t.Fatal("a run of a failing backend succeeded")
	}
	dev.lock()
	_, live := dev.live[x.stor]
	owned, held := x.stor.owned, x.stor.buf != nil
	dev.mu.Unlock()
	if held && (!live || !owned) {
		t.Errorf("a value lent to a failed run holds a buffer, registered: live %t, owned %t; want both", live, owned)
	}
}

// TestRealizedValueLetsItsInputsGo: a value a run computed, which no
// backward needs, holds none of its inputs, so a kept result does not keep
// its ancestors (and their device buffers) alive; nor does a failed or
// released one.
func TestRealizedValueLetsItsInputsGo(t *testing.T) {
	dev := open(t)
	x := dev.Tensor([]float32{1, 2, 3, 4}, 4)
	xx := Mul(x, x)
	y := Add(xx, x)
	if _, err := y.Data(); err != nil {
		t.Fatal(err)
	}
	z := Neg(y)
	z.Release()
	for _, c := range []struct {
		name string
		v    *Tensor
	}{{"a value read", y}, {"a released value", z}} {
		if c.v.inputs != nil || c.v.in != [2]*Tensor{} {
			t.Errorf("%s holds its inputs: %v, %v", c.name, c.v.inputs, c.v.in)
		}
	}
	weak := weak.Make(xx)
	xx = nil
	runtime.GC()
	runtime.GC()
	if weak.Value() != nil {
		t.Error("an intermediate is still reachable after its consumer ran")
	}
	runtime.KeepAlive(y)
}
