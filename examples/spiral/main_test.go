package main

import (
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

func defaults() app.Config {
	cfg := app.Config{}
	for _, p := range Spec.Params {
		cfg[p.Name] = p.Default
	}
	return cfg
}

// The spiral at its default size on AG_TEST_DEVICE (default cpu): an
// untrained net is near chance (1/3); 300 captured steps must bring both
// accuracies to 0.9 or more and the loss (mean of 20 steps) down 3 times.
func TestSpiralLearns(t *testing.T) {
	dev := openDev(t)
	m, err := New(dev, defaults())
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.Eval()
	if err != nil {
		t.Fatal(err)
	}
	if before["test accuracy"] > 0.6 {
		t.Fatalf("untrained test accuracy %.3f: want near chance (1/3)", before["test accuracy"])
	}
	const steps = 300
	var first, last float64
	for i := range steps {
		l, err := m.Step()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if i < 20 {
			first += float64(l) / 20
		} else if i >= steps-20 {
			last += float64(l) / 20
		}
	}
	after, err := m.Eval()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: loss %.3f -> %.3f; accuracy %v -> %v", dev, first, last, before, after)
	if !(last < first/3) {
		t.Errorf("loss (mean of 20 steps) %.3f -> %.3f: want it divided by 3 or more", first, last)
	}
	for _, k := range []string{"train accuracy", "test accuracy"} {
		if after[k] < 0.9 {
			t.Errorf("%s %.3f after %d steps: want >= 0.9", k, after[k], steps)
		}
	}
}

// The eager and lazy steps train the same model: a few steps of each keep
// the loss finite and falling from the untrained ln(3).
func TestSpiralModes(t *testing.T) {
	dev := openDev(t)
	for _, mode := range []string{app.ModeEager, app.ModeLazy, app.ModeCaptured} {
		m, err := New(dev, defaults())
		if err != nil {
			t.Fatal(err)
		}
		var first, l float32
		for i := range 40 {
			if l, err = m.StepMode(mode); err != nil {
				t.Fatalf("%s step %d: %v", mode, i, err)
			}
			if i == 0 {
				first = l
			}
		}
		if !(l < first) || first < 0.9 || first > 1.4 {
			t.Errorf("%s: loss %.3f -> %.3f: want about ln 3 = 1.10 at first, then lower", mode, first, l)
		}
	}
}

// StepUnread trains as Step does: two models from the same seed, one
// stepping with StepUnread between reads, read the same loss at step 10.
func TestSpiralStepUnread(t *testing.T) {
	var last [2]float32
	for i, unread := range []bool{false, true} {
		m, err := New(openDev(t), defaults())
		if err != nil {
			t.Fatal(err)
		}
		for k := range 10 {
			if unread && k < 9 {
				err = m.StepUnread()
			} else {
				last[i], err = m.Step()
			}
			if err != nil {
				t.Fatalf("unread %t step %d: %v", unread, k, err)
			}
		}
	}
	if last[0] != last[1] {
		t.Errorf("loss at step 10: %v after 9 unread steps, %v after read ones", last[1], last[0])
	}
	var _ app.UnreadStepper = (*Model)(nil)
	var _ app.LaterStepper = (*Model)(nil)
}
