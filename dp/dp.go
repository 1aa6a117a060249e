// Package dp trains one model data-parallel on several devices of one
// process (ggmlR's dp_train): a replica of the model on each device, each
// step's global batch split into one shard per replica, the replicas'
// gradients averaged, and the same update made on every replica. The result
// is single-device training on the global batch within float tolerance
// (TestEquivalence checks it).
//
// # How a step runs
//
//  1. The global batch (every input's first dimension) is split into
//     len(devices) shards, in order, of sizes differing by at most one.
//  2. Every replica runs forward and backward on its shard, concurrently
//     (one goroutine per device; a core.Device serves one program at a
//     time, separate devices run at once). Lazily, or with Options.Capture
//     as one recorded and replayed program (core.Capture).
//  3. The gradients are read to the host and averaged there, each shard's
//     weighted by its share of the batch (n_i/B: the loss is a mean over the
//     rows, so the weighted average is the gradient of the global mean),
//     summed in float64 in replica order, so the average is the same bits
//     at every step of every run. It is written back to every replica.
//  4. Every replica runs its optimizer's update on that same gradient
//     (lazily, or captured), so each keeps its own optimizer state and no
//     parameter crosses the bus.
//
// The reduction goes through the host and never device to device: ag's
// backends share no memory (a Vulkan buffer of one device, a WebGPU buffer,
// a Go slice of the cpu backend), so any collective between them is a read,
// a sum and a write anyway; a device-side all-reduce would need one backend
// on both ends and peer memory, which none of ag's backends exposes. Its
// cost is one read and one write of every gradient per replica per step.
//
// # Replicas stay equal
//
// Replica 0's parameters are copied to the others at New. Replicas on
// devices of the same backend (and the same kind of GPU) then stay equal
// bit for bit: they update the same parameters with the same gradient by
// the same kernels. Replicas on different backends may round the update
// differently in the last bit of f32, and drift (cpu and ggml-cpu or
// ggml-vulkan by 2-3e-8 in the 12 Adam steps of TestMixedBackends; cpu and
// webgpu agreed there bit for bit): Options.ResyncEvery copies replica 0's
// parameters, buffers and optimizer state to the others every n steps
// (every 100 by default when the backends differ), and Resync does it on
// demand. Divergence measures the drift.
//
// # What is not the single-device step
//
// A loss must be a mean over its batch's rows (MSELoss, CrossEntropy
// without ignored labels): the shard weights make a mean of means. A sum
// over rows, or a mean over a varying count of rows (ignored labels), is not
// weighted right.
//
// BatchNorm normalizes each shard by that shard's statistics and updates
// each replica's running statistics from its own shards, as PyTorch's
// DistributedDataParallel does without SyncBatchNorm: with BatchNorm a step
// equals single-device gradient accumulation over the same shards, not the
// single-device step on the global batch (TestBatchNorm checks that).
// Resync copies replica 0's running statistics to the others, as DDP's
// broadcast_buffers does at every step; Model(0) holds the ones to save.
//
// Dropout and other random draws take each device's own stream
// (core.Device.Seed), so the masks differ from the single-device ones.
//
// # Past one host
//
// dp reduces within one process. Past one host, use an existing
// collective engine, not a home-made all-reduce ring (whose chunking,
// rendezvous and failure handling a user outgrowing one machine should not
// have to trust): Open MPI (Debian's
// libopenmpi-dev) through a maintained cgo binding such as
// github.com/sbromberger/gompi, whose Allreduce of float32 slices takes the
// place of step 3, launched with mpirun, one process per host (each running
// dp over its own devices). MPI brings tested all-reduce algorithms,
// InfiniBand through UCX and multi-host launch; NCCL, the usual choice with
// PyTorch, works on CUDA memory only, which ag's backends do not use. The
// host round trip MPI needs is the one dp already makes.
package dp

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Options tune a Trainer.
type Options struct {
	// Capture records each replica's forward+backward, and its update,
	// once per shard shape (core.Capture) and replays them: one upload of
	// the shard and one program per phase, as nn.CaptureStep.
	Capture bool
	// MaxGradNorm clips the averaged gradient to a global L2 norm of at
	// most this when > 0, on the host where the gradient is anyway, as
	// nn.ClipGradNorm (PyTorch's clip_grad_norm_): scaled by
	// MaxGradNorm/(norm+1e-6) when that is below 1. A NaN or infinite norm
	// makes Step return nn.ErrNonFiniteNorm before any replica is updated.
	MaxGradNorm float32
	// ResyncEvery copies replica 0's parameters, buffers and optimizer
	// state to the other replicas after every n steps. 0 is the default:
	// every 100 steps when the devices' backends differ (their updates
	// round differently), never when they are the same backend (the
	// replicas stay equal bit for bit). Negative: never.
	ResyncEvery int
}

// defaultResync is ResyncEvery's default across backends: a drift of
// about 1e-8 per ten updates (TestMixedBackends) stays far below training
// noise for 100, and a resync costs a read and a write of the parameters
// and the optimizer state, so it is not worth making often.
const defaultResync = 100

// Trainer trains replicas of a model of type M on several devices, one
// global batch per Step. Its methods may not be called concurrently.
type Trainer[M nn.Module] struct {
	reps   []*replica[M]
	loss   func(m M, in []*core.Tensor) *core.Tensor
	opts   Options
	resync int // the effective ResyncEvery
	steps  int
	broken error // set when the replicas could not be made equal again
	avg    [][]float32
	norm   float64
}

type replica[M nn.Module] struct {
	dev    *core.Device
	model  M
	opt    nn.Optimizer
	params []*core.Tensor
	fb     *core.Capture // forward+backward (Options.Capture)
	upd    *core.Capture // the update (Options.Capture)
}

// New makes a Trainer with one replica per device: model(dev) builds each
// replica's model, opt(params) its optimizer over those parameters (e.g.
// nn.NewAdam(params, 1e-3)), and loss(m, in) the mean loss of replica m on
// the shard in (Step's inputs, each cut to the shard's rows). Replica 0's
// parameters are copied to the others. The devices must be distinct; the
// models must have the same parameter shapes, in the same order.
func New[M nn.Module](devs []*core.Device, model func(dev *core.Device) M, opt func(params []*core.Tensor) nn.Optimizer, loss func(m M, in []*core.Tensor) *core.Tensor, o Options) (*Trainer[M], error) {
	if len(devs) == 0 {
		return nil, errors.New("dp.New: no devices")
	}
	if m := float64(o.MaxGradNorm); math.IsNaN(m) || math.IsInf(m, 0) || m < 0 {
		return nil, fmt.Errorf("dp.New: Options.MaxGradNorm %v, want a finite value (> 0 clips, 0 does not)", o.MaxGradNorm)
	}
	if model == nil || opt == nil || loss == nil {
		return nil, fmt.Errorf("dp.New: nil argument (model %t, opt %t, loss %t)", model == nil, opt == nil, loss == nil)
	}
	for i, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("dp.New: device %d is nil", i)
		}
		if j := slices.Index(devs[:i], d); j >= 0 {
			return nil, fmt.Errorf("dp.New: devices %d and %d are the same device %v: open one per replica", j, i, d.Name())
		}
	}
	t := &Trainer[M]{loss: loss, opts: o, resync: o.ResyncEvery}
	if t.resync == 0 {
		t.resync = -1
		for _, d := range devs[1:] {
			if d.Name() != devs[0].Name() {
				t.resync = defaultResync
			}
		}
	}
	for i, d := range devs {
		m := model(d)
		ps := m.Params()
		if len(ps) == 0 {
			return nil, fmt.Errorf("dp.New: replica %d's model has no parameters", i)
		}
		for j, p := range ps {
			if p.Device() != d {
				return nil, fmt.Errorf("dp.New: replica %d's parameter %d is on %v, not on its device %v: build the model on the device model is given", i, j, p.Device().Name(), d.Name())
			}
		}
		r := &replica[M]{dev: d, model: m, params: ps, opt: opt(ps)}
		if r.opt == nil {
			return nil, fmt.Errorf("dp.New: opt returned nil for replica %d", i)
		}
		if i > 0 {
			if err := sameShapes(t.reps[0], r, i); err != nil {
				return nil, err
			}
		}
		t.reps = append(t.reps, r)
	}
	if o.Capture {
		for _, r := range t.reps {
			r.capture(loss, t.reduces())
		}
	}
	if err := t.copyFrom("dp.New", 0, false); err != nil {
		return nil, err
	}
	return t, nil
}

// sameShapes checks that replica r (number i) has replica r0's parameters
// and buffers, by count and shape.
func sameShapes[M nn.Module](r0, r *replica[M], i int) error {
	if len(r.params) != len(r0.params) {
		return fmt.Errorf("dp.New: replica %d's model has %d parameters, replica 0's %d: model must build the same model on every device", i, len(r.params), len(r0.params))
	}
	for j, p := range r.params {
		if !slices.Equal(p.Shape(), r0.params[j].Shape()) {
			return fmt.Errorf("dp.New: parameter %d has shape %v on replica %d, %v on replica 0: model must build the same model on every device", j, p.Shape(), i, r0.params[j].Shape())
		}
	}
	b0, b := nn.Buffers(r0.model), nn.Buffers(r.model)
	if len(b) != len(b0) {
		return fmt.Errorf("dp.New: replica %d's model has %d buffers, replica 0's %d", i, len(b), len(b0))
	}
	for j, x := range b {
		if !slices.Equal(x.Shape(), b0[j].Shape()) {
			return fmt.Errorf("dp.New: buffer %d has shape %v on replica %d, %v on replica 0", j, x.Shape(), i, b0[j].Shape())
		}
	}
	return nil
}

// capture makes r's two captures: forward+backward returning the loss
// (and, with grads, the gradients, in parameter order: one download for
// all), and the update reading the hyperparameters as its one input.
func (r *replica[M]) capture(loss func(m M, in []*core.Tensor) *core.Tensor, grads bool) {
	r.fb = core.NewCapture(r.dev, func(in []*core.Tensor) []*core.Tensor {
		r.opt.ZeroGrad()
		l := loss(r.model, in)
		checkLoss(l)
		if err := l.Backward(); err != nil {
			panic(err)
		}
		out := []*core.Tensor{l}
		for _, p := range r.params {
			if g := p.Grad(); g != nil && grads {
				out = append(out, g)
			}
		}
		return out
	})
	r.upd = core.NewCapture(r.dev, func(in []*core.Tensor) []*core.Tensor {
		var err error
		r.dev.UpdatePass(func() { err = r.opt.Update(in[0], nil) })
		if err != nil {
			panic(err)
		}
		return []*core.Tensor{in[0]} // a capture has outputs: the smallest at hand
	})
}

func checkLoss(l *core.Tensor) {
	if l == nil || l.Len() != 1 {
		var shape []int
		if l != nil {
			shape = l.Shape()
		}
		panic(fmt.Sprintf("dp: the loss has shape %v, want one element (the mean over the shard)", shape))
	}
}

// Len is the number of replicas.
func (t *Trainer[M]) Len() int { return len(t.reps) }

// Model returns replica i's model (replica 0's is the one to save or
// evaluate).
func (t *Trainer[M]) Model(i int) M { return t.reps[i].model }

// Optimizer returns replica i's optimizer.
func (t *Trainer[M]) Optimizer(i int) nn.Optimizer { return t.reps[i].opt }

// Device returns replica i's device.
func (t *Trainer[M]) Device(i int) *core.Device { return t.reps[i].dev }

// Shards returns the row counts Step gives the replicas for a global batch
// of b rows: b/n each, the first b%n one more.
func Shards(b, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = b / n
		if i < b%n {
			out[i]++
		}
	}
	return out
}

// Step runs one training step on the global batch in (every input's first
// dimension is the batch) and returns the global mean loss (the shards'
// losses weighted by their shares). On an error before the update, no
// replica was updated; if the update failed on some replicas only, they
// are given the parameters and optimizer state of one that updated (the
// error says so), so the replicas are equal whenever Step returns.
func (t *Trainer[M]) Step(in ...core.Input) (float32, error) {
	const fn = "dp.Trainer.Step"
	if t.broken != nil {
		return 0, fmt.Errorf("%s: the replicas differ since an earlier failure (%v): call Resync", fn, t.broken)
	}
	n := len(t.reps)
	shards, err := split(fn, in, n)
	if err != nil {
		return 0, err
	}
	var b int
	for _, s := range shards {
		b += s.rows
	}
	// One replica's gradient is the average already (its weight is 1):
	// nothing to move, unless it is clipped.
	reduce := t.reduces()
	// 2: forward and backward on every replica at once.
	losses := make([]float32, n)
	grads := make([][][]float32, n)
	if err := t.each(fn, "forward and backward (no replica was updated)", func(i int, r *replica[M]) (err error) {
		losses[i], grads[i], err = r.forwardBackward(t.loss, shards[i].in, reduce)
		return err
	}); err != nil {
		return 0, err
	}
	// 3: the weighted average, in float64, in replica order.
	var loss float64
	for i, s := range shards {
		loss += float64(losses[i]) * float64(s.rows) / float64(b)
	}
	if reduce {
		avg, err := average(fn, grads, shards, b, t.avg)
		if err != nil {
			return 0, err
		}
		t.avg = avg // reused next step: WriteAt copies it
		if t.opts.MaxGradNorm > 0 {
			if err := t.clip(fn, avg); err != nil {
				return float32(loss), err
			}
		}
		if err := t.each(fn, "writing the averaged gradient (no replica was updated)", func(i int, r *replica[M]) error {
			return r.writeGrads(avg)
		}); err != nil {
			return 0, err
		}
	}
	// 4: the same update everywhere.
	done := make([]bool, n)
	uerr := t.each(fn, "update", func(i int, r *replica[M]) error {
		err := r.update()
		done[i] = err == nil
		return err
	})
	if uerr != nil {
		src := slices.Index(done, true)
		if src < 0 {
			return 0, fmt.Errorf("%w; no replica was updated", uerr)
		}
		if err := t.copyFrom(fn, src, true); err != nil {
			t.broken = err
			return 0, fmt.Errorf("%w; giving the other replicas replica %d's update failed too, so they differ: %w", uerr, src, err)
		}
		t.steps++
		return float32(loss), fmt.Errorf("%w; the step was made on replica %d and copied to the others, which are equal again", uerr, src)
	}
	t.steps++
	if t.resync > 0 && t.steps%t.resync == 0 {
		if err := t.Resync(); err != nil {
			return float32(loss), err
		}
	}
	return float32(loss), nil
}

// clip scales avg to a global norm of at most MaxGradNorm (see Options).
func (t *Trainer[M]) clip(fn string, avg [][]float32) error {
	var ss float64
	for _, a := range avg {
		for _, v := range a {
			ss += float64(v) * float64(v)
		}
	}
	t.norm = math.Sqrt(ss)
	if math.IsNaN(t.norm) || math.IsInf(t.norm, 0) {
		return fmt.Errorf("%s: %w (%v); no replica was updated", fn, nn.ErrNonFiniteNorm, t.norm)
	}
	c := float64(t.opts.MaxGradNorm) / (t.norm + 1e-6)
	if c >= 1 {
		return nil
	}
	for _, a := range avg {
		for k, v := range a {
			a[k] = float32(float64(v) * c)
		}
	}
	return nil
}

// GradNorm is the global L2 norm of the last step's averaged gradient,
// before clipping (with Options.MaxGradNorm only; 0 otherwise).
func (t *Trainer[M]) GradNorm() float64 { return t.norm }

// reduces reports whether Step reads and averages the gradients: always
// but for one replica without clipping.
func (t *Trainer[M]) reduces() bool { return len(t.reps) > 1 || t.opts.MaxGradNorm > 0 }

// shard is one replica's part of a global batch.
type shard struct {
	rows int
	in   []core.Input
}

// split cuts every input into n shards along its first dimension.
func split(fn string, in []core.Input, n int) ([]shard, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%s: no inputs", fn)
	}
	b := -1
	for i, x := range in {
		if len(x.Shape) == 0 {
			return nil, fmt.Errorf("%s: input %d is a scalar: every input needs the batch as its first dimension", fn, i)
		}
		if got := prod(x.Shape); got != len(x.Data) {
			return nil, fmt.Errorf("%s: input %d has %d values for shape %v", fn, i, len(x.Data), x.Shape)
		}
		if b < 0 {
			b = x.Shape[0]
		} else if x.Shape[0] != b {
			return nil, fmt.Errorf("%s: input %d has a batch of %d rows, input 0 of %d: the inputs must share the first dimension", fn, i, x.Shape[0], b)
		}
	}
	if b < n {
		return nil, fmt.Errorf("%s: a global batch of %d rows cannot be split over %d devices: give at least one row per device", fn, b, n)
	}
	out := make([]shard, n)
	start := 0
	for i, rows := range Shards(b, n) {
		out[i].rows = rows
		for _, x := range in {
			row := prod(x.Shape[1:])
			shape := append([]int{rows}, x.Shape[1:]...)
			out[i].in = append(out[i].in, core.In(x.Data[start*row:(start+rows)*row], shape...))
		}
		start += rows
	}
	return out, nil
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// each runs f on every replica concurrently and returns the error of the
// lowest-numbered replica that failed, naming the phase and the replica.
func (t *Trainer[M]) each(fn, phase string, f func(i int, r *replica[M]) error) error {
	errs := make([]error, len(t.reps))
	var wg sync.WaitGroup
	for i, r := range t.reps {
		wg.Go(func() { errs[i] = f(i, r) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %s failed on replica %d (%v): %w", fn, phase, i, t.reps[i].dev.Name(), err)
		}
	}
	return nil
}

// forwardBackward computes r's loss and gradients on its shard and reads
// the gradients when read is set (nil for a parameter without one).
func (r *replica[M]) forwardBackward(loss func(m M, in []*core.Tensor) *core.Tensor, in []core.Input, read bool) (l float32, grads [][]float32, err error) {
	if r.fb != nil {
		out, err := r.fb.Call(in...)
		if err != nil {
			return 0, nil, err
		}
		if !read {
			return out[0][0], nil, nil
		}
		// the gradients came in the same download, in parameter order (a
		// parameter frozen or thawed since made the capture record again)
		grads = make([][]float32, len(r.params))
		k := 1
		for j, p := range r.params {
			if p.Grad() == nil {
				continue
			}
			if k == len(out) {
				return 0, nil, fmt.Errorf("the captured step gave %d gradients, and parameter %d has one too", len(out)-1, j)
			}
			grads[j] = out[k]
			k++
		}
		if k != len(out) {
			return 0, nil, fmt.Errorf("the captured step gave %d gradients for %d parameters with one", len(out)-1, k-1)
		}
		return out[0][0], grads, nil
	}
	l, err = r.lazyForwardBackward(loss, in)
	if err != nil {
		return 0, nil, err
	}
	if !read {
		return l, nil, nil
	}
	grads = make([][]float32, len(r.params))
	for j, p := range r.params {
		g := p.Grad()
		if g == nil {
			continue
		}
		if grads[j], err = g.Data(); err != nil {
			return 0, nil, fmt.Errorf("reading the gradient of parameter %d: %w", j, err)
		}
	}
	return l, grads, nil
}

func (r *replica[M]) lazyForwardBackward(loss func(m M, in []*core.Tensor) *core.Tensor, in []core.Input) (l float32, err error) {
	defer func() { // a shape mistake in loss panics, as every op does; here it is this replica's error
		if p := recover(); p != nil {
			err = fmt.Errorf("the loss panicked: %v", p)
		}
	}()
	r.opt.ZeroGrad()
	ts := make([]*core.Tensor, len(in))
	for k, x := range in {
		ts[k] = r.dev.Tensor(x.Data, x.Shape...)
	}
	lt := loss(r.model, ts)
	checkLoss(lt)
	if err := lt.Backward(); err != nil {
		return 0, err
	}
	return lt.Item()
}

// average is the gradients' weighted mean, rows_i/b each, summed in
// float64 in replica order (so each element's bits are the same whatever
// the chunking), in chunks spread over GOMAXPROCS goroutines, written into
// avg's slices where they fit (the last step's). Every replica must have
// the same gradients.
func average(fn string, grads [][][]float32, shards []shard, b int, avg [][]float32) ([][]float32, error) {
	w := make([]float64, len(shards))
	for i, s := range shards {
		w[i] = float64(s.rows) / float64(b)
	}
	if len(avg) != len(grads[0]) {
		avg = make([][]float32, len(grads[0]))
	}
	type chunk struct{ j, lo, hi int }
	var work []chunk
	for j := range avg {
		for i := range grads {
			if (grads[i][j] == nil) != (grads[0][j] == nil) {
				return nil, fmt.Errorf("%s: parameter %d has a gradient on replica %d and none on replica %d: freeze it on every replica or on none (no replica was updated)", fn, j, nonNil(grads, j, true), nonNil(grads, j, false))
			}
		}
		if grads[0][j] == nil {
			avg[j] = nil
			continue
		}
		n := len(grads[0][j])
		if len(avg[j]) != n {
			avg[j] = make([]float32, n)
		}
		for lo := 0; lo < n; lo += reduceChunk {
			work = append(work, chunk{j, lo, min(lo+reduceChunk, n)})
		}
	}
	sum := func(c chunk) {
		a := avg[c.j][c.lo:c.hi]
		for k := range a {
			var s float64
			for i, g := range grads {
				s += w[i] * float64(g[c.j][c.lo+k])
			}
			a[k] = float32(s)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(work))
	if workers <= 1 {
		for _, c := range work {
			sum(c)
		}
		return avg, nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := next.Add(1) - 1; c < int64(len(work)); c = next.Add(1) - 1 {
				sum(work[c])
			}
		})
	}
	wg.Wait()
	return avg, nil
}

// reduceChunk is the elements one goroutine of average sums at a time.
const reduceChunk = 64 << 10

// nonNil is the first replica whose gradient j is nil (has is false) or
// not (has is true).
func nonNil(grads [][][]float32, j int, has bool) int {
	for i := range grads {
		if (grads[i][j] != nil) == has {
			return i
		}
	}
	return -1
}

func (r *replica[M]) writeGrads(avg [][]float32) error {
	for j, a := range avg {
		if a == nil {
			continue
		}
		if err := r.params[j].Grad().WriteAt(0, a); err != nil {
			return fmt.Errorf("writing the gradient of parameter %d: %w", j, err)
		}
	}
	return nil
}

// update runs r's optimizer update on the gradients it holds.
func (r *replica[M]) update() error {
	if r.upd == nil {
		if err := r.opt.Step(); err != nil {
			return err
		}
		return r.dev.Sync(r.params...)
	}
	next := r.opt.StepCount() + 1
	h := r.opt.Hyper(next)
	if err := r.upd.Run(core.In(h, len(h))); err != nil {
		return err
	}
	r.opt.SetStepCount(next)
	return nil
}

// Resync copies replica 0's parameters, buffers (BatchNorm's running
// statistics), optimizer state and step count to the other replicas,
// making them equal to it bit for bit. After an error a later Resync may
// be called again.
func (t *Trainer[M]) Resync() error {
	if err := t.copyFrom("dp.Trainer.Resync", 0, true); err != nil {
		t.broken = err
		return err
	}
	t.broken = nil
	return nil
}

// copyFrom copies replica src's parameters and buffers (and, with
// optState, its optimizer state and step count) to the other replicas.
func (t *Trainer[M]) copyFrom(fn string, src int, optState bool) error {
	from := t.reps[src]
	vals, err := t.stateOf(from, optState)
	if err != nil {
		return fmt.Errorf("%s: reading replica %d (%v): %w", fn, src, from.dev.Name(), err)
	}
	return t.each(fn, fmt.Sprintf("copying replica %d's state", src), func(i int, r *replica[M]) error {
		if i == src {
			return nil
		}
		ts, err := stateTensors(r, optState)
		if err != nil {
			return err
		}
		if len(ts) != len(vals) {
			return fmt.Errorf("%d state tensors, replica %d has %d", len(ts), src, len(vals))
		}
		for k, x := range ts {
			if err := x.WriteAt(0, vals[k]); err != nil {
				return err
			}
		}
		if optState {
			r.opt.SetStepCount(from.opt.StepCount())
		}
		return nil
	})
}

func (t *Trainer[M]) stateOf(r *replica[M], optState bool) ([][]float32, error) {
	ts, err := stateTensors(r, optState)
	if err != nil {
		return nil, err
	}
	vals := make([][]float32, len(ts))
	for k, x := range ts {
		if vals[k], err = x.Data(); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// stateTensors lists r's parameters, buffers and (with optState, when its
// optimizer is an nn.Checkpointer) optimizer state.
func stateTensors[M nn.Module](r *replica[M], optState bool) ([]*core.Tensor, error) {
	ts := append(slices.Clip(r.params), nn.Buffers(r.model)...)
	if !optState {
		return ts, nil
	}
	o := r.opt
	if s, ok := o.(*nn.Scheduled); ok {
		o = s.Optimizer
	}
	if c, ok := o.(nn.Checkpointer); ok {
		st, err := c.State()
		if err != nil {
			return nil, err
		}
		ts = append(ts, st...)
	}
	return ts, nil
}

// Divergence is the largest absolute difference between a parameter of
// replica 0 and the same parameter of another replica (0 while they are
// equal; NaN where one is NaN and the other not).
func (t *Trainer[M]) Divergence() (float64, error) {
	base := make([][]float32, len(t.reps[0].params))
	for j, p := range t.reps[0].params {
		v, err := p.Data()
		if err != nil {
			return 0, fmt.Errorf("dp.Trainer.Divergence: replica 0: %w", err)
		}
		base[j] = v
	}
	var d float64
	for i, r := range t.reps[1:] {
		for j, p := range r.params {
			v, err := p.Data()
			if err != nil {
				return 0, fmt.Errorf("dp.Trainer.Divergence: replica %d: %w", i+1, err)
			}
			for k, x := range v {
				y := base[j][k]
				if math.IsNaN(float64(x)) != math.IsNaN(float64(y)) {
					return math.NaN(), nil
				}
				if x != y { // equal infinities are equal
					d = max(d, math.Abs(float64(x)-float64(y)))
				}
			}
		}
	}
	return d, nil
}
