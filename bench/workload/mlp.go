// Package workload holds the training workloads that the demo, the
// benchmarks and the browser page share: the seeds' MLP (depth Linear
// layers of width x width with ReLU between) fitting synthetic regression
// data, trained with Adam on an MSE loss, and GPT, the character-level
// transformer of package models.
//
// It lives beside the PyTorch peers that train the same workloads
// (bench/torch_*.py) and is public, not internal, because the backends'
// tests train it too (the webgpu and ggml step tests, the browser suite),
// and no package under core/ or backend/ imports the module root's
// internal/. It is ag's own benchmark harness, not a library API.
package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Config is the shape of the workload.
type Config struct {
	Width, Depth, Batch int
	LR                  float32
	Seed                uint64
	Batches             int // distinct batches of data cycled through (default 4)
}

// MLP is a model, its optimizer and its data on one device.
type MLP struct {
	Cfg   Config
	Dev   *core.Device
	Model nn.Sequential
	Opt   *nn.Adam
	// The data set lives on the device (Batches*Batch rows of inputs and
	// targets); a step reads its batch by index, so only the indices cross
	// the bus - the pattern of a replay buffer.
	x, y *core.Tensor
	idx  [][]float32 // row indices of each batch
	step int
	capt *nn.StepCapture
}

// Mode is how a step executes.
type Mode string

// The execution modes that benchmarks and the page compare.
const (
	// Eager runs every op as soon as it is recorded (one program per op).
	Eager Mode = "eager"
	// Lazy records the whole step and runs it as one program at the sync;
	// the program comes from the cache after the first step, but the step is
	// recorded and lowered again every time.
	Lazy Mode = "lazy"
	// Captured records the step once and replays the compiled program,
	// uploading the batch indices and hyperparameters in one transfer and
	// downloading the loss.
	Captured Mode = "captured"
)

// New builds the model and the data. The targets come from a fixed random
// teacher network of the same shape (y = tanh(x·T)), computed on the device
// once, so the task is learnable and the loss falls.
func New(dev *core.Device, cfg Config) (*MLP, error) {
	if cfg.Width < 1 || cfg.Depth < 1 || cfg.Batch < 1 {
		return nil, fmt.Errorf("workload.New: width %d, depth %d, batch %d: all must be >= 1", cfg.Width, cfg.Depth, cfg.Batch)
	}
	if cfg.Batches < 1 {
		cfg.Batches = 4
	}
	if cfg.LR == 0 {
		cfg.LR = 1e-3
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0xa9))
	sizes := make([]int, cfg.Depth+1)
	for i := range sizes {
		sizes[i] = cfg.Width
	}
	m := &MLP{Cfg: cfg, Dev: dev, Model: nn.MLP(dev, sizes, core.ReLU, r)}
	m.Opt = nn.NewAdam(m.Model.Params(), cfg.LR)
	teacher := make([]float32, cfg.Width*cfg.Width)
	// x·T then has unit variance, so the targets tanh(x·T) spread over
	// (-1, 1) and there is something to learn
	scale := float32(math.Sqrt(3 / float64(cfg.Width)))
	for i := range teacher {
		teacher[i] = float32(r.NormFloat64()) * scale
	}
	rows := cfg.Batches * cfg.Batch
	xv := make([]float32, rows*cfg.Width)
	for i := range xv {
		xv[i] = float32(r.Float64()*2 - 1)
	}
	m.x = dev.Tensor(xv, rows, cfg.Width)
	var err error
	dev.NoGrad(func() {
		m.y = core.Tanh(core.MatMul(m.x, dev.Tensor(teacher, cfg.Width, cfg.Width))).Keep()
		err = dev.Sync()
	})
	if err != nil {
		return nil, fmt.Errorf("workload.New: computing targets: %w", err)
	}
	for b := range cfg.Batches {
		idx := make([]float32, cfg.Batch)
		for i := range idx {
			idx[i] = float32(b*cfg.Batch + i)
		}
		m.idx = append(m.idx, idx)
	}
	return m, nil
}

// Step runs one lazy training step (forward, backward, Adam) and returns the
// loss. It is one program run on the device.
func (m *MLP) Step() (float32, error) {
	return m.StepMode(Lazy)
}

func (m *MLP) loss(idx *core.Tensor) *core.Tensor {
	return nn.MSELoss(m.Model.Forward(core.Gather(m.x, idx)), core.Gather(m.y, idx))
}

// StepMode runs one training step in the given mode and returns the loss.
func (m *MLP) StepMode(mode Mode) (float32, error) { return m.stepAs(mode, true, nil) }

// StepUnread runs one training step in the given mode as StepMode does and
// does not read the loss back. A lazy step runs at a Sync; where the
// backend can submit without waiting (WebGPU), neither mode
// waits for the step's work (see core.Capture.Run).
func (m *MLP) StepUnread(mode Mode) error {
	_, err := m.stepAs(mode, false, nil)
	return err
}

// StepLater runs one training step in the given mode as StepMode does and
// asks for its loss without waiting for it (core.Later): in the browser
// the page's loop waits for it a few steps later.
func (m *MLP) StepLater(mode Mode) (*core.Later, error) {
	var l *core.Later
	_, err := m.stepAs(mode, false, &l)
	return l, err
}

// stepAs is StepMode (read), StepUnread, or StepLater when later is not
// nil (the Later left in *later: the mode's closures return a loss).
func (m *MLP) stepAs(mode Mode, read bool, later **core.Later) (float32, error) {
	idx := m.idx[m.step%len(m.idx)]
	m.step++
	return inMode(m.Dev, mode, func() (float32, error) {
		m.Opt.ZeroGrad()
		loss := m.loss(m.Dev.Tensor(idx, len(idx)))
		if err := loss.Backward(); err != nil {
			return 0, err
		}
		if err := m.Opt.Step(); err != nil {
			return 0, err
		}
		if read {
			return loss.Item()
		}
		if later != nil {
			l, err := loss.ReadLater()
			if err != nil {
				return 0, err
			}
			*later = l
			// the read is queued: the buffer can go back to the pool
		}
		// Release runs the step (a sync) and gives the loss's buffer back
		// now, rather than when the collector finds it
		return 0, loss.Release()
	}, func() (float32, error) {
		if m.capt == nil {
			m.capt = nn.CaptureStep(m.Opt, func(in []*core.Tensor) *core.Tensor { return m.loss(in[0]) })
		}
		if later != nil {
			l, err := m.capt.StepLater(core.In(idx, len(idx)))
			*later = l
			return 0, err
		}
		if !read {
			return 0, m.capt.StepUnread(core.In(idx, len(idx)))
		}
		return m.capt.Step(core.In(idx, len(idx)))
	})
}

// inMode runs a step in mode: lazy (or eager, the device switched to eager
// for it) or captured.
func inMode(dev *core.Device, mode Mode, lazy, captured func() (float32, error)) (float32, error) {
	switch mode {
	case Lazy, "", Eager:
		if mode == Eager {
			prev := dev.SetEager(true)
			defer dev.SetEager(prev)
		}
		return lazy()
	case Captured:
		return captured()
	}
	return 0, fmt.Errorf("workload: unknown mode %q (eager, lazy, captured)", mode)
}

// FLOPs is the arithmetic of one step: forward, backward (twice the
// forward's matmuls) and the update, counting a multiply-add as two.
func (m *MLP) FLOPs() float64 {
	w, b, d := float64(m.Cfg.Width), float64(m.Cfg.Batch), float64(m.Cfg.Depth)
	return 3 * 2 * b * w * w * d
}

// Timed runs n steps in mode and returns each step's wall time and the last
// loss.
func (m *MLP) Timed(mode Mode, n int) ([]time.Duration, float32, error) {
	return timeSteps(n, func() (float32, error) { return m.StepMode(mode) })
}

// TimedEvery runs n groups of every steps in mode, reading the loss back at
// the last step of each group only (StepUnread before it), and returns each
// group's wall time divided by every, a step's share, and the last loss.
func (m *MLP) TimedEvery(mode Mode, n, every int) ([]time.Duration, float32, error) {
	if every < 1 {
		return nil, 0, fmt.Errorf("workload.MLP.TimedEvery: every %d: want >= 1", every)
	}
	times, loss, err := timeSteps(n, func() (float32, error) {
		for range every - 1 {
			if err := m.StepUnread(mode); err != nil {
				return 0, err
			}
		}
		return m.StepMode(mode)
	})
	for i := range times {
		times[i] /= time.Duration(every)
	}
	return times, loss, err
}

// LaterGroups is the number of groups TimedLater(mode, n, every, lag)
// runs: the n timed, the one filling the pipeline before the first timed
// wait and the lag drained after the last.
func LaterGroups(n, lag int) int { return n + 1 + lag }

// TimedLater is TimedEvery with each read waited for lag groups after it
// is asked (StepLater, as the page's loop does): the host builds and
// submits the steps after a read while the device runs the ones before.
// It times n groups in the steady state: each from the wait that returned
// the read before it to the one that returned its own, shared by its
// steps. The group that fills the pipeline before the first timed wait and
// the lag groups drained after the last are run and not timed. The loss is
// the last group's.
func (m *MLP) TimedLater(mode Mode, n, every, lag int) ([]time.Duration, float32, error) {
	if n < 1 || every < 1 || lag < 1 {
		return nil, 0, fmt.Errorf("workload.MLP.TimedLater: n %d, every %d, lag %d: want each >= 1", n, every, lag)
	}
	times := make([]time.Duration, 0, n)
	var queue []*core.Later
	var loss float32
	var last time.Time
	take := func() error {
		l, err := queue[0].Item()
		queue = queue[1:]
		if err != nil {
			return err
		}
		now := time.Now()
		if !last.IsZero() && len(times) < n {
			times = append(times, now.Sub(last)/time.Duration(every))
		}
		loss, last = l, now
		return nil
	}
	for range LaterGroups(n, lag) {
		for range every - 1 {
			if err := m.StepUnread(mode); err != nil {
				return nil, 0, err
			}
		}
		l, err := m.StepLater(mode)
		if err != nil {
			return nil, 0, err
		}
		if queue = append(queue, l); len(queue) > lag {
			if err := take(); err != nil {
				return nil, 0, err
			}
		}
	}
	for len(queue) > 0 {
		if err := take(); err != nil {
			return nil, 0, err
		}
	}
	return times, loss, nil
}

// timeSteps runs step n times, timing each, and returns the last loss.
func timeSteps(n int, step func() (float32, error)) ([]time.Duration, float32, error) {
	times := make([]time.Duration, n)
	var loss float32
	for i := range n {
		t0 := time.Now()
		l, err := step()
		if err != nil {
			return nil, 0, err
		}
		times[i] = time.Since(t0)
		loss = l
	}
	return times, loss, nil
}
