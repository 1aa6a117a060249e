package pageapi

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// ErrDiverged ends a Train whose loss read back was NaN or infinite.
var ErrDiverged = errors.New("training diverged (a smaller learning rate may help); stopped there")

// MaxEvery bounds ag.train's every, as its steps are bounded.
const MaxEvery = 100000

// CheckEvery refuses an every that Train refuses, naming it.
func CheckEvery(every int) error {
	if every < 1 || every > MaxEvery {
		return fmt.Errorf("every %d: want 1..%d (read the loss back every this many steps)", every, MaxEvery)
	}
	return nil
}

// Train is the page's training loop (ag.train in both browser builds):
// Steps steps, the loss read back at every Every-th step and at the last,
// the steps between taken by Unread, which does not read it. A read waits
// a round trip to the GPU process in the browser (1-3 ms in Chromium on an
// H200, whatever the step's size); steps that are not read are submitted
// and queue behind each other. With Later the reads are not waited for
// when asked: the loop goes on queueing steps and waits for a read a few
// groups later (see Run), so the GPU is not idle while a loss travels
// back.
type Train struct {
	Steps, Every int
	First        int          // the step number of the first step, in errors and progress
	Stop         *atomic.Bool // ag.stop(): checked before each read's group of steps
	Yield        func()       // lets the page paint, at most every 30 ms (nil: never)
	Read         func() (float32, error)
	Unread       func() error // nil: every step is Read
	// Later takes a read step as Read does and returns its loss, asked
	// for and not yet waited for (nil: every read step is Read, waited for
	// at once).
	Later func() (Loss, error)
	// Progress is called after each read with the step's number, its loss
	// and the mean time of the steps since the read before.
	Progress func(step int, loss float32, ms float64)
	// StepErr makes the error of failed step number step (nil: "step N: err").
	StepErr func(step int, err error) error
}

// TrainResult is what Train.Run did, the heart of ag.train's answer.
type TrainResult struct {
	Steps     int     `json:"steps"`      // steps run by this call
	Total     int     `json:"total"`      // steps trained since build (First-1 + Steps)
	Every     int     `json:"every"`      // the loss was read every this many steps, and at the last
	FirstLoss float64 `json:"first_loss"` // loss of this call's first step read
	LastLoss  float64 `json:"last_loss"`  // loss of the last step (always read)
	// StepMS is each step's wall time. Steps between two reads share their
	// time equally: a step that does not wait for its work has no time of
	// its own. With Train.Later a group's time runs from the wait that
	// returned the read before to the one that returned its own.
	StepMS  []float64 `json:"step_ms"`
	Stopped bool      `json:"stopped"` // ag.stop() ended it early
}

// Reads in flight with Train.Later: enough groups to cover laterSpan of
// steps (a read's round trip, 1-3 ms in Chromium, with room to spare),
// at least 2 (one waits while the next group is queued), at most
// maxInFlight (a fast step read every step: 32 reads cover 6 ms of 0.2 ms
// steps). Measured from the groups' times as the loop goes.
const (
	laterSpan   = 8 * time.Millisecond
	maxInFlight = 32
)

// Loss is a step's loss asked for and not yet waited for: Item waits and
// returns it (a *core.Later).
type Loss interface {
	Item() (float32, error)
}

// inFlight is a read asked for and not yet waited for.
type inFlight struct {
	step, n int // the read step's number, the steps of its group
	loss    Loss
}

// Run runs the loop. The error of a failed step names its number (see
// StepErr); the steps before it stay counted in the result. A step between
// reads that fails on a device that does not wait for it is reported by
// the next read. With Later, a failed wait names its read step and counts
// the steps of the groups read before it; steps queued after it are not
// counted.
func (t Train) Run() (TrainResult, error) {
	if err := CheckEvery(t.Every); err != nil {
		return TrainResult{Total: t.First - 1}, err
	}
	out := TrainResult{Every: t.Every, StepMS: []float64{}}
	end := func(err error) (TrainResult, error) {
		out.Total = t.First - 1 + out.Steps
		return out, err
	}
	fail := func(step int, err error) error {
		if t.StepErr != nil {
			return t.StepErr(step, err)
		}
		return fmt.Errorf("step %d: %w", step, err)
	}
	// report records a read group of n steps, read at step number step.
	read := 0
	// A loss of NaN or an infinity is reported to Progress (the page
	// plots it) and ends the call with ErrDiverged: every later step would
	// be NaN too, and the answer, JSON, has no NaN to carry it in (it
	// failed to encode, losing the whole result).
	report := func(step, n int, loss float32, ms float64) error {
		for range n {
			out.StepMS = append(out.StepMS, ms)
		}
		if t.Progress != nil {
			t.Progress(step, loss, ms)
		}
		if f := float64(loss); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("step %d: the loss is %v: %w", step, loss, ErrDiverged)
		}
		if read == 0 {
			out.FirstLoss = float64(loss)
		}
		read++
		out.LastLoss = float64(loss)
		return nil
	}
	// With Later: the reads in flight, oldest first, the steps they and
	// the ones before them account for (done), and when the last wait
	// returned.
	var queue []inFlight
	done := 0
	lastWait := time.Now()
	var groupTime time.Duration // mean time of a group, from the waits
	collect := func() error {
		f := queue[0]
		queue = queue[1:]
		loss, err := f.loss.Item()
		if err != nil {
			out.Steps = done
			for _, g := range queue { // each wait is called once; theirs follow the failure
				g.loss.Item()
			}
			queue = nil
			return fail(f.step, err)
		}
		now := time.Now()
		dt := now.Sub(lastWait)
		lastWait = now
		groupTime = (groupTime*time.Duration(read) + dt) / time.Duration(read+1)
		done += f.n
		if err := report(f.step, f.n, loss, MS(dt)/float64(f.n)); err != nil {
			out.Steps = done
			for _, g := range queue {
				g.loss.Item()
			}
			queue = nil
			return err
		}
		return nil
	}
	depth := func() int {
		if groupTime <= 0 {
			return 2
		}
		return min(max(int(laterSpan/groupTime)+1, 2), maxInFlight)
	}
	drain := func() error {
		for len(queue) > 0 {
			if err := collect(); err != nil {
				return err
			}
		}
		return nil
	}
	lastYield := time.Now()
	for out.Steps < t.Steps {
		if t.Stop != nil && t.Stop.Load() {
			if err := drain(); err != nil {
				return end(err)
			}
			out.Stopped = true
			break
		}
		n := min(t.Every, t.Steps-out.Steps) // the group's last step is read
		t0 := time.Now()
		var loss float32
		for k := range n {
			var err error
			switch {
			case k < n-1 && t.Unread != nil:
				err = t.Unread()
			case k == n-1 && t.Later != nil:
				var l Loss
				if l, err = t.Later(); err == nil {
					queue = append(queue, inFlight{step: t.First + out.Steps, n: n, loss: l})
				}
			default:
				loss, err = t.Read()
			}
			if err != nil {
				step := t.First + out.Steps
				if derr := drain(); derr != nil { // the reads before it come first
					return end(derr)
				}
				return end(fail(step, err))
			}
			out.Steps++
			if t.Yield != nil && time.Since(lastYield) > 30*time.Millisecond {
				t.Yield()
				lastYield = time.Now()
			}
		}
		if t.Later == nil {
			done = out.Steps
			if err := report(t.First+out.Steps-1, n, loss, MS(time.Since(t0))/float64(n)); err != nil {
				return end(err)
			}
			continue
		}
		for len(queue) > depth() {
			if err := collect(); err != nil {
				return end(err)
			}
		}
	}
	if err := drain(); err != nil {
		return end(err)
	}
	return end(nil)
}
