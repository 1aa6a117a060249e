//go:build !js

package app

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// line fits y = 2x - 1 with one Linear layer: a Trainer, Evaluator,
// Sampler and Counter, stepping lazily.
type line struct {
	dev  *core.Device
	lin  *nn.Linear
	opt  *nn.Adam
	x, y []float32
}

func (l *line) Step() (float32, error) {
	l.opt.ZeroGrad()
	loss := nn.MSELoss(l.lin.Forward(l.dev.Tensor(l.x, 4, 1)), l.dev.Tensor(l.y, 4, 1)).Keep()
	if err := loss.Backward(); err != nil {
		return 0, err
	}
	if err := l.opt.Step(); err != nil {
		return 0, err
	}
	return loss.Item()
}
func (l *line) Eval() (Metrics, error)  { return Metrics{"w": 1}, nil }
func (l *line) Sample() (string, error) { return "a sample", nil }
func (l *line) Params() []*core.Tensor  { return l.lin.Params() }

var lineSpec = Spec{
	Name: "line", Describe: "fits a line", Steps: 50,
	Params: []Param{{Name: "lr", Default: 0.1, Min: 0, Max: 1, Doc: "learning rate"}, {Name: "seed", Default: 1, Min: 0, Max: 9, Int: true}},
	Build: func(dev *core.Device, cfg Config) (Trainer, error) {
		l := &line{dev: dev, lin: nn.NewLinear(dev, 1, 1, true, nn.NewRNG(uint64(cfg.Int("seed")))),
			x: []float32{-1, 0, 1, 2}, y: []float32{-3, -1, 1, 3}}
		l.opt = nn.NewAdam(l.lin.Params(), cfg.Float32("lr"))
		return l, nil
	},
}

func TestRunArgs(t *testing.T) {
	var out bytes.Buffer
	if err := RunArgs(lineSpec, []string{"-device", "cpu", "-steps", "100", "-lr", "0.05"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"line on cpu", "lr=0.05 seed=1", "2 parameters", "step    100", "metrics: w 1", "sample:\na sample"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Whole-number parameters are int flags, their bounds written in full.
	var help bytes.Buffer
	big := lineSpec
	big.Params = append(slices.Clone(lineSpec.Params), Param{Name: "capacity", Default: 10000, Min: 100, Max: 1 << 22, Int: true, Doc: "rows"})
	if err := RunArgs(big, []string{"-h"}, &help); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-seed int", "-capacity int", "rows (100..4194304) (default 10000)", "-lr float"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, help.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-lr", "2"}, "lr = 2: want a number in 0..1"},
		{[]string{"-seed", "1.5"}, `invalid value "1.5" for flag -seed`}, // an int flag
		{[]string{"-nope", "1"}, "flag provided but not defined"},
		{[]string{"-steps", "0"}, "-steps 0"},
		{[]string{"extra"}, "unexpected arguments"},
		// one train call reads the loss once, at most pageapi.MaxEvery steps
		{[]string{"-eval-every", "-1"}, "-eval-every -1: want 0..100000"},
		{[]string{"-eval-every", "100001"}, "-eval-every 100001: want 0..100000"},
		// refused before training, not after it
		{[]string{"-profile-json", filepath.Join(t.TempDir(), "no-such-folder", "p.json")}, "-profile-json"},
		{[]string{"-profile-json", t.TempDir()}, "is a folder"},
	} {
		err := RunArgs(lineSpec, append([]string{"-device", "cpu"}, tc.args...), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunArgs %q: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
	// natively a device asked for by name never falls back
	if err := RunArgs(lineSpec, []string{"-device", "nosuch"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("-device nosuch: error %v, want one naming the device", err)
	}
	bad := lineSpec
	bad.Params = append([]Param{{Name: "steps"}}, bad.Params...)
	if err := RunArgs(bad, nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a parameter named steps: error %v, want it refused", err)
	}
}

// nothing is a Trainer whose steps do nothing, for counts of steps.
type nothing struct{ steps int }

func (n *nothing) Step() (float32, error) { n.steps++; return 1, nil }

// A run of more than ten times pageapi.MaxEvery steps takes its default
// ten lines in calls of at most MaxEvery steps: -steps 1000010 failed with
// "train: every 100001" after building the model.
func TestRunArgsManySteps(t *testing.T) {
	tr := &nothing{}
	spec := Spec{Name: "nothing", Build: func(*core.Device, Config) (Trainer, error) { return tr, nil }}
	var out bytes.Buffer
	if err := RunArgs(spec, []string{"-device", "cpu", "-steps", "1000010"}, &out); err != nil {
		t.Fatal(err)
	}
	if tr.steps != 1000010 || !strings.Contains(out.String(), "step 1000010") {
		t.Errorf("%d steps taken, output:\n%s", tr.steps, out.String())
	}
}

// The session the page drives: build with defaults, the loss falls, the
// metrics, the one profile mode of a plain Trainer and its trace.
func TestSession(t *testing.T) {
	s := newSession(&lineSpec, "test")
	if _, err := s.train(1, "", 1, nil); !errors.Is(err, errNoModel) {
		t.Fatalf("train before build: %v, want errNoModel", err)
	}
	info, err := s.build(map[string]float64{"lr": 0.05}, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer s.dev.Close()
	if info.Name != "cpu" || info.Params != 2 || info.Config["seed"] != 1 || !info.Eval || !info.Sample || len(info.Modes) != 1 || info.Modes[0] != ModeStep {
		t.Fatalf("build: %+v", info)
	}
	r, err := s.train(200, "", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.LastLoss < r.FirstLoss/10) {
		t.Errorf("loss %g -> %g: want it divided by 10", r.FirstLoss, r.LastLoss)
	}
	if r.Mode != "" || info.FLOPs != 0 {
		t.Errorf("a plain Trainer: train mode %q, build flops %g; want neither", r.Mode, info.FLOPs)
	}
	if _, err := s.train(1, ModeLazy, 1, nil); err == nil || !strings.Contains(err.Error(), `mode "lazy": line trains in its own step only`) {
		t.Errorf("train in lazy mode of a plain Trainer: %v, want a refusal", err)
	}
	if m, err := s.eval(); err != nil || m["w"] != 1 {
		t.Errorf("eval: %v, %v", m, err)
	}
	if _, err := s.profile(ModeLazy, 2); err == nil || !strings.Contains(err.Error(), "[step]") {
		t.Errorf("profile in lazy mode of a plain Trainer: %v, want the modes it runs in", err)
	}
	p, err := s.profile(ModeStep, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps != 3 || p.Mode != ModeStep || p.Forward.Ops == 0 || p.Backward.Ops == 0 {
		t.Errorf("profile: %d steps, mode %q, forward %d ops, backward %d ops", p.Steps, p.Mode, p.Forward.Ops, p.Backward.Ops)
	}
	if tr, err := s.traceJSON(""); err != nil || !strings.Contains(tr, "traceEvents") {
		t.Errorf("trace: %.80q, %v", tr, err)
	}
	if _, err := s.build(map[string]float64{"depth": 3}, "cpu"); err == nil || !strings.Contains(err.Error(), `unknown parameter "depth"`) {
		t.Errorf("build with an unknown parameter: %v", err)
	}
}

// unreadLine is line with StepUnread: the page's steps between reads.
type unreadLine struct {
	line
	reads, unreads int
}

func (l *unreadLine) Step() (float32, error) { l.reads++; return l.line.Step() }
func (l *unreadLine) StepUnread() error {
	l.unreads++
	_, err := l.line.Step()
	return err
}

// With every 3, 7 steps read at 3, 6 and 7 and take the other four
// unread (an UnreadStepper) or read but not reported (a plain Trainer);
// both train as 7 read steps do.
func TestTrainEvery(t *testing.T) {
	var got *unreadLine
	spec := lineSpec
	spec.Build = func(dev *core.Device, cfg Config) (Trainer, error) {
		tr, err := lineSpec.Build(dev, cfg)
		if err != nil {
			return nil, err
		}
		got = &unreadLine{line: *tr.(*line)}
		return got, nil
	}
	run := func(spec *Spec, every int) ([]int, TrainResult) {
		s := newSession(spec, "test")
		if _, err := s.build(nil, "cpu"); err != nil {
			t.Fatal(err)
		}
		defer s.dev.Close()
		var steps []int
		r, err := s.train(7, "", every, func(step int, _ float32, _ float64) { steps = append(steps, step) })
		if err != nil {
			t.Fatal(err)
		}
		return steps, r
	}
	_, want := run(&lineSpec, 1)
	for name, sp := range map[string]*Spec{"an UnreadStepper": &spec, "a plain Trainer": &lineSpec} {
		steps, r := run(sp, 3)
		if fmt.Sprint(steps) != "[3 6 7]" || r.Steps != 7 || r.Every != 3 || len(r.StepMS) != 7 || r.LastLoss != want.LastLoss {
			t.Errorf("%s, every 3 of 7 steps: progress at %v, result %+v; want progress at [3 6 7] and the last loss %v", name, steps, r, want.LastLoss)
		}
	}
	if got.reads != 3 || got.unreads != 4 {
		t.Errorf("an UnreadStepper, every 3 of 7 steps: %d read and %d unread, want 3 and 4", got.reads, got.unreads)
	}
	s := newSession(&lineSpec, "test")
	if _, err := s.build(nil, "cpu"); err != nil {
		t.Fatal(err)
	}
	defer s.dev.Close()
	if _, err := s.train(5, "", 0, nil); err == nil || !strings.Contains(err.Error(), "every 0") {
		t.Errorf("train every 0: %v, want an error naming it", err)
	}
}

// modal is line as a ModeTrainer and FLOPsCounter: it records the modes
// set and the mode each step ran in.
type modal struct {
	line
	mode string
	set  []string
	ran  []string
}

func (m *modal) SetMode(mode string) error {
	if mode == "bad" {
		return errors.New("no such mode")
	}
	m.set = append(m.set, mode)
	m.mode = mode
	return nil
}
func (m *modal) Step() (float32, error) { m.ran = append(m.ran, m.mode); return m.line.Step() }
func (m *modal) StepMode(mode string) (float32, error) {
	m.ran = append(m.ran, "profile "+mode)
	return m.line.Step()
}
func (m *modal) FLOPs() float64 { return 42 }

// ag.train's {mode} reaches a ModeTrainer before its steps (and "" when
// the call names none); a mode outside the three is refused before any
// step; build reports a FLOPsCounter's FLOPs.
func TestTrainMode(t *testing.T) {
	var got *modal
	spec := lineSpec
	spec.Build = func(dev *core.Device, cfg Config) (Trainer, error) {
		tr, err := lineSpec.Build(dev, cfg)
		if err != nil {
			return nil, err
		}
		got = &modal{line: *tr.(*line)}
		return got, nil
	}
	s := newSession(&spec, "test")
	info, err := s.build(nil, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer s.dev.Close()
	if info.FLOPs != 42 || len(info.Modes) != 3 {
		t.Errorf("build: flops %g, modes %v; want 42 and the three modes", info.FLOPs, info.Modes)
	}
	for _, mode := range []string{ModeCaptured, "", ModeEager} {
		r, err := s.train(2, mode, 1, nil)
		if err != nil || r.Mode != mode {
			t.Fatalf("train(2, %q): mode %q, %v", mode, r.Mode, err)
		}
	}
	if _, err := s.train(2, "jit", 1, nil); err == nil || !strings.Contains(err.Error(), `mode "jit": want "eager", "lazy" or "captured"`) {
		t.Errorf(`train mode "jit": %v, want a refusal naming the modes`, err)
	}
	if _, err := s.profile(ModeLazy, 1); err != nil {
		t.Fatal(err)
	}
	want := `[captured  eager] [captured captured   eager eager profile lazy profile lazy]`
	if g := fmt.Sprint(got.set, " ", got.ran); g != want {
		t.Errorf("modes set and steps run: %s, want %s", g, want)
	}
}

// outLine is line with Outputs: its weight and bias.
type outLine struct{ line }

func (l *outLine) Outputs() ([]float32, error) {
	w, err := l.lin.W.Data()
	if err != nil {
		return nil, err
	}
	b, err := l.lin.B.Data()
	return append(w, b...), err
}

// The page's ag.outputs: an Outputter's values after training, and a
// refusal naming the app whose Trainer is not one.
func TestSessionOutputs(t *testing.T) {
	s := newSession(&lineSpec, "test")
	if _, err := s.outputs(); !errors.Is(err, errNoModel) {
		t.Errorf("outputs before build: %v, want errNoModel", err)
	}
	if _, err := s.build(nil, "cpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.outputs(); err == nil || !strings.Contains(err.Error(), "line has no outputs to show (its Trainer is not an app.Outputter)") {
		t.Errorf("outputs of a plain Trainer: %v, want a refusal", err)
	}
	s.dev.Close()
	spec := lineSpec
	spec.Build = func(dev *core.Device, cfg Config) (Trainer, error) {
		tr, err := lineSpec.Build(dev, cfg)
		if err != nil {
			return nil, err
		}
		return &outLine{*tr.(*line)}, nil
	}
	s = newSession(&spec, "test")
	if _, err := s.build(nil, "cpu"); err != nil {
		t.Fatal(err)
	}
	defer s.dev.Close()
	if _, err := s.train(300, "", 1, nil); err != nil {
		t.Fatal(err)
	}
	out, err := s.outputs()
	if err != nil || len(out) != 2 || math.Abs(float64(out[0])-2) > 0.05 || math.Abs(float64(out[1])+1) > 0.05 {
		t.Errorf("outputs after fitting y = 2x - 1: %v, %v; want about [2 -1]", out, err)
	}
}
