package nn

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/core"
)

// Schedule gives the learning-rate factor of an update: t is the number of
// updates made before it (0 for the first), as PyTorch's schedulers count
// when stepped once per update. The factor multiplies the optimizer's own
// learning rate. A schedule is a pure function of t, so a training run
// resumed from a state file (which keeps the step count) continues it.
type Schedule func(t int) float64

// StepLR multiplies the rate by gamma every stepSize updates:
// gamma^floor(t/stepSize).
func StepLR(stepSize int, gamma float64) Schedule {
	if stepSize < 1 || !(gamma > 0) || math.IsInf(gamma, 0) {
		panic(fmt.Sprintf("nn.StepLR: step size %d, gamma %g: want >= 1 and a finite value > 0", stepSize, gamma))
	}
	return func(t int) float64 { return math.Pow(gamma, float64(t/stepSize)) }
}

// ExponentialLR multiplies the rate by gamma every update: gamma^t.
func ExponentialLR(gamma float64) Schedule {
	if !(gamma > 0) || math.IsInf(gamma, 0) {
		panic(fmt.Sprintf("nn.ExponentialLR: gamma %g, want a finite value > 0", gamma))
	}
	return func(t int) float64 { return math.Pow(gamma, float64(t)) }
}

func checkMinFactor(fn string, m float64) {
	if !(m >= 0 && m <= 1) {
		panic(fmt.Sprintf("nn.%s: min factor %g, want a value in [0, 1]", fn, m))
	}
}

func cosine(minFactor, frac float64) float64 {
	return minFactor + (1-minFactor)*(1+math.Cos(math.Pi*frac))/2
}

// CosineAnnealing decays the factor from 1 to minFactor along half a
// cosine over total updates, then stays at minFactor (PyTorch's
// CosineAnnealingLR with eta_min = minFactor*lr, without its rise after
// T_max).
func CosineAnnealing(total int, minFactor float64) Schedule {
	if total < 1 {
		panic(fmt.Sprintf("nn.CosineAnnealing: total %d, want >= 1", total))
	}
	checkMinFactor("CosineAnnealing", minFactor)
	return func(t int) float64 {
		if t >= total {
			return minFactor
		}
		return cosine(minFactor, float64(t)/float64(total))
	}
}

// CosineAnnealingWarmRestarts is SGDR (Loshchilov & Hutter), as PyTorch's
// scheduler of that name: a cosine from 1 to minFactor over a cycle of t0
// updates, restarting at 1; each cycle is tMult times longer than the one
// before. Its cost does not grow with t: a step count read from a state
// file may be any int.
func CosineAnnealingWarmRestarts(t0, tMult int, minFactor float64) Schedule {
	if t0 < 1 || tMult < 1 {
		panic(fmt.Sprintf("nn.CosineAnnealingWarmRestarts: t0 %d, tMult %d: want both >= 1", t0, tMult))
	}
	checkMinFactor("CosineAnnealingWarmRestarts", minFactor)
	if tMult == 1 {
		// One cycle per t0 updates: a loop over the cycles hung on 2^50.
		return func(t int) float64 { return cosine(minFactor, float64(t%t0)/float64(t0)) }
	}
	return func(t int) float64 {
		// Cycles grow geometrically, so this loop runs at most 63 times
		// (exact in integers, where PyTorch's logarithm rounds).
		cur, ti := t, t0
		for cur >= ti {
			cur -= ti
			if ti > math.MaxInt/tMult {
				// the next cycle is longer than any int: cur is inside it
				return cosine(minFactor, float64(cur)/(float64(ti)*float64(tMult)))
			}
			ti *= tMult
		}
		return cosine(minFactor, float64(cur)/float64(ti))
	}
}

// LinearWarmup raises the factor linearly from startFactor at the first
// update to 1 at update number steps, then holds 1 (PyTorch's LinearLR with
// end_factor 1).
func LinearWarmup(steps int, startFactor float64) Schedule {
	if steps < 1 || !(startFactor >= 0 && startFactor <= 1) {
		panic(fmt.Sprintf("nn.LinearWarmup: steps %d, start factor %g: want >= 1 and a value in [0, 1]", steps, startFactor))
	}
	return func(t int) float64 {
		if t >= steps {
			return 1
		}
		return startFactor + (1-startFactor)*float64(t)/float64(steps)
	}
}

// Sequence runs first for the first n updates and then second, counted
// from 0 again (PyTorch's SequentialLR with one milestone).
func Sequence(first Schedule, n int, second Schedule) Schedule {
	if first == nil || second == nil || n < 0 {
		panic(fmt.Sprintf("nn.Sequence: nil schedule or milestone %d < 0", n))
	}
	return func(t int) float64 {
		if t < n {
			return first(t)
		}
		return second(t - n)
	}
}

// Chain multiplies schedules (PyTorch's ChainedScheduler).
func Chain(ss ...Schedule) Schedule {
	for i, s := range ss {
		if s == nil {
			panic(fmt.Sprintf("nn.Chain: schedule %d is nil", i))
		}
	}
	return func(t int) float64 {
		f := 1.0
		for _, s := range ss {
			f *= s(t)
		}
		return f
	}
}

// WarmupCosine is the usual transformer schedule: a linear warm-up
// (t+1)/warmup reaching 1 at the last of warmup updates, then a cosine
// decay from 1 to minFactor, reached at t = total (and kept after).
func WarmupCosine(warmup, total int, minFactor float64) Schedule {
	if warmup < 1 || total <= warmup {
		panic(fmt.Sprintf("nn.WarmupCosine: warmup %d, total %d: want 1 <= warmup < total", warmup, total))
	}
	checkMinFactor("WarmupCosine", minFactor)
	warm := func(t int) float64 { return float64(t+1) / float64(warmup) }
	return Sequence(warm, warmup, CosineAnnealing(total-warmup, minFactor))
}

// LRIndexer is implemented by optimizers whose Hyper values hold the
// learning rate somewhere other than (or besides) index 0: Scheduled
// multiplies the values at these indices. Without it, index 0 is the
// learning rate, as in every optimizer of this package.
type LRIndexer interface {
	LRIndices() []int
}

// Scheduled is an optimizer whose learning rate follows a schedule: it
// is the optimizer it wraps, with the learning rate of each update's
// hyperparameters multiplied by the schedule's factor. The rate is a
// program input, so a changing rate never recompiles; CaptureStep, Step
// and ClipGradNorm all use it. The step count is the wrapped optimizer's:
// save and load the state of that one (SaveState(m, s.Optimizer)).
type Scheduled struct {
	Optimizer
	Schedule Schedule
	// Momentum, unless nil, gives the momentum of each update (a value,
	// not a factor; OneCycleMomentum), which replaces the optimizer's own
	// in its hyperparameters: the optimizer must be a MomentumHyperer.
	Momentum Schedule
	// State, unless nil, is the scheduler whose state the schedule reads
	// (WithReduceLROnPlateau sets it): SaveState writes it with the
	// wrapped optimizer's state and LoadState restores it.
	State StatefulSchedule
}

// StatefulSchedule is a scheduler whose state is more than the step count
// (ReduceLROnPlateau), kept in state files through Scheduled.State.
type StatefulSchedule interface {
	// ScheduleKind names it in state files.
	ScheduleKind() string
	// ScheduleState returns its state as named values (±Inf allowed).
	ScheduleState() map[string]float64
	// CheckScheduleState reports whether a state can be set, naming the
	// first value that cannot; LoadState asks before it changes anything.
	CheckScheduleState(map[string]float64) error
	// SetScheduleState sets a state, changing nothing if it is refused.
	SetScheduleState(map[string]float64) error
}

// MomentumHyperer is implemented by optimizers with a momentum that
// Scheduled.Momentum can set (SGD's Momentum, Adam's Beta1).
type MomentumHyperer interface {
	// HyperMomentum is Hyper(step) with momentum m in place of the
	// optimizer's own, and whatever derives from it (Adam's bias
	// correction) computed from m.
	HyperMomentum(step int, m float64) []float32
}

// WithSchedule wraps o with the schedule s.
func WithSchedule(o Optimizer, s Schedule) *Scheduled {
	if o == nil || s == nil {
		panic("nn.WithSchedule: nil optimizer or schedule")
	}
	return &Scheduled{Optimizer: o, Schedule: s}
}

// Factor is the schedule's factor for update number step (1, 2, ...).
func (s *Scheduled) Factor(step int) float64 { return s.Schedule(step - 1) }

// LR is the learning rate of update number step, for logging: the wrapped
// optimizer's Hyper value at its first learning-rate index times Factor.
func (s *Scheduled) LR(step int) float32 {
	return s.Hyper(step)[lrIndices(s.Optimizer)[0]]
}

func lrIndices(o Optimizer) []int {
	if li, ok := o.(LRIndexer); ok {
		return li.LRIndices()
	}
	return []int{0}
}

// Hyper is the wrapped optimizer's, with the learning rate scaled.
func (s *Scheduled) Hyper(step int) []float32 {
	h, f := s.hyper(step), s.Factor(step)
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		// Hyper has no error; a NaN rate makes the update NaN, which Step
		// then reports through the optimizer's own checks where it can.
		f = math.NaN()
	}
	for _, i := range lrIndices(s.Optimizer) {
		h[i] = float32(float64(h[i]) * f)
	}
	return h
}

// hyper is the wrapped optimizer's Hyper, with the scheduled momentum if
// there is one (NaN where it cannot be used: Step reports why).
func (s *Scheduled) hyper(step int) []float32 {
	if s.Momentum == nil {
		return s.Optimizer.Hyper(step)
	}
	mh, ok := s.Optimizer.(MomentumHyperer)
	m := s.Momentum(step - 1)
	if !ok || !(m >= 0 && m < 1) {
		h := s.Optimizer.Hyper(step)
		for i := range h {
			h[i] = float32(math.NaN())
		}
		return h
	}
	return mh.HyperMomentum(step, m)
}

// Step records the next update with the scheduled rate (and momentum).
func (s *Scheduled) Step() error {
	if err := checkOptimizer("Scheduled.Step", s.Optimizer); err != nil {
		return err
	}
	next := s.StepCount() + 1
	if f := s.Factor(next); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return fmt.Errorf("nn.Scheduled.Step: the schedule gives factor %g for update %d, want a finite value >= 0", f, next)
	}
	if s.Momentum != nil {
		if _, ok := s.Optimizer.(MomentumHyperer); !ok {
			return fmt.Errorf("nn.Scheduled.Step: a momentum schedule, but optimizer %T has no momentum to set (it is not an nn.MomentumHyperer)", s.Optimizer)
		}
		if m := s.Momentum(next - 1); !(m >= 0 && m < 1) {
			return fmt.Errorf("nn.Scheduled.Step: the momentum schedule gives %g for update %d, want a value in [0, 1)", m, next)
		}
	}
	return DefaultStep(s)
}

// GlobalGradNorm is the L2 norm of all the gradients of params together,
// as a [1] tensor (recorded lazily), or nil when none has a gradient.
func GlobalGradNorm(params []*core.Tensor) *core.Tensor {
	for _, p := range params {
		if p.Grad() != nil {
			return globalNorm(params)
		}
	}
	return nil
}

// ClipScale is the factor that brings a gradient norm down to at most
// maxNorm: clamp(maxNorm/(norm + 1e-6), 0, 1), branch-free on the device
// (CaptureStep's formula).
func ClipScale(norm *core.Tensor, maxNorm float32) *core.Tensor {
	return limitScale(norm.Device().Full(maxNorm, 1), norm)
}

func checkMaxNorm(fn string, maxNorm float32) error {
	if !(maxNorm > 0) || math.IsInf(float64(maxNorm), 0) {
		return fmt.Errorf("nn.%s: max norm %g, want a finite value > 0", fn, maxNorm)
	}
	return nil
}

// ClipGradNorm is opt.Step with the gradients clipped to a global L2 norm
// of at most maxNorm, for any training step (CaptureStep has its own
// MaxGradNorm): PyTorch's clip_grad_norm_ followed by opt.step(). It runs
// the pending work (forward and backward) to read the norm, which it
// returns; when the norm is NaN or infinite it returns ErrNonFiniteNorm and
// records no update (the step count does not advance). Otherwise the
// clipped update is recorded, to run at the next sync.
func ClipGradNorm(opt Optimizer, maxNorm float32) (float32, error) {
	if err := checkMaxNorm("ClipGradNorm", maxNorm); err != nil {
		return 0, err
	}
	if err := checkOptimizer("ClipGradNorm", opt); err != nil {
		return 0, err
	}
	norm := GlobalGradNorm(opt.Params())
	if norm == nil {
		return 0, fmt.Errorf("nn.ClipGradNorm: no parameter has a gradient")
	}
	n64, rescaled, err := readGradNorm(norm, opt.Params())
	if err != nil {
		return 0, fmt.Errorf("nn.ClipGradNorm: %w", err)
	}
	n := float32(n64)
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return n, fmt.Errorf("nn.ClipGradNorm: %w (%v); the update was skipped", ErrNonFiniteNorm, n64)
	}
	if rescaled {
		// the device's norm is +Inf: the factor is the host's
		return n, stepWith(opt, norm.Device().Full(float32(min(float64(maxNorm)/(n64+1e-6), 1)), 1))
	}
	return n, stepWith(opt, ClipScale(norm, maxNorm))
}

// readGradNorm reads norm, GlobalGradNorm(ps), in float64 (a sync). The
// device sums the squares in float32, which overflows to +Inf once the
// norm passes sqrt(MaxFloat32) ~ 1.8e19 though every gradient is finite:
// then it reads the largest gradient magnitude m and, when that is
// finite, the norm of the gradients divided by m, times m (BLAS nrm2's
// scaling) - two more syncs on a path only an Inf norm takes. rescaled
// says that the norm is not norm's value.
func readGradNorm(norm *core.Tensor, ps []*core.Tensor) (n float64, rescaled bool, err error) {
	v, err := norm.Keep().Item()
	if err != nil || !math.IsInf(float64(v), 1) {
		return float64(v), false, err
	}
	var peak *core.Tensor
	for _, p := range ps {
		if g := p.Grad(); g != nil {
			m := core.MaxAxis(core.Abs(core.Reshape(g, g.Len())), 0, true)
			if peak == nil {
				peak = m
			} else {
				peak = core.Maximum(peak, m)
			}
		}
	}
	m, err := peak.Item()
	if err != nil || math.IsInf(float64(m), 0) || math.IsNaN(float64(m)) || m == 0 {
		return float64(v), false, err // a gradient is Inf or NaN: +Inf is the norm
	}
	var sum *core.Tensor
	for _, p := range ps {
		if g := p.Grad(); g != nil {
			q := core.Scale(g, 1/m) // m > 1.8e19/sqrt(len): 1/m is a normal float32
			sq := core.Reshape(core.Sum(core.Mul(q, q)), 1)
			if sum == nil {
				sum = sq
			} else {
				sum = core.Add(sum, sq)
			}
		}
	}
	s, err := sum.Item()
	if err != nil {
		return 0, false, err
	}
	return float64(m) * math.Sqrt(float64(s)), true, nil
}

// ClipGradNormLazy is ClipGradNorm without the sync: the norm and the
// clipped update are recorded together and run as one program at the next
// sync; it returns the norm as a [1] tensor, kept for reading afterwards.
// Read it (Item) or Release it once the step has run: a kept value nobody
// reads holds its device buffer until it is garbage collected, so the next
// step's norm would take another one, and a backend could not replay the
// step's recorded command (see core's package doc).
// A non-finite norm is not caught: NaN gradients make the parameters NaN,
// as an unclipped step would (use ClipGradNorm to skip such steps).
func ClipGradNormLazy(opt Optimizer, maxNorm float32) (*core.Tensor, error) {
	if err := checkMaxNorm("ClipGradNormLazy", maxNorm); err != nil {
		return nil, err
	}
	if err := checkOptimizer("ClipGradNormLazy", opt); err != nil {
		return nil, err
	}
	norm := GlobalGradNorm(opt.Params())
	if norm == nil {
		return nil, fmt.Errorf("nn.ClipGradNormLazy: no parameter has a gradient")
	}
	norm.Keep()
	return norm, stepWith(opt, ClipScale(norm, maxNorm))
}
