package pageapi

import (
	"errors"
	"fmt"
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
