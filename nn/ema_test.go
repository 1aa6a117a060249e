package nn

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestEMA checks the averages against the formula in float64 along an SGD
// run (the update reads the stepped weights), and that Swap exchanges the
// weights and the averages exactly, twice.
func TestEMA(t *testing.T) {
	dev := openDev(t)
	w0 := []float64{0.5, -0.3, 1.2, 0.0, -2.0, 0.8}
	w := dev.Param(f32s(w0), len(w0))
	opt := NewSGD([]*core.Tensor{w}, 0.1, 0.5)
	const decay = 0.75
	ema := NewEMA([]*core.Tensor{w}, decay)
	if err := ema.Swap(); err == nil || !strings.Contains(err.Error(), "no Update") {
		t.Errorf("Swap before Update: err = %v", err)
	}
	ref := make([]float64, len(w0))
	for k := range 5 {
		opt.ZeroGrad()
		if err := quadLoss(w, k).Backward(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		if err := ema.Update(); err != nil {
			t.Fatal(err)
		}
		cur, err := w.Data()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range cur {
			if k == 0 {
				ref[i] = float64(v) // the first update copies
			} else {
				ref[i] = decay*ref[i] + (1-decay)*float64(v)
			}
		}
	}
	if ema.Count() != 5 {
		t.Errorf("Count %d, want 5", ema.Count())
	}
	avgs, err := ema.Averages()
	if err != nil {
		t.Fatal(err)
	}
	avg, err := avgs[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	for i := range avg {
		if math.Abs(float64(avg[i])-ref[i]) > 1e-6*(1+math.Abs(ref[i])) {
			t.Errorf("average %d = %.8g, want %.8g", i, avg[i], ref[i])
		}
	}
	before, err := w.Data()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if err := ema.Swap(); err != nil {
			t.Fatal(err)
		}
		gotW, err := w.Data()
		if err != nil {
			t.Fatal(err)
		}
		gotA, err := avgs[0].Data()
		if err != nil {
			t.Fatal(err)
		}
		wantW, wantA := avg, before
		if round == 1 {
			wantW, wantA = before, avg
		}
		for i := range gotW {
			if gotW[i] != wantW[i] || gotA[i] != wantA[i] {
				t.Errorf("swap %d: element %d: weight %g average %g, want %g and %g exactly", round+1, i, gotW[i], gotA[i], wantW[i], wantA[i])
			}
		}
	}
	ema.Decay = 1.5
	if err := ema.Update(); err == nil || !strings.Contains(err.Error(), "decay 1.5") {
		t.Errorf("decay 1.5: err = %v", err)
	}
}
