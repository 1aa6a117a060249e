package pageapi

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
)

// The loop's bookkeeping: which steps are read, the totals, the step
// numbers in progress and errors, ag.stop between reads, a refused every.
func TestTrain(t *testing.T) {
	var log []string
	var stop atomic.Bool
	fail := 0
	tr := Train{Steps: 7, Every: 3, First: 11, Stop: &stop,
		Read:     func() (float32, error) { log = append(log, "r"); return float32(len(log)), nil },
		Unread:   func() error { log = append(log, "u"); return nil },
		Progress: func(step int, loss float32, ms float64) { log = append(log, fmt.Sprint(step)) },
	}
	r, err := tr.Run()
	if got := strings.Join(log, " "); err != nil || got != "u u r 13 u u r 16 r 17" {
		t.Errorf("7 steps every 3: %v, calls %q", err, got)
	}
	if r.Steps != 7 || r.Total != 17 || r.Every != 3 || len(r.StepMS) != 7 || r.FirstLoss != 3 || r.LastLoss != 9 || r.Stopped {
		t.Errorf("result %+v", r)
	}

	// a failing step: its number, and the steps before it counted
	tr.Unread = func() error {
		if fail++; fail == 4 {
			return errors.New("boom")
		}
		return nil
	}
	r, err = tr.Run()
	if err == nil || err.Error() != "step 15: boom" || r.Steps != 4 || r.Total != 14 {
		t.Errorf("the 5th step failing: %v, result %+v", err, r)
	}

	stop.Store(true)
	if r, err = tr.Run(); err != nil || !r.Stopped || r.Steps != 0 || r.Total != 10 {
		t.Errorf("stopped: %v, result %+v", err, r)
	}
	tr.Every = 0
	if r, err = tr.Run(); err == nil || !strings.Contains(err.Error(), "every 0") || r.Total != 10 {
		t.Errorf("every 0: %v, result %+v", err, r)
	}
}

// With Later the reads are waited for groups after they are asked, in
// order, each loss reported with its own step; the results are those of
// the loop that waits at once. A failing wait names its read step and
// counts the groups read before it; a failing Later waits for the reads
// before it first; ag.stop waits for the reads in flight; no more than
// maxInFlight+1 reads are ever in flight.
func TestTrainLater(t *testing.T) {
	var log []string
	var stop atomic.Bool
	inFlight, most := 0, 0
	failWait, failLater := 0, 0
	step := 10
	tr := Train{Steps: 7, Every: 3, First: 11, Stop: &stop,
		Read:   func() (float32, error) { t.Fatal("Read called though Later is set"); return 0, nil },
		Unread: func() error { step++; log = append(log, "u"); return nil },
		Later: func() (Loss, error) {
			step++
			if step == failLater {
				return nil, errors.New("refused")
			}
			log = append(log, "L")
			inFlight++
			most = max(most, inFlight)
			s := step
			return fakeLoss(func() (float32, error) {
				inFlight--
				log = append(log, fmt.Sprint("w", s))
				if s == failWait {
					return 0, errors.New("boom")
				}
				return float32(s), nil
			}), nil
		},
		Progress: func(step int, loss float32, ms float64) {
			if float32(step) != loss {
				t.Errorf("progress of step %d with the loss of step %v", step, loss)
			}
			log = append(log, fmt.Sprint(step))
		},
	}
	r, err := tr.Run()
	if got := strings.Join(log, " "); err != nil || got != "u u L u u L L w13 13 w16 16 w17 17" {
		t.Errorf("7 steps every 3: %v, calls %q", err, got)
	}
	if r.Steps != 7 || r.Total != 17 || len(r.StepMS) != 7 || r.FirstLoss != 13 || r.LastLoss != 17 || r.Stopped {
		t.Errorf("result %+v", r)
	}

	log, step, failWait = nil, 10, 16
	r, err = tr.Run()
	if err == nil || err.Error() != "step 16: boom" || r.Steps != 3 || r.Total != 13 || r.LastLoss != 13 {
		t.Errorf("the wait of step 16 failing: %v, result %+v", err, r)
	}
	if inFlight != 0 {
		t.Errorf("after the failed wait %d reads were left in flight, want 0 (each wait is called)", inFlight)
	}

	log, step, failWait, failLater = nil, 10, 0, 16
	r, err = tr.Run()
	if got := strings.Join(log, " "); err == nil || err.Error() != "step 16: refused" || r.Steps != 5 || got != "u u L u u w13 13" {
		t.Errorf("Later of step 16 failing: %v, result %+v, calls %q", err, r, got)
	}

	log, step, failLater = nil, 10, 0
	tr.Progress = func(step int, loss float32, ms float64) { log = append(log, fmt.Sprint(step)); stop.Store(true) }
	tr.Steps = 30
	r, err = tr.Run()
	if got := strings.Join(log, " "); err != nil || !r.Stopped || r.Steps != 9 || got != "u u L u u L u u L w13 13 w16 16 w19 19" {
		t.Errorf("ag.stop at the first read: %v, result %+v, calls %q", err, r, got)
	}
	stop.Store(false)

	tr.Steps, tr.Every, tr.Progress, step, most = 500, 1, nil, 10, 0
	if _, err := tr.Run(); err != nil || inFlight != 0 || most > maxInFlight+1 {
		t.Errorf("500 steps read every step: %v, %d reads left in flight, %d at most (want <= %d)", err, inFlight, most, maxInFlight+1)
	}
}

// fakeLoss is a Loss whose Item is the function.
type fakeLoss func() (float32, error)

func (f fakeLoss) Item() (float32, error) { return f() }

// A loss read back as NaN or an infinity is reported to Progress and ends
// the call with ErrDiverged, naming the step; the steps run are counted
// and the reads in flight waited for. Before, the answer failed to encode
// (JSON has no NaN) and the whole result was lost.
func TestTrainDiverged(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, bad := range []float32{float32(math.NaN()), inf, -inf} {
		for _, later := range []bool{false, true} {
			n := 10
			losses := func() (float32, error) {
				n++
				if n >= 15 {
					return bad, nil
				}
				return float32(n), nil
			}
			var seen []int
			inFlight := 0
			tr := Train{Steps: 20, Every: 2, First: 11,
				Unread:   func() error { n++; return nil },
				Progress: func(step int, loss float32, ms float64) { seen = append(seen, step) },
			}
			if later {
				tr.Later = func() (Loss, error) {
					l, err := losses()
					inFlight++
					return fakeLoss(func() (float32, error) { inFlight--; return l, err }), nil
				}
			} else {
				tr.Read = losses
			}
			r, err := tr.Run()
			if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), fmt.Sprintf("step 16: the loss is %v", bad)) {
				t.Errorf("loss %v (later %t): error %v, want ErrDiverged naming step 16", bad, later, err)
			}
			if r.Steps < 6 || r.Total != 10+r.Steps || r.LastLoss != 14 || seen[len(seen)-1] != 16 || inFlight != 0 {
				t.Errorf("loss %v (later %t): result %+v, progress at %v, %d reads in flight; want 6 or more steps counted, the last finite loss 14, step 16 reported, none in flight",
					bad, later, r, seen, inFlight)
			}
		}
	}
}
