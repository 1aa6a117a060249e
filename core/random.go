package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// # Random numbers
//
// Every Device has a counter-based generator, Philox4x32-10 (see
// backend/philox.go): a draw of n values takes the next ceil(n/4) blocks of
// the device's stream, and each value is a pure function of the seed and
// its block, computed on the device. So:
//
//   - the same seed and the same draws (shapes, in the same order) give the
//     same uniform numbers bit for bit on every backend (cpu, webgpu,
//     ggml-cpu, ggml-vulkan, the browser);
//   - they do so whatever the syncs in between: lazily, eagerly or in a
//     Capture, draw k of the stream is the same numbers;
//   - a replayed Capture draws new numbers: the program reads the stream's
//     position from a small device tensor (the generator's state) that core
//     writes before each run and each replay (32 bytes), and the replay
//     advances the stream by what the recording drew, as if the recorded
//     function had been called again.
//
// A new device starts at DefaultSeed; Device.Seed restarts the stream.
// Normal values come from Box-Muller on the device's log, sqrt and cos,
// whose last bits differ between backends: Normal agrees across backends
// within 2e-5*(1+|z|) (see NormalTolerance), not bit for bit.

// DefaultSeed is the seed of a new Device: runs are reproducible unless a
// program seeds otherwise (for instance from the time).
const DefaultSeed uint64 = 0x5eed_a9_0000_0001

// NormalTolerance bounds the difference between two backends' Normal values
// for the same seed and draws: |a - b| <= NormalTolerance*(1+|a|). Uniform
// values agree exactly. Measured over 2^20 values: at most 1.8e-6 between
// webgpu, ggml-vulkan (both lavapipe), cpu and ggml-cpu; the bound leaves
// 10x for GPUs' log and cos.
const NormalTolerance = 2e-5

// rng is a device's generator: its key, the counter its state tensor holds
// for the next run, and the state tensor (made at the first draw).
type rng struct {
	key   uint64
	base  uint64
	state *Tensor
}

// Seed restarts the device's random stream at seed: the draws after it are
// those of a new device seeded alike. It is a sync point (pending work,
// whose draws belong to the old stream, runs first), so it may not be
// called inside a Capture's function.
func (d *Device) Seed(seed uint64) error {
	d.lock()
	defer d.mu.Unlock()
	if err := d.syncLocked(nil, "Seed"); err != nil {
		return fmt.Errorf("core: Device.Seed(%d): %w", seed, err)
	}
	d.rng.key, d.rng.base = seed, 0
	return nil
}

// rngState returns the generator's state tensor, making it on first use: a
// persistent value of backend.RandStateLen floats that only core writes.
// Called with d.mu held.
func (d *Device) rngState() *Tensor {
	if d.rng.state == nil {
		t := &Tensor{dev: d, shape: []int{backend.RandStateLen}, param: true}
		t.setState(stateRealized)
		t.stor = d.newStorage(t, backend.RandState(d.rng.key, d.rng.base), backend.RandStateLen)
		t.stor.madeInCapture = false // core rewrites it before every run: a replay may read it
		d.rng.state = t
	}
	return d.rng.state
}

// writeRNG stores the key and the stream position in the state tensor, for
// the run about to start. Called with d.mu held.
func (d *Device) writeRNG() error {
	s := d.rngState().stor
	v := backend.RandState(d.rng.key, d.rng.base)
	if s.buf == nil {
		s.host = v // uploaded by the run's lowering
		return nil
	}
	if err := d.be.Write(s.buf, 0, v); err != nil {
		return fmt.Errorf("writing the random generator's state: %w", err)
	}
	d.count(true, len(v), "rng state")
	return nil
}

// randBlocks is the Philox blocks a draw of shape takes.
func randBlocks(shape []int) uint64 { return uint64(backend.NumElems(shape)+3) / 4 }

// RandUniform returns a tensor of shape filled on the device with uniform
// numbers in [0, 1): multiples of 2^-24, the same bits on every backend for
// the same seed and draws (see Device.Seed). It carries no gradient.
func (d *Device) RandUniform(shape ...int) *Tensor {
	return d.randUniform("RandUniform", shape)
}

func (d *Device) randUniform(fn string, shape []int) *Tensor {
	if d == nil {
		panic(fmt.Sprintf("core.%s: nil device", fn))
	}
	checkShape(fn, shape)
	d.lock()
	st := d.rngState()
	d.mu.Unlock()
	// Node.Start, the draw's place in the stream, is set when the run is
	// lowered (see lower): in recording order, whatever the goroutines.
	return d.recordGrad(fn, backend.OpRandUniform, slices.Clone(shape), attrs{}, false, st)
}

// Uniform returns a tensor of shape with values drawn uniformly from
// [lo, hi): RandUniform scaled, u*(hi-lo) + lo (one affine op, so it may
// round to hi itself for some lo, hi; for lo = 0, hi = 1 it is exact).
// It panics unless lo <= hi, both finite.
func Uniform(d *Device, lo, hi float32, shape ...int) *Tensor {
	if !(lo <= hi) || math.IsInf(float64(hi-lo), 0) {
		panic(fmt.Sprintf("core.Uniform: bounds [%g, %g) are not finite and ordered", lo, hi))
	}
	u := d.randUniform("Uniform", shape)
	if lo == 0 && hi == 1 {
		return u
	}
	defer d.composite("Uniform")()
	return Affine(u, hi-lo, lo)
}

// Normal returns a tensor of shape with values drawn from the normal
// distribution of mean and standard deviation std, by Box-Muller on the
// device: z = sqrt(-2 ln(1-u1)) * cos(2 pi u2 - pi) from two uniform draws
// of the shape (1-u1 is in (0, 1], so the log is finite, and for small u1
// it is a series, see expOne; the angle stays in [-pi, pi), where GPU
// cosines are accurate). Backends agree within
// NormalTolerance (their log, sqrt and cos differ in the last bits). It
// panics on a negative or non-finite std.
func Normal(d *Device, mean, std float32, shape ...int) *Tensor {
	if !(std >= 0) || math.IsInf(float64(std), 0) || math.IsNaN(float64(mean)) || math.IsInf(float64(mean), 0) {
		panic(fmt.Sprintf("core.Normal: mean %g, std %g: want a finite mean and a finite std >= 0", mean, std))
	}
	u1 := d.randUniform("Normal", shape)
	u2 := d.randUniform("Normal", shape)
	defer d.composite("Normal")()
	r := Sqrt(Scale(expOne(u1), 2))
	z := Mul(r, Cos(Affine(u2, 2*math.Pi, -math.Pi)))
	if mean == 0 && std == 1 {
		return z
	}
	return Affine(z, std, mean)
}

// expOne is -ln(1-u) for u in [0, 1): an exponential variate. Below 2^-7
// it is the series u + u^2/2 + u^3/3 + u^4/4 (error below u^5/5), elsewhere
// the device's log: a GPU's log of a value near 1 is off by about an ulp of
// 1, which for -ln(1-u) ~ u is a large relative error, and Box-Muller's
// sqrt would carry it into z (3.5e-5 between lavapipe and cpu before). Both
// branches are finite, so the 0/1 masks mix them exactly.
func expOne(u *Tensor) *Tensor {
	logPart := Neg(Log(Affine(u, -1, 1))) // 1-u >= 2^-24: finite
	t := Affine(u, 0.25, 1.0/3)
	t = Affine(Mul(u, t), 1, 0.5)
	t = Affine(Mul(u, t), 1, 1)
	series := Mul(u, t)
	m := inside(u, -1, 1.0/128)
	return Add(Mul(m, series), Mul(Affine(m, -1, 1), logPart))
}

// Dropout zeroes each element of x with probability p and scales the kept
// ones by 1/(1-p), so the expectation is x (inverted dropout, as PyTorch's
// in training). The mask is drawn on the device (no host transfer) and the
// gradient flows through the same mask: dx = mask/(1-p) * dy. p = 0 returns
// x itself; p = 1 gives zeros. It panics unless 0 <= p <= 1.
func Dropout(x *Tensor, p float32) *Tensor {
	needTensors("Dropout", x)
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("core.Dropout: probability %g outside [0, 1]", p))
	}
	if p == 0 {
		return x
	}
	d := x.dev
	u := d.randUniform("Dropout", x.shape)
	defer d.composite("Dropout")()
	if p == 1 {
		return Mul(x, inside(u, 2, 3)) // all zero, NaN*0 staying NaN as a product does
	}
	// keep where u >= p (the kept share is 1-p for every p that is a
	// multiple of 2^-24): one composite op of the IR, see composite_dropout.go
	return d.record("Dropout", backend.OpDropout, slices.Clone(x.shape), attrs{A: p}, x, u)
}
