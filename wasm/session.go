package main

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/browser/pageapi"
	"github.com/ag-go/ag/profile"
)

// BuildConfig is what ag.build takes: the MLP workload's shape and the
// device. Device "" or "best" means webgpu when its driver says it runs
// here, else cpu (see pickDevice).
type BuildConfig struct {
	Width  int     `json:"width"`
	Depth  int     `json:"depth"`
	Batch  int     `json:"batch"`
	LR     float64 `json:"lr"`
	Device string  `json:"device"`
}

// The bounds of ag.build's fields; within them, checkFits refuses a model
// that does not fit in memory.
const (
	maxWidth = 4096
	maxDepth = 64
	maxBatch = 4096
)

// BuildInfo is ag.build's answer.
type BuildInfo struct {
	Device   string      `json:"device"`   // e.g. "webgpu (SwiftShader Device (Subzero), ...)"
	Name     string      `json:"name"`     // driver name: "webgpu" or "cpu"
	Fallback string      `json:"fallback"` // why the asked device was not used ("" when it was)
	Params   int         `json:"params"`   // parameter count
	FLOPs    float64     `json:"flops"`    // arithmetic of one step
	SetupMS  float64     `json:"setup_ms"` // building model and data
	Reused   bool        `json:"reused"`   // the device was already open
	Config   BuildConfig `json:"config"`   // the config after defaults
	Compiles int         `json:"compiles"` // programs compiled on this device so far
	Driver   string      `json:"driver"`   // availability text of the driver used
	WebGPU   string      `json:"webgpu"`   // availability text of webgpu
	Warnings []string    `json:"warnings"` // notes for the page (never null)
}

// TrainResult is ag.train's answer.
type TrainResult struct {
	Mode string `json:"mode"` // how the steps ran (ModeLazy...)
	pageapi.TrainResult
}

// Execution modes of ag.profile, workload.Mode's names. Each profiles
// `steps` training steps of the built model; they differ in how a step
// reaches the device.
const (
	// ModeEager runs every op as its own program as soon as it is recorded
	// (workload.Eager, Device.SetEager): one run, and one launch at least,
	// per op. One unprofiled warm-up step compiles the per-op programs
	// first, so the profile is the steady state of per-op execution.
	ModeEager = string(workload.Eager)
	// ModeLazy is the lazy graph (workload.Lazy): every step is recorded and
	// lowered to one program at its sync, which comes from the program
	// cache after one unprofiled warm-up step.
	ModeLazy = string(workload.Lazy)
	// ModeCaptured replays a captured step (workload.Captured, core.Capture):
	// one unprofiled warm-up step records and compiles it, then every
	// profiled step is one upload of the batch, the cached program and one
	// download of the loss, with nothing recorded or lowered.
	ModeCaptured = string(workload.Captured)
)

// modeNotes are the one-line definitions the page shows.
var modeNotes = map[string]string{
	ModeEager:    "every op runs as its own program when recorded (steady state, after one warm-up step)",
	ModeLazy:     "each step recorded and lowered to one program at its sync; the program comes from the cache (after one warm-up step)",
	ModeCaptured: "the step recorded once and replayed: one upload, the cached program, one download (after one warm-up step)",
}

// modeNote returns mode's note, or an error naming fn and the mode when it
// is none of the three.
func modeNote(fn, mode string) (string, error) {
	note, ok := modeNotes[mode]
	if !ok {
		return "", fmt.Errorf("%s: mode %q: want %q, %q or %q", fn, mode, ModeEager, ModeLazy, ModeCaptured)
	}
	return note, nil
}

// WebProfile is ag.profile's answer: the native profile JSON (profile.Profile,
// the schema `ag demo -profile-json` writes) plus what the page labels it with.
type WebProfile struct {
	*profile.Profile             // its Mode set
	ModeNote         string      `json:"mode_note"`
	Source           string      `json:"source"` // "browser"
	Model            BuildConfig `json:"model"`
	Compiles         int         `json:"compiles"` // programs compiled during the profiled steps
	WallMS           float64     `json:"wall_ms"`  // wall time of the call, warm-up included
}

// session holds the page's one model. Its methods run on the worker
// goroutine only (see queue), so they need no lock; stop is the exception.
type session struct {
	dev    *core.Device
	m      *workload.MLP
	cfg    BuildConfig
	info   BuildInfo
	total  int
	traces pageapi.Traces // Chrome trace JSON of the last profile per mode
	stop   atomic.Bool
	// yield lets the browser paint between steps; pure-Go work never returns
	// to the event loop otherwise. Nil natively.
	yield func()
}

func newSession() *session { return &session{} }

// DriverJSON is one row of ag.devices().
type DriverJSON = pageapi.DriverJSON

// DevicesInfo is ag.devices()'s answer.
type DevicesInfo = pageapi.DevicesInfo

func devices(s *session) DevicesInfo {
	return pageapi.Devices(s.dev)
}

// pickDevice resolves "best" (see pageapi.PickDevice).
func pickDevice(name string, drivers []DriverJSON) string { return pageapi.PickDevice(name, drivers) }

// build opens the device (reusing the open one when the name matches) and
// builds a fresh model on it. A webgpu device that fails to open falls back
// to cpu, and the answer says why.
func (s *session) build(cfg BuildConfig) (BuildInfo, error) {
	if cfg.Width == 0 {
		cfg.Width = 64
	}
	if cfg.Depth == 0 {
		cfg.Depth = 2
	}
	if cfg.Batch == 0 {
		cfg.Batch = 16
	}
	if cfg.LR == 0 {
		cfg.LR = 1e-2
	}
	// NaN and infinities included: a NaN lr built a model that failed at
	// its first step, after the answer naming it failed to encode.
	if !(cfg.LR > 0 && cfg.LR <= 1) {
		return BuildInfo{}, fmt.Errorf("build: lr %v: want a number in (0, 1]", cfg.LR)
	}
	if cfg.Width < 1 || cfg.Depth < 1 || cfg.Batch < 1 || cfg.Width > maxWidth || cfg.Depth > maxDepth || cfg.Batch > maxBatch {
		return BuildInfo{}, fmt.Errorf("build: width %d, depth %d, batch %d: want 1..%d, 1..%d, 1..%d", cfg.Width, cfg.Depth, cfg.Batch, maxWidth, maxDepth, maxBatch)
	}
	// Refused before the device opens on the memory bound alone, and again
	// below with the device's buffer limit.
	if err := checkFits("build", cfg, 0); err != nil {
		return BuildInfo{}, err
	}
	d := devices(s)
	want := pickDevice(cfg.Device, d.Drivers)
	info := BuildInfo{WebGPU: d.WebGPU.Why, Warnings: []string{}}
	if !d.WebGPU.OK {
		info.Warnings = append(info.Warnings, "WebGPU is not available ("+d.WebGPU.Why+"): training runs on the CPU backend compiled to wasm")
	}
	if s.dev != nil && s.dev.Name() != want {
		if err := s.dev.Close(); err != nil {
			return BuildInfo{}, fmt.Errorf("build: closing %s: %w", s.dev, err)
		}
		s.dev, s.m = nil, nil
	}
	if s.dev != nil {
		info.Reused = true
	} else {
		dev, err := core.Open(want)
		if err != nil && want != "cpu" {
			info.Fallback = err.Error()
			info.Warnings = append(info.Warnings, fmt.Sprintf("could not open %s (%v): using cpu", want, err))
			dev, err = core.Open("cpu")
		}
		if err != nil {
			return BuildInfo{}, fmt.Errorf("build: opening device %q: %w", want, err)
		}
		s.dev = dev
	}
	if err := checkFits("build", cfg, int64(s.dev.Info().MaxBufferElems)); err != nil {
		return BuildInfo{}, err
	}
	s.dev.SetEager(false)
	t0 := time.Now()
	m, err := workload.New(s.dev, workload.Config{Width: cfg.Width, Depth: cfg.Depth, Batch: cfg.Batch, LR: float32(cfg.LR), Seed: 1})
	if err != nil {
		return BuildInfo{}, fmt.Errorf("build on %s: %w", s.dev, err)
	}
	cfg.Device = s.dev.Name()
	s.m, s.cfg, s.total = m, cfg, 0
	for _, dr := range d.Drivers {
		if dr.Name == s.dev.Name() {
			info.Driver = dr.Why
		}
	}
	params := 0
	for _, p := range m.Model.Params() {
		params += p.Len()
	}
	info.Device, info.Name, info.Params, info.FLOPs = s.dev.String(), s.dev.Name(), params, m.FLOPs()
	info.SetupMS, info.Config, info.Compiles = pageapi.MS(time.Since(t0)), cfg, s.dev.Stats().Compiles
	s.info = info
	return info, nil
}

var errNoModel = errors.New("no model: call ag.build first")

// train runs steps training steps in mode (ModeLazy, ModeCaptured or
// ModeEager; "" is lazy), reading the loss back every `every` steps and at
// the last, and calling progress after each read (see pageapi.Train: the
// steps between reads are submitted and not waited for, which is what
// makes small steps fast in the browser). The modes train the same model
// the same way; captured skips recording and lowering each step.
func (s *session) train(steps int, mode string, every int, progress func(step int, loss float32, ms float64)) (TrainResult, error) {
	if s.m == nil {
		return TrainResult{}, fmt.Errorf("train: %w", errNoModel)
	}
	if steps < 1 || steps > 100000 {
		return TrainResult{}, fmt.Errorf("train: steps %d: want 1..100000", steps)
	}
	if err := pageapi.CheckEvery(every); err != nil {
		return TrainResult{}, fmt.Errorf("train: %w", err)
	}
	if mode == "" {
		mode = ModeLazy
	}
	if _, err := modeNote("train", mode); err != nil {
		return TrainResult{}, err
	}
	s.stop.Store(false)
	s.dev.SetEager(false)
	wm := workload.Mode(mode)
	o, err := pageapi.Train{Steps: steps, Every: every, First: s.total + 1, Stop: &s.stop, Yield: s.yield,
		Read:     func() (float32, error) { return s.m.StepMode(wm) },
		Unread:   func() error { return s.m.StepUnread(wm) },
		Later:    func() (pageapi.Loss, error) { return s.m.StepLater(wm) },
		Progress: progress,
		StepErr: func(step int, err error) error {
			return fmt.Errorf("train: %s step %d on %s: %w", mode, step, s.dev, err)
		},
	}.Run()
	s.total = o.Total
	return TrainResult{Mode: mode, TrainResult: o}, err
}

// profile profiles steps training steps in one execution mode (see the
// Mode constants) and returns the profile; its Chrome trace is kept for
// traceJSON.
func (s *session) profile(mode string, steps int) (*WebProfile, error) {
	if s.m == nil {
		return nil, fmt.Errorf("profile: %w", errNoModel)
	}
	if steps < 1 || steps > 1000 {
		return nil, fmt.Errorf("profile: steps %d: want 1..1000", steps)
	}
	note, merr := modeNote("profile", mode)
	if merr != nil {
		return nil, merr
	}
	t0 := time.Now()
	wm := workload.Mode(mode)
	if _, err := s.m.StepMode(wm); err != nil { // compiles, records
		return nil, fmt.Errorf("profile %s: warm-up step on %s: %w", mode, s.dev, err)
	}
	s.total++
	compiles := s.dev.Stats().Compiles
	pageapi.StartProfile()
	var err error
	for range steps {
		s0 := time.Now()
		if _, err = s.m.StepMode(wm); err != nil {
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
	return &WebProfile{Profile: snap, ModeNote: note, Source: "browser", Model: s.cfg,
		Compiles: s.dev.Stats().Compiles - compiles, WallMS: pageapi.MS(time.Since(t0))}, nil
}

// traceJSON returns the Chrome trace of the last profile in mode ("" for
// the last profile of any mode).
func (s *session) traceJSON(mode string) (string, error) { return s.traces.JSON(mode) }
