// Command dqn trains a deep Q-network (Mnih et al. 2015) to balance the
// pole of CartPole (cartpole.go), an environment written in Go. Its replay
// buffer is a device table (package buffer): each transition is written to
// the device once, and every update reads a random batch of them by index
// inside a captured step, so only the batch's indices cross the bus. It
// prints the loss and how long the pole stays up, in training episodes and
// with the greedy policy.
//
//	go run ./examples/dqn -device cpu -steps 2500
//	ag serve -app ./examples/dqn     # the same agent trained in the page
package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/buffer"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

func main() { app.Run(Spec) }

// Spec is the example for app.Run.
var Spec = app.Spec{
	Name: "dqn",
	Describe: "a DQN agent balancing CartPole: an MLP Q-network, a target network, ε-greedy exploration and a replay buffer on the device (package buffer) " +
		"sampled by index inside a captured step; one environment step and one update per training step",
	// 2500 steps: the greedy policy's best, measured on cpu with seeds 1-3
	// (177-200 of the 200-step cut-off); plain DQN is unstable past it
	// (after 6000 steps, the earlier default, 91-183).
	Steps: 2500,
	Params: []app.Param{
		{Name: "hidden", Default: 64, Min: 4, Max: 1024, Int: true, Doc: "units per hidden layer (two layers)"},
		{Name: "batch", Default: 64, Min: 1, Max: 4096, Int: true, Doc: "transitions per update"},
		{Name: "lr", Default: 1e-3, Min: 1e-6, Max: 1, Doc: "Adam learning rate"},
		{Name: "gamma", Default: 0.99, Min: 0, Max: 1, Doc: "discount"},
		{Name: "capacity", Default: 10000, Min: 100, Max: 1 << 22, Int: true, Doc: "replay buffer transitions"},
		{Name: "start", Default: 500, Min: 1, Max: 1 << 20, Int: true, Doc: "random steps before learning"},
		{Name: "explore", Default: 3000, Min: 1, Max: 1 << 22, Int: true, Doc: "steps over which ε falls from 1 to 0.05"},
		{Name: "sync", Default: 250, Min: 1, Max: 1 << 20, Int: true, Doc: "updates between target network copies"},
		{Name: "maxlen", Default: 200, Min: 10, Max: 100000, Int: true, Doc: "episode cut-off"},
		{Name: "seed", Default: 1, Min: 0, Max: 1 << 31, Int: true, Doc: "weights, environment and exploration seed"},
	},
	Build: func(dev *core.Device, cfg app.Config) (app.Trainer, error) { return New(dev, cfg) },
}

// A transition is one record of the replay buffer: the observation, the
// action one-hot, the reward, the next observation and 1 when the next
// state is terminal (no value beyond it).
const (
	obsDim  = 4
	actions = 2
	colObs  = 0
	colAct  = colObs + obsDim
	colRew  = colAct + actions
	colNext = colRew + 1
	colDone = colNext + obsDim
	width   = colDone + 1
)

// Agent is the DQN: its networks, its replay buffer, the environment and
// the captured programs that act and learn.
type Agent struct {
	dev            *core.Device
	q, target      nn.Sequential
	opt            *nn.Adam
	buf            *buffer.Buffer
	env            *CartPole
	rng            *rand.Rand
	learn          *nn.StepCapture
	act            *core.Capture
	obs            []float32
	size, pos      int // transitions held, next slot of the ring
	batch          int
	gamma          float32
	start, explore int
	sync, updates  int
	steps          int   // environment steps taken
	episodes       []int // lengths of finished episodes
	seed           uint64
	maxLen         int
}

// New builds the agent on dev.
func New(dev *core.Device, cfg app.Config) (*Agent, error) {
	seed := uint64(cfg.Int("seed"))
	h := cfg.Int("hidden")
	sizes := []int{obsDim, h, h, actions}
	a := &Agent{dev: dev, rng: rand.New(rand.NewPCG(seed, 11)), batch: cfg.Int("batch"), gamma: cfg.Float32("gamma"),
		start: max(cfg.Int("start"), cfg.Int("batch")), explore: cfg.Int("explore"), sync: cfg.Int("sync"),
		seed: seed, maxLen: cfg.Int("maxlen")}
	a.q = nn.MLP(dev, sizes, core.ReLU, nn.NewRNG(seed))
	a.target = nn.MLP(dev, sizes, core.ReLU, nn.NewRNG(seed))
	a.opt = nn.NewAdam(a.q.Params(), cfg.Float32("lr"))
	var err error
	if a.buf, err = buffer.New(dev, width, cfg.Int("capacity")); err != nil {
		return nil, fmt.Errorf("dqn: replay buffer: %w", err)
	}
	a.env = NewCartPole(a.maxLen, rand.New(rand.NewPCG(seed, 12)))
	a.obs = a.env.Reset()
	// Acting: Q(obs) for one observation, one upload and one download.
	a.act = core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		var q *core.Tensor
		dev.NoGrad(func() { q = a.q.Forward(in[0]) })
		return []*core.Tensor{q}
	})
	// Learning: the batch's rows read from the buffer on the device.
	a.learn = nn.CaptureStep(a.opt, func(in []*core.Tensor) *core.Tensor { return a.loss(in[0]) })
	return a, nil
}

// cols returns columns from..from+n-1 of x [rows, width] as [rows, n].
func cols(x *core.Tensor, from, n int) *core.Tensor {
	return core.Transpose(core.SliceRows(core.Transpose(x), from, n))
}

// loss is the Huber loss of Q(s, a) against r + γ·(1-done)·max Q_target(s')
// for the transitions at the indices idx [batch].
func (a *Agent) loss(idx *core.Tensor) *core.Tensor {
	rows := a.buf.GetRowsOf(idx) // [batch, width], read on the device
	b := idx.Dim(0)
	qsa := core.SumAxis(core.Mul(a.q.Forward(cols(rows, colObs, obsDim)), cols(rows, colAct, actions)), 1, false)
	var y *core.Tensor
	a.dev.NoGrad(func() {
		next := core.MaxAxis(a.target.Forward(cols(rows, colNext, obsDim)), 1, false)
		notDone := core.Affine(core.Reshape(cols(rows, colDone, 1), b), -1, 1)
		y = core.Add(core.Reshape(cols(rows, colRew, 1), b), core.Scale(core.Mul(notDone, next), a.gamma))
	})
	return nn.Huber(qsa, y, 1)
}

// Epsilon is the exploration rate after steps environment steps: 1 during
// the random start, then falling linearly to 0.05 over explore steps.
func (a *Agent) Epsilon() float64 {
	k := a.steps - a.start
	if k <= 0 {
		return 1
	}
	return max(0.05, 1-0.95*float64(k)/float64(a.explore))
}

// Greedy returns the action of largest Q for obs.
func (a *Agent) Greedy(obs []float32) (int, error) {
	out, err := a.act.Call(core.In(obs, 1, obsDim))
	if err != nil {
		return 0, fmt.Errorf("dqn: acting: %w", err)
	}
	if out[0][1] > out[0][0] {
		return 1, nil
	}
	return 0, nil
}

// envStep takes one ε-greedy step of the environment and writes the
// transition into the replay buffer.
func (a *Agent) envStep() error {
	action := a.rng.IntN(actions)
	if a.rng.Float64() >= a.Epsilon() {
		var err error
		if action, err = a.Greedy(a.obs); err != nil {
			return err
		}
	}
	next, r, terminal, over := a.env.Step(action)
	rec := make([]float32, width)
	copy(rec[colObs:], a.obs)
	rec[colAct+action] = 1
	rec[colRew] = r
	copy(rec[colNext:], next)
	if terminal {
		rec[colDone] = 1
	}
	if err := a.buf.Write(a.pos, rec); err != nil {
		return fmt.Errorf("dqn: writing transition %d: %w", a.steps, err)
	}
	a.pos = (a.pos + 1) % a.buf.Capacity()
	a.size = min(a.size+1, a.buf.Capacity())
	a.steps++
	a.obs = next
	if over {
		a.episodes = append(a.episodes, a.env.Steps)
		a.obs = a.env.Reset()
	}
	return nil
}

// Step takes one environment step and one update of the Q-network on a
// random batch of the buffer, and returns the update's loss. The first
// call first fills the buffer with the random steps of the start.
func (a *Agent) Step() (float32, error) {
	for a.steps < a.start {
		if err := a.envStep(); err != nil {
			return 0, err
		}
	}
	if err := a.envStep(); err != nil {
		return 0, err
	}
	idx := make([]float32, a.batch)
	for i := range idx {
		idx[i] = float32(a.rng.IntN(a.size))
	}
	loss, err := a.learn.Step(core.In(idx, a.batch))
	if err != nil {
		return 0, fmt.Errorf("dqn: update %d: %w", a.updates+1, err)
	}
	a.updates++
	if a.updates%a.sync == 0 {
		if err := a.syncTarget(); err != nil {
			return 0, err
		}
	}
	return loss, nil
}

// syncTarget copies the Q-network's weights into the target network.
func (a *Agent) syncTarget() error {
	tp := a.target.Params()
	for i, p := range a.q.Params() {
		v, err := p.Data()
		if err != nil {
			return fmt.Errorf("dqn: reading weights for the target network: %w", err)
		}
		if err := tp[i].WriteAt(0, v); err != nil {
			return fmt.Errorf("dqn: writing the target network: %w", err)
		}
	}
	return nil
}

// GreedyLength is the mean length of n episodes played with the greedy
// policy (no exploration, no learning), from fixed starting states.
func (a *Agent) GreedyLength(n int) (float64, error) {
	env := NewCartPole(a.maxLen, rand.New(rand.NewPCG(a.seed, 99)))
	total := 0
	for range n {
		obs := env.Reset()
		for {
			act, err := a.Greedy(obs)
			if err != nil {
				return 0, err
			}
			var over bool
			obs, _, _, over = env.Step(act)
			if over {
				break
			}
		}
		total += env.Steps
	}
	return float64(total) / float64(n), nil
}

// RecentLength is the mean length of the last n training episodes (0
// before the first ends).
func (a *Agent) RecentLength(n int) float64 {
	e := a.episodes[max(0, len(a.episodes)-n):]
	if len(e) == 0 {
		return 0
	}
	s := 0
	for _, l := range e {
		s += l
	}
	return float64(s) / float64(len(e))
}

// Eval reports the episodes so far, the mean length of the last 10, the
// greedy policy's mean length over 3 episodes and ε.
func (a *Agent) Eval() (app.Metrics, error) {
	g, err := a.GreedyLength(3)
	if err != nil {
		return nil, err
	}
	return app.Metrics{"episodes": float64(len(a.episodes)), "episode length (last 10)": a.RecentLength(10),
		"greedy episode length": g, "epsilon": a.Epsilon()}, nil
}

// Params lists the Q-network's parameters.
func (a *Agent) Params() []*core.Tensor { return a.q.Params() }
