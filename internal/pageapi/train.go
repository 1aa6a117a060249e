package pageapi

import (
	"fmt"
	"sync/atomic"
	"time"
)

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
// a round trip to the GPU process in the browser (2-4 ms in Chromium on an
// H200, whatever the step's size); steps that are not read are submitted
// and queue behind each other.
type Train struct {
	Steps, Every int
	First        int          // the step number of the first step, in errors and progress
	Stop         *atomic.Bool // ag.stop(): checked before each read's group of steps
	Yield        func()       // lets the page paint, at most every 30 ms (nil: never)
	Read         func() (float32, error)
	Unread       func() error // nil: every step is Read
	// Progress is called after each read with the step's number, its loss
	// and the mean time of the steps since the read before.
	Progress func(step int, loss float32, ms float64)
	// StepErr makes the error of failed step number step (nil: "step N: err").
	StepErr func(step int, err error) error
}

// TrainResult is what Train.Run did, ag.train's answer in both builds.
type TrainResult struct {
	Steps     int     `json:"steps"`      // steps run by this call
	Total     int     `json:"total"`      // steps trained since build (First-1 + Steps)
	Every     int     `json:"every"`      // the loss was read every this many steps, and at the last
	FirstLoss float64 `json:"first_loss"` // loss of this call's first step read
	LastLoss  float64 `json:"last_loss"`  // loss of the last step (always read)
	// StepMS is each step's wall time. Steps between two reads share their
	// time equally: a step that does not wait for its work has no time of
	// its own.
	StepMS  []float64 `json:"step_ms"`
	Stopped bool      `json:"stopped"` // ag.stop() ended it early
}

// Run runs the loop. The error of a failed step names its number (see
// StepErr); the steps before it stay counted in the result. A step between reads that
// fails on a device that does not wait for it is reported by the next
// read.
func (t Train) Run() (TrainResult, error) {
	if err := CheckEvery(t.Every); err != nil {
		return TrainResult{Total: t.First - 1}, err
	}
	out := TrainResult{Every: t.Every, StepMS: []float64{}}
	end := func(err error) (TrainResult, error) {
		out.Total = t.First - 1 + out.Steps
		return out, err
	}
	lastYield := time.Now()
	for out.Steps < t.Steps {
		if t.Stop != nil && t.Stop.Load() {
			out.Stopped = true
			break
		}
		n := min(t.Every, t.Steps-out.Steps) // the group's last step is read
		t0 := time.Now()
		var loss float32
		for k := range n {
			var err error
			if k < n-1 && t.Unread != nil {
				err = t.Unread()
			} else {
				loss, err = t.Read()
			}
			if err != nil {
				if t.StepErr != nil {
					return end(t.StepErr(t.First+out.Steps, err))
				}
				return end(fmt.Errorf("step %d: %w", t.First+out.Steps, err))
			}
			out.Steps++
			if t.Yield != nil && time.Since(lastYield) > 30*time.Millisecond {
				t.Yield()
				lastYield = time.Now()
			}
		}
		ms := MS(time.Since(t0)) / float64(n)
		for range n {
			out.StepMS = append(out.StepMS, ms)
		}
		if out.Steps == n {
			out.FirstLoss = float64(loss)
		}
		out.LastLoss = float64(loss)
		if t.Progress != nil {
			t.Progress(t.First+out.Steps-1, loss, ms)
		}
	}
	return end(nil)
}
