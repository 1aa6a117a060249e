package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	_ "github.com/ag-go/ag/backend/cpu"
	"github.com/ag-go/ag/profile"
)

func TestBuildTrainLossFalls(t *testing.T) {
	s := newSession()
	info, err := s.build(BuildConfig{Width: 32, Depth: 2, Batch: 16, LR: 1e-2, Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "cpu" || info.Params != 2*(32*32+32) {
		t.Fatalf("build: name %q params %d, want cpu and %d", info.Name, info.Params, 2*(32*32+32))
	}
	var calls int
	r, err := s.train(40, "", 1, func(step int, loss float32, ms float64) {
		calls++
		if step != calls || math.IsNaN(float64(loss)) || ms < 0 {
			t.Errorf("progress(%d, %g, %g) at call %d", step, loss, ms, calls)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 40 || r.Steps != 40 || r.Total != 40 || len(r.StepMS) != 40 {
		t.Fatalf("train: %d calls, result %+v", calls, r)
	}
	if !(r.LastLoss < 0.5*r.FirstLoss) {
		t.Fatalf("loss %g -> %g: want at least halved", r.FirstLoss, r.LastLoss)
	}
}

// TestTrainModes trains the same model from the same start in each mode:
// the modes differ in how a step reaches the device, not in what it
// computes, so the losses agree step for step.
func TestTrainModes(t *testing.T) {
	cfg := BuildConfig{Width: 24, Depth: 3, Batch: 8, LR: 1e-2, Device: "cpu"}
	losses := map[string][]float32{}
	for _, mode := range []string{ModeLazy, ModeCaptured, ModeEager} {
		s := newSession()
		if _, err := s.build(cfg); err != nil {
			t.Fatal(err)
		}
		r, err := s.train(12, mode, 1, func(_ int, loss float32, _ float64) { losses[mode] = append(losses[mode], loss) })
		if err != nil {
			t.Fatal(err)
		}
		if r.Mode != mode || r.Steps != 12 {
			t.Fatalf("train(12, %q): result %+v", mode, r)
		}
	}
	for _, mode := range []string{ModeCaptured, ModeEager} {
		for i, l := range losses[mode] {
			if want := losses[ModeLazy][i]; math.Abs(float64(l-want)) > 1e-5*math.Abs(float64(want)) {
				t.Fatalf("%s step %d: loss %g, lazy %g", mode, i+1, l, want)
			}
		}
	}
	s := newSession()
	if _, err := s.build(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.train(1, "jit", 1, nil); err == nil || !strings.Contains(err.Error(), `mode "jit"`) {
		t.Fatalf(`train mode "jit": error %v, want one naming the mode`, err)
	}
}

// TestTrainEvery reads the loss every third step: progress comes at steps
// 3, 6 and 7 (the last is always read), each step keeps a time, and the
// losses read are those of the same steps read one by one, in each mode.
func TestTrainEvery(t *testing.T) {
	cfg := BuildConfig{Width: 24, Depth: 3, Batch: 8, LR: 1e-2, Device: "cpu"}
	for _, mode := range []string{ModeLazy, ModeCaptured, ModeEager} {
		var all []float32
		s := newSession()
		if _, err := s.build(cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := s.train(7, mode, 1, func(_ int, loss float32, _ float64) { all = append(all, loss) }); err != nil {
			t.Fatal(err)
		}
		s = newSession()
		if _, err := s.build(cfg); err != nil {
			t.Fatal(err)
		}
		var steps []int
		var losses []float32
		r, err := s.train(7, mode, 3, func(step int, loss float32, ms float64) {
			steps, losses = append(steps, step), append(losses, loss)
			if ms < 0 {
				t.Errorf("%s: progress at step %d with %g ms", mode, step, ms)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []float32{all[2], all[5], all[6]}
		if fmt.Sprint(steps) != "[3 6 7]" || fmt.Sprint(losses) != fmt.Sprint(want) {
			t.Errorf("%s, every 3 of 7 steps: progress at %v with losses %v, want at [3 6 7] with %v", mode, steps, losses, want)
		}
		if r.Steps != 7 || r.Every != 3 || len(r.StepMS) != 7 || r.FirstLoss != float64(all[2]) || r.LastLoss != float64(all[6]) {
			t.Errorf("%s, every 3 of 7 steps: result %+v", mode, r)
		}
	}
	s := newSession()
	if _, err := s.build(cfg); err != nil {
		t.Fatal(err)
	}
	for _, every := range []int{0, -1, 100001} {
		if _, err := s.train(5, ModeLazy, every, nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("every %d", every)) {
			t.Errorf("train every %d: error %v, want one naming it", every, err)
		}
	}
}

func TestBestFallsBackToCPU(t *testing.T) {
	tests := []struct {
		ask     string
		drivers []DriverJSON
		want    string
	}{
		{"best", []DriverJSON{{Name: "webgpu", OK: true}, {Name: "cpu", OK: true}}, "webgpu"},
		{"", []DriverJSON{{Name: "webgpu", OK: false}, {Name: "cpu", OK: true}}, "cpu"},
		{"best", []DriverJSON{{Name: "cpu", OK: true}}, "cpu"},
		{"cpu", []DriverJSON{{Name: "webgpu", OK: true}}, "cpu"},
	}
	for _, tt := range tests {
		if got := pickDevice(tt.ask, tt.drivers); got != tt.want {
			t.Errorf("pickDevice(%q, %v) = %q, want %q", tt.ask, tt.drivers, got, tt.want)
		}
	}
}

func TestProfileModes(t *testing.T) {
	s := newSession()
	if _, err := s.profile(ModeLazy, 2); err == nil {
		t.Fatal("profile before build: want an error")
	}
	if _, err := s.build(BuildConfig{Width: 16, Depth: 2, Batch: 8, Device: "cpu"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.profile("jit", 2); err == nil {
		t.Fatal(`profile mode "jit": want an error`)
	}
	const steps = 3
	got := map[string]*WebProfile{}
	for _, mode := range []string{ModeEager, ModeLazy, ModeCaptured} {
		p, err := s.profile(mode, steps)
		if err != nil {
			t.Fatal(err)
		}
		got[mode] = p
		t.Logf("%-8s fwd %.2f ms bwd %.2f ms upd %.2f ms, %d launches, %d compiles, up %d B, coverage %.1f%%",
			mode, p.Forward.TotalMS, p.Backward.TotalMS, p.Update.TotalMS, p.Launches.Total, p.Compiles, p.Transfers.UpBytes, p.CoveragePct)
		if p.Steps != steps || p.Mode != mode || p.Device == "" {
			t.Fatalf("%s: steps %d mode %q device %q", mode, p.Steps, p.Mode, p.Device)
		}
		for _, r := range []struct {
			name string
			sum  float64
			n    int
		}{{"forward", sumPct(p.Forward.Stages), len(p.Forward.Stages)}, {"backward", sumPct(p.Backward.Stages), len(p.Backward.Stages)}} {
			if r.n == 0 || math.Abs(r.sum-100) > 0.01 {
				t.Errorf("%s %s: %d stages summing to %.4f%%, want 100 +- 0.01", mode, r.name, r.n, r.sum)
			}
		}
		tr, err := s.traceJSON(mode)
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ TraceEvents []map[string]any }
		if err := json.Unmarshal([]byte(tr), &f); err != nil || len(f.TraceEvents) < 10 {
			t.Fatalf("%s trace: %d events, err %v", mode, len(f.TraceEvents), err)
		}
	}
	// Eager runs a program per op; the lazy modes one per step.
	if e, c := got[ModeEager].Launches.Total, got[ModeCaptured].Launches.Total; e < 5*c {
		t.Errorf("launches: eager %d, captured %d: want eager >= 5x captured", e, c)
	}
	if n := got[ModeLazy].Compiles; n != 0 {
		t.Errorf("lazy: %d compiles during the profile, want 0 (the cache serves every step)", n)
	}
	if n := got[ModeCaptured].Compiles; n != 0 {
		t.Errorf("captured: %d compiles during the profile, want 0", n)
	}
	if l, c := got[ModeLazy].Transfers.UpCount, got[ModeCaptured].Transfers.UpCount; l <= c {
		t.Errorf("uploads: lazy %d, captured %d: want lazy > captured (indices and hyperparameters apart, packed in one)", l, c)
	}
	if _, err := s.traceJSON(""); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got[ModeCaptured])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"schema", "forward", "backward", "update", "transfers", "launches", "mode", "mode_note", "model"} {
		if _, ok := m[k]; !ok {
			t.Errorf("profile JSON lacks %q", k)
		}
	}
}

func sumPct(st []profile.StageTime) float64 {
	var s float64
	for _, x := range st {
		s += x.Pct
	}
	return s
}

// ag.build({width: 4096, depth: 64}) is inside the fields' bounds but needs
// about 17 GiB: it killed the wasm runtime (out of memory) and every later
// call failed. It is refused before anything is built, naming the size and
// the largest that fits, and the session builds a model afterwards.
func TestBuildRefusesWhatDoesNotFit(t *testing.T) {
	s := newSession()
	_, err := s.build(BuildConfig{Width: 4096, Depth: 64, Batch: 16, Device: "cpu"})
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
	if _, err := s.build(BuildConfig{Width: 16, Depth: 2, Batch: 4, Device: "cpu"}); err != nil {
		t.Fatalf("build after a refusal: %v", err)
	}
	if _, err := s.train(2, "", 1, nil); err != nil {
		t.Fatalf("train after a refusal: %v", err)
	}
	// A device's buffer limit (a WebGPU adapter's maxBufferSize): a
	// weight matrix of 2048x2048 floats over a limit of 2^20 floats.
	err = checkFits("build", BuildConfig{Width: 2048, Depth: 2, Batch: 16}, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "has a buffer of 4194304 floats, over the 1048576") || !strings.Contains(err.Error(), "width 1024 at depth 2") {
		t.Errorf("checkFits of 2048x2 under a 2^20-float buffer limit: %v; want the buffer named and width 1024 offered", err)
	}
}
