package webgpu

import (
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
)

// TestCalibrationCadence: a calibration run that costs 1 ms more than a
// plain 2 ms run comes back after 1/(0.05*2) = 10 plain runs, and plain
// runs share their time as the calibration measured it, marked estimated.
func TestCalibrationCadence(t *testing.T) {
	var c calibration
	if !c.due() {
		t.Fatal("a new program's first profiled run must calibrate")
	}
	cal := &backend.NodeTimes{Dur: []time.Duration{0, 3 * time.Millisecond, time.Millisecond}, How: []backend.TimeKind{backend.TimeNone, backend.TimeMeasured, backend.TimeSplit}}
	c.calibrated(cal, 3*time.Millisecond)
	if c.due() || c.left != 1 {
		t.Fatalf("after the first calibration: left %d, want one plain run to learn its cost", c.left)
	}
	got := backend.NewNodeTimes(3)
	c.spread(8*time.Millisecond, 2*time.Millisecond, got)
	if got.Dur[0] != 0 || got.How[0] != backend.TimeNone || got.Dur[1] != 6*time.Millisecond || got.Dur[2] != 2*time.Millisecond ||
		got.How[1] != backend.TimeEstimated || got.How[2] != backend.TimeEstimated {
		t.Errorf("spread 8 ms by a 3:1 calibration: %v %v", got.Dur, got.How)
	}
	if !c.due() {
		t.Fatal("the second calibration is due after the plain run")
	}
	c.calibrated(cal, 3*time.Millisecond)
	if want := 10; c.left != want {
		t.Errorf("calibration 1 ms over a 2 ms plain run at a %g budget: every %d runs, want %d", timingBudget, c.left, want)
	}
}
