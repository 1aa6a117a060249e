package app

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/browser/pageapi"
	"github.com/ag-go/ag/profile"
)

// Info is what the page learns of the model before building it (ag.app()).
type Info struct {
	Name       string        `json:"name"`
	Describe   string        `json:"describe"`
	Params     []Param       `json:"params"`
	Strings    []StringParam `json:"strings"`    // never null
	Files      []FileParam   `json:"files"`      // never null
	Checkpoint bool          `json:"checkpoint"` // ag.save and ag.load work
	Steps      int           `json:"steps"`      // default training steps
	Modes      []string      `json:"modes"`      // profile modes, known after build; before it, all three
	Eval       bool          `json:"eval"`       // the built Trainer is an Evaluator
	Sample     bool          `json:"sample"`     // the built Trainer is a Sampler
}

// BuildInfo is ag.build's answer.
type BuildInfo struct {
	Device   string   `json:"device"`   // the device's description
	Name     string   `json:"name"`     // driver name
	Fallback string   `json:"fallback"` // why the asked device was not used ("" when it was)
	Params   int      `json:"params"`   // parameter count (0 when the Trainer is no Counter)
	FLOPs    float64  `json:"flops"`    // arithmetic of one step (0 when the Trainer is no FLOPsCounter)
	SetupMS  float64  `json:"setup_ms"` // building model and data
	Config   Config   `json:"config"`   // every parameter's value
	Modes    []string `json:"modes"`    // the profile modes of this Trainer
	Eval     bool     `json:"eval"`
	Sample   bool     `json:"sample"`
	Unread   bool     `json:"unread"`   // the Trainer is an UnreadStepper: ag.train's every saves reads
	Built    string   `json:"built"`    // a Describer's Built, "" for others
	Warnings []string `json:"warnings"` // never null
}

// TrainResult is ag.train's answer.
type TrainResult struct {
	Mode string `json:"mode,omitempty"` // the mode asked for (ModeTrainer), "" when none was
	pageapi.TrainResult
}

// WebProfile is ag.profile's answer: profile.Profile plus the page's labels.
type WebProfile struct {
	*profile.Profile
	ModeNote string  `json:"mode_note"`
	Source   string  `json:"source"` // "browser" in the page, "native" otherwise
	Model    Config  `json:"model"`
	Compiles int     `json:"compiles"` // programs compiled during the profiled steps
	WallMS   float64 `json:"wall_ms"`  // wall time of the call, warm-up included
}

var modeNotes = map[string]string{
	ModeEager:    "every op runs as its own program when recorded (steady state, after one warm-up step)",
	ModeLazy:     "each step recorded and lowered to one program at its sync; the program comes from the cache (after one warm-up step)",
	ModeCaptured: "the step recorded once and replayed: one upload, the cached program, one download (after one warm-up step)",
	ModeStep:     "the model's own training step as it runs (after one warm-up step)",
}

// DriverJSON is one row of ag.devices().
type DriverJSON = pageapi.DriverJSON

// DevicesInfo is ag.devices()'s answer.
type DevicesInfo = pageapi.DevicesInfo

// session holds one built model. Its methods run on one goroutine at a time
// (the page's worker, or the native run); stop is the exception.
type session struct {
	spec   *Spec
	dev    *core.Device
	tr     Trainer
	cfg    Config
	total  int
	traces pageapi.Traces
	stop   atomic.Bool
	source string
	// yield lets the browser paint between steps; nil natively.
	yield func()
}

func newSession(spec *Spec, source string) *session {
	return &session{spec: spec, source: source}
}

func (s *session) info() Info {
	in := Info{Name: s.spec.Name, Describe: s.spec.Describe, Params: s.spec.Params, Steps: s.spec.steps(),
		Modes: []string{ModeEager, ModeLazy, ModeCaptured}}
	if in.Params == nil {
		in.Params = []Param{}
	}
	in.Strings, in.Files, in.Checkpoint = s.spec.Strings, s.spec.Files, s.spec.Checkpoint
	if in.Strings == nil {
		in.Strings = []StringParam{}
	}
	if in.Files == nil {
		in.Files = []FileParam{}
	}
	if s.tr != nil {
		in.Modes = modesOf(s.tr)
		_, in.Eval = s.tr.(Evaluator)
		_, in.Sample = s.tr.(Sampler)
	}
	return in
}

func modesOf(tr Trainer) []string {
	if _, ok := tr.(ModeStepper); ok {
		return []string{ModeEager, ModeLazy, ModeCaptured}
	}
	return []string{ModeStep}
}

func (s *session) devices() DevicesInfo {
	return pageapi.Devices(s.dev)
}

// pickDevice resolves "best" (see pageapi.PickDevice).
func pickDevice(name string, drivers []DriverJSON) string { return pageapi.PickDevice(name, drivers) }

// build opens the device (reusing the open one when the name matches) and
// builds a fresh Trainer with the given parameters. In the page a device
// other than cpu that fails to open falls back to cpu, and the answer says
// why (a browser without WebGPU still trains); natively a device asked for
// by name that fails to open is an error, as core.Open's is.
func (s *session) build(nums map[string]float64, device string) (BuildInfo, error) {
	return s.buildInput(given{nums: nums}, device)
}

// buildInput is build with every kind of input (see Input).
func (s *session) buildInput(g given, device string) (BuildInfo, error) {
	in, err := s.spec.input(g)
	if err != nil {
		return BuildInfo{}, fmt.Errorf("build: %w", err)
	}
	cfg := in.Config
	d := s.devices()
	want := device
	if want == "" || want == "best" {
		want = pickDevice("best", d.Drivers)
	}
	info := BuildInfo{Warnings: []string{}}
	if s.dev != nil && s.dev.Name() != want {
		if err := s.dev.Close(); err != nil {
			return BuildInfo{}, fmt.Errorf("build: closing %s: %w", s.dev, err)
		}
		s.dev = nil
	}
	s.tr = nil
	if s.dev == nil {
		dev, err := core.Open(want)
		if err != nil && want != "cpu" && want != "auto" && s.source != "native" {
			info.Fallback = err.Error()
			info.Warnings = append(info.Warnings, fmt.Sprintf("could not open %s (%v): using cpu", want, err))
			dev, err = core.Open("cpu")
		}
		if err != nil {
			return BuildInfo{}, fmt.Errorf("build: opening device %q: %w", want, err)
		}
		s.dev = dev
	}
	s.dev.SetEager(false)
	t0 := time.Now()
	var tr Trainer
	if s.spec.BuildInput != nil {
		tr, err = s.spec.BuildInput(s.dev, in)
	} else {
		tr, err = s.spec.Build(s.dev, cfg)
	}
	if err != nil {
		return BuildInfo{}, fmt.Errorf("build %s on %s: %w", s.spec.Name, s.dev, err)
	}
	if tr == nil {
		return BuildInfo{}, fmt.Errorf("build %s on %s: Build returned no Trainer and no error", s.spec.Name, s.dev)
	}
	if _, ok := tr.(Checkpointer); s.spec.Checkpoint && !ok {
		return BuildInfo{}, fmt.Errorf("build %s on %s: the Spec has Checkpoint but its Trainer %T is no app.Checkpointer", s.spec.Name, s.dev, tr)
	}
	s.tr, s.cfg, s.total = tr, cfg, 0
	if c, ok := tr.(Counter); ok {
		for _, p := range c.Params() {
			info.Params += p.Len()
		}
	}
	if d, ok := tr.(Describer); ok {
		info.Built = d.Built()
	}
	if f, ok := tr.(FLOPsCounter); ok {
		info.FLOPs = f.FLOPs()
	}
	info.Device, info.Name, info.Config = s.dev.String(), s.dev.Name(), cfg
	info.SetupMS, info.Modes = pageapi.MS(time.Since(t0)), modesOf(tr)
	_, info.Eval = tr.(Evaluator)
	_, info.Unread = tr.(UnreadStepper)
	_, info.Sample = tr.(Sampler)
	return info, nil
}

var errNoModel = errors.New("no model: call ag.build first")

// train runs steps training steps, reading the loss every `every` steps
// and at the last and calling progress after each read (pageapi.Train).
// The steps between reads are StepUnread's when the Trainer is an
// UnreadStepper; otherwise they are read too and only not reported. The
// read steps are StepLater's when it is a LaterStepper. A ModeTrainer
// steps in mode ("" its default); any other Trainer takes no mode.
func (s *session) train(steps int, mode string, every int, progress func(step int, loss float32, ms float64)) (TrainResult, error) {
	if s.tr == nil {
		return TrainResult{}, fmt.Errorf("train: %w", errNoModel)
	}
	if steps < 1 || steps > 1000000 {
		return TrainResult{}, fmt.Errorf("train: steps %d: want 1..1000000", steps)
	}
	if err := pageapi.CheckEvery(every); err != nil {
		return TrainResult{}, fmt.Errorf("train: %w", err)
	}
	mt, ok := s.tr.(ModeTrainer)
	switch {
	case ok && mode != "" && mode != ModeEager && mode != ModeLazy && mode != ModeCaptured:
		return TrainResult{}, fmt.Errorf("train: mode %q: want %q, %q or %q", mode, ModeEager, ModeLazy, ModeCaptured)
	case !ok && mode != "":
		return TrainResult{}, fmt.Errorf("train: mode %q: %s trains in its own step only (its Trainer is not an app.ModeTrainer)", mode, s.spec.Name)
	}
	if ok {
		if err := mt.SetMode(mode); err != nil {
			return TrainResult{}, fmt.Errorf("train %s: %w", s.spec.Name, err)
		}
	}
	s.stop.Store(false)
	var unread func() error
	if u, ok := s.tr.(UnreadStepper); ok {
		unread = u.StepUnread
	}
	var later func() (pageapi.Loss, error)
	if l, ok := s.tr.(LaterStepper); ok {
		later = func() (pageapi.Loss, error) { return l.StepLater() }
	}
	r, err := pageapi.Train{Steps: steps, Every: every, First: s.total + 1, Stop: &s.stop, Yield: s.yield,
		Read: s.tr.Step, Unread: unread, Later: later, Progress: progress,
		StepErr: func(step int, err error) error {
			return fmt.Errorf("train %s: step %d on %s: %w", s.spec.Name, step, s.dev, err)
		},
	}.Run()
	s.total = r.Total
	return TrainResult{Mode: mode, TrainResult: r}, err
}

// eval returns the Trainer's metrics.
func (s *session) eval() (Metrics, error) {
	if s.tr == nil {
		return nil, fmt.Errorf("eval: %w", errNoModel)
	}
	e, ok := s.tr.(Evaluator)
	if !ok {
		return nil, fmt.Errorf("eval: %s has no metrics (its Trainer is not an app.Evaluator)", s.spec.Name)
	}
	m, err := e.Eval()
	if err != nil {
		return nil, fmt.Errorf("eval %s on %s: %w", s.spec.Name, s.dev, err)
	}
	return m, nil
}

// sample returns the Trainer's sample text.
func (s *session) sample() (string, error) {
	if s.tr == nil {
		return "", fmt.Errorf("sample: %w", errNoModel)
	}
	sm, ok := s.tr.(Sampler)
	if !ok {
		return "", fmt.Errorf("sample: %s has no samples (its Trainer is not an app.Sampler)", s.spec.Name)
	}
	txt, err := sm.Sample()
	if err != nil {
		return "", fmt.Errorf("sample %s on %s: %w", s.spec.Name, s.dev, err)
	}
	return txt, nil
}

// outputs returns an Outputter's outputs.
func (s *session) outputs() ([]float32, error) {
	if s.tr == nil {
		return nil, fmt.Errorf("outputs: %w", errNoModel)
	}
	o, ok := s.tr.(Outputter)
	if !ok {
		return nil, fmt.Errorf("outputs: %s has no outputs to show (its Trainer is not an app.Outputter)", s.spec.Name)
	}
	v, err := o.Outputs()
	if err != nil {
		return nil, fmt.Errorf("outputs %s on %s: %w", s.spec.Name, s.dev, err)
	}
	return v, nil
}

// save writes the Trainer's state (a Checkpointer's Save).
func (s *session) save(w io.Writer) error {
	c, err := s.checkpointer("save")
	if err != nil {
		return err
	}
	if err := c.Save(w); err != nil {
		return fmt.Errorf("save %s: %w", s.spec.Name, err)
	}
	return nil
}

// load reads a state that save wrote into the Trainer.
func (s *session) load(r io.Reader) error {
	c, err := s.checkpointer("load")
	if err != nil {
		return err
	}
	if err := c.Load(r); err != nil {
		return fmt.Errorf("load %s: %w", s.spec.Name, err)
	}
	return nil
}

func (s *session) checkpointer(fn string) (Checkpointer, error) {
	if s.tr == nil {
		return nil, fmt.Errorf("%s: %w", fn, errNoModel)
	}
	c, ok := s.tr.(Checkpointer)
	if !ok {
		return nil, fmt.Errorf("%s: %s saves no checkpoint (its Trainer is not an app.Checkpointer)", fn, s.spec.Name)
	}
	return c, nil
}

// stepIn runs one step in mode.
func (s *session) stepIn(mode string) (float32, error) {
	if mode == ModeStep {
		return s.tr.Step()
	}
	return s.tr.(ModeStepper).StepMode(mode)
}

// profile profiles steps training steps in one of the Trainer's modes
// (after one unprofiled warm-up step) and keeps its Chrome trace.
func (s *session) profile(mode string, steps int) (*WebProfile, error) {
	if s.tr == nil {
		return nil, fmt.Errorf("profile: %w", errNoModel)
	}
	if steps < 1 || steps > 1000 {
		return nil, fmt.Errorf("profile: steps %d: want 1..1000", steps)
	}
	modes := modesOf(s.tr)
	known := false
	for _, m := range modes {
		known = known || m == mode
	}
	if !known {
		return nil, fmt.Errorf("profile: mode %q: %s runs in %v", mode, s.spec.Name, modes)
	}
	t0 := time.Now()
	if _, err := s.stepIn(mode); err != nil {
		return nil, fmt.Errorf("profile %s: warm-up step on %s: %w", mode, s.dev, err)
	}
	s.total++
	compiles := s.dev.Stats().Compiles
	pageapi.StartProfile()
	var err error
	for range steps {
		s0 := time.Now()
		if _, err = s.stepIn(mode); err != nil {
			err = fmt.Errorf("profile %s: step %d on %s: %w", mode, s.total+1, s.dev, err)
			break
		}
		profile.Step(time.Since(s0))
		s.total++
		if s.yield != nil {
			s.yield()
		}
	}
	pageapi.StopProfile()
	if err != nil {
		return nil, err
	}
	snap := profile.Snapshot()
	snap.Device = s.dev.String()
	snap.Timer = s.dev.Info().Timer
	snap.Mode = mode
	if err := s.traces.Record(mode); err != nil {
		return nil, err
	}
	return &WebProfile{Profile: snap, ModeNote: modeNotes[mode], Source: s.source, Model: s.cfg,
		Compiles: s.dev.Stats().Compiles - compiles, WallMS: pageapi.MS(time.Since(t0))}, nil
}

// traceJSON returns the Chrome trace of the last profile in mode ("" for
// the last profile of any mode).
func (s *session) traceJSON(mode string) (string, error) { return s.traces.JSON(mode) }

// metricNames returns m's names in order.
func metricNames(m Metrics) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
