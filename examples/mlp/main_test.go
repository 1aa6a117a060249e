package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

// config is Spec's defaults with the given values.
func config(kv ...any) app.Config {
	cfg := app.Config{}
	for _, p := range Spec.Params {
		cfg[p.Name] = p.Default
	}
	for i := 0; i < len(kv); i += 2 {
		cfg[kv[i].(string)] = float64(kv[i+1].(int))
	}
	return cfg
}

func build(t *testing.T, dev *core.Device, cfg app.Config) *MLP {
	t.Helper()
	m, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildTrainLossFalls(t *testing.T) {
	m := build(t, testdev.Open(t), config("width", 32, "depth", 2, "batch", 16))
	n := 0
	for _, p := range m.Params() {
		n += p.Len()
	}
	if n != 2*(32*32+32) || m.FLOPs() != 3*2*16*32*32*2 {
		t.Fatalf("params %d flops %g, want %d and %d", n, m.FLOPs(), 2*(32*32+32), 3*2*16*32*32*2)
	}
	var first, last float32
	for i := range 40 {
		l, err := m.Step()
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(float64(l)) {
			t.Fatalf("step %d: loss NaN", i+1)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	if !(last < 0.5*first) {
		t.Fatalf("loss %g -> %g: want at least halved", first, last)
	}
}

// TestTrainModes trains the same model from the same start in each mode
// SetMode sets: the modes differ in how a step reaches the device, not in
// what it computes, so the losses agree step for step. Read every third
// step (StepUnread between), the losses read are those of the same steps
// read one by one. The mode set is the one the steps run in: eager runs a
// program per op, the lazy modes one per step.
func TestTrainModes(t *testing.T) {
	dev := testdev.Open(t)
	cfg := config("width", 24, "depth", 3, "batch", 8)
	losses := map[string][]float32{}
	runs := map[string]int{}
	for _, mode := range []string{app.ModeLazy, app.ModeCaptured, app.ModeEager} {
		m := build(t, dev, cfg)
		if err := m.SetMode(mode); err != nil {
			t.Fatal(err)
		}
		runs[mode] = -dev.Stats().Runs
		for range 7 {
			l, err := m.Step()
			if err != nil {
				t.Fatal(err)
			}
			losses[mode] = append(losses[mode], l)
		}
		runs[mode] += dev.Stats().Runs
		m = build(t, dev, cfg)
		if err := m.SetMode(mode); err != nil {
			t.Fatal(err)
		}
		var every []float32
		for i := range 7 {
			if i == 2 || i == 5 || i == 6 {
				l, err := m.Step()
				if err != nil {
					t.Fatal(err)
				}
				every = append(every, l)
			} else if err := m.StepUnread(); err != nil {
				t.Fatal(err)
			}
		}
		all := losses[mode]
		if want := []float32{all[2], all[5], all[6]}; fmt.Sprint(every) != fmt.Sprint(want) {
			t.Errorf("%s, read at steps 3, 6 and 7: losses %v, read each step %v", mode, every, want)
		}
	}
	for _, mode := range []string{app.ModeCaptured, app.ModeEager} {
		for i, l := range losses[mode] {
			if want := losses[app.ModeLazy][i]; math.Abs(float64(l-want)) > 1e-5*math.Abs(float64(want)) {
				t.Fatalf("%s step %d: loss %g, lazy %g", mode, i+1, l, want)
			}
		}
	}
	if runs[app.ModeEager] < 5*runs[app.ModeLazy] || runs[app.ModeEager] < 5*runs[app.ModeCaptured] {
		t.Errorf("program runs in 7 steps: %v: want eager's 5x lazy's and captured's at least", runs)
	}
	m := build(t, dev, cfg)
	if err := m.SetMode("jit"); err == nil || !strings.Contains(err.Error(), `mode "jit"`) {
		t.Fatalf(`SetMode("jit"): error %v, want one naming the mode`, err)
	}
	if err := m.SetMode(""); err != nil || m.mode != app.ModeLazy {
		t.Fatalf(`SetMode(""): %v, mode %q: want lazy`, err, m.mode)
	}
}

// ag.build({width: 4096, depth: 64}) is inside the fields' bounds but needs
// about 17 GiB: it killed the wasm runtime (out of memory) and every later
// call failed. It is refused before anything is built, naming the size and
// the largest that fits.
func TestBuildRefusesWhatDoesNotFit(t *testing.T) {
	dev := testdev.Open(t)
	_, err := New(dev, config("width", 4096, "depth", 64, "batch", 16))
	if err == nil {
		t.Fatal("build of a 4096x64 MLP: no error, want a refusal before building")
	}
	var w, d int
	msg := err.Error()
	i := strings.Index(msg, "the largest that fits: ")
	if i < 0 || !strings.Contains(msg, "width 4096, depth 64, batch 16 needs about") || !strings.Contains(msg, "GiB") {
		t.Fatalf("build error %q: want the size asked for, its bytes and the largest that fits", msg)
	}
	if _, err := fmt.Sscanf(msg[i:], "the largest that fits: width %d at depth 64, or depth %d at width 4096", &w, &d); err != nil {
		t.Fatalf("build error %q: %v", msg, err)
	}
	// The widths and depths named are the largest within the budget.
	if !(mlpBytes(w, 64, 16) <= memoryBudget && mlpBytes(w+1, 64, 16) > memoryBudget) {
		t.Errorf("largest width at depth 64 named %d: %d bytes, %d at %d; budget %d", w, mlpBytes(w, 64, 16), mlpBytes(w+1, 64, 16), w+1, memoryBudget)
	}
	if !(d >= 1 && mlpBytes(4096, d, 16) <= memoryBudget && mlpBytes(4096, d+1, 16) > memoryBudget) {
		t.Errorf("largest depth at width 4096 named %d: over or under the budget", d)
	}
	// The estimate covers the parameters, gradients and Adam's moments.
	if p := int64(64) * (4096*4096 + 4096); mlpBytes(4096, 64, 16) < 16*p {
		t.Errorf("mlpBytes(4096, 64, 16) = %d, below 16 bytes for each of %d parameters", mlpBytes(4096, 64, 16), p)
	}
	// A device's buffer limit (a WebGPU adapter's maxBufferSize): a
	// weight matrix of 2048x2048 floats over a limit of 2^20 floats.
	err = checkFits(2048, 2, 16, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "has a buffer of 4194304 floats, over the 1048576") || !strings.Contains(err.Error(), "width 1024 at depth 2") {
		t.Errorf("checkFits of 2048x2 under a 2^20-float buffer limit: %v; want the buffer named and width 1024 offered", err)
	}
	if err := checkFits(1024, 2, 16, 1<<20); err != nil {
		t.Errorf("checkFits of 1024x2 under a 2^20-float buffer limit: %v", err)
	}
}
