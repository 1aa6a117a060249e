// Package app runs a model written in Go the same way natively and in a web
// page. An example (or your own model) is a main package whose main calls
// Run with a Spec:
//
//	func main() { app.Run(app.Spec{Name: "spiral", Params: ..., Build: build}) }
//
// Natively (`go run ./examples/spiral -device cpu -steps 300`) Run parses
// flags - -device, -steps, -eval-every and one flag per Param - opens the
// device, trains with progress lines and prints the metrics and samples.
// Compiled with GOOS=js GOARCH=wasm it instead puts the Promise API of the
// page of `ag serve` on globalThis.ag (devices, build, train, profile,
// trace, stop, plus app, eval and sample), so the page draws the model's
// loss curve, metrics, samples and profiles; `ag serve -app ./examples/NAME`
// builds and serves it.
//
// Build gets the device and the Config (every Param by name) and returns a
// Trainer: one training step per Step call. A Trainer may also be an
// Evaluator (metrics such as accuracy), a Sampler (text it generates), a
// ModeStepper (a step in each execution mode of the profile page), a
// ModeTrainer (its training steps in each mode), a Counter (its
// parameters), a FLOPsCounter (its arithmetic per step), a Describer (what
// it built) and a Checkpointer (its state saved and loaded: -save and
// -load natively, a download and an upload in the page, with
// Spec.Checkpoint).
//
// Beyond numbers a Spec may have a Param with Choices (a word out of a
// list), Strings (free text) and Files (text files: a flag naming the file
// natively, a picker and a drop zone in the page); BuildInput then gets
// them all in an Input.
package app

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ag-go/ag/core"
)

// Spec describes a model for Run.
type Spec struct {
	// Name is a short name: the page's title, the first word of the output.
	Name string
	// Describe says in one sentence what the model is and learns.
	Describe string
	// Params are the model's settings, each a command-line flag natively
	// and a field of the page's form.
	Params []Param
	// Steps is how many training steps a run takes by default (natively,
	// and the page's Steps field); 0 means 200.
	Steps int
	// Build makes the model, its optimizer and its data on dev.
	Build func(dev *core.Device, cfg Config) (Trainer, error)
	// Strings are settings of free text, Files the text files the model
	// reads (see Input); a Spec with either builds with BuildInput.
	Strings []StringParam
	Files   []FileParam
	// BuildInput, used instead of Build when set, makes the model from
	// every input: numbers, choices' words, strings and files.
	BuildInput func(dev *core.Device, in Input) (Trainer, error)
	// Checkpoint says that the Trainer is a Checkpointer: natively the
	// flags -save FILE and -load FILE, in the page a download and an
	// upload of its state.
	Checkpoint bool
}

// Param is one setting of a model.
type Param struct {
	Name    string  `json:"name"`    // flag and field name, e.g. "lr"
	Default float64 `json:"default"` // used when the flag or field is not given
	Min     float64 `json:"min"`     // accepted range (inclusive)
	Max     float64 `json:"max"`
	Int     bool    `json:"int"` // a whole number
	Doc     string  `json:"doc"` // a few words for the flag's usage and the field's hint
	// Choices, when set, makes the parameter a word out of them: natively
	// the flag -NAME WORD, in the page a select. Its number (Default, Min,
	// Max and Config's value) is the word's index.
	Choices []string `json:"choices,omitempty"`
}

// Config holds the value of every Param by name.
type Config map[string]float64

// Int returns the parameter name as an int. It panics when the Spec has no
// such Param (a programming error in the model's Build).
func (c Config) Int(name string) int { return int(math.Round(c.Float(name))) }

// Float returns the parameter name. It panics when the Spec has no such Param.
func (c Config) Float(name string) float64 {
	v, ok := c[name]
	if !ok {
		panic(fmt.Sprintf("app.Config: no parameter %q (have %s)", name, strings.Join(c.names(), ", ")))
	}
	return v
}

// Float32 returns the parameter name as a float32.
func (c Config) Float32(name string) float32 { return float32(c.Float(name)) }

func (c Config) names() []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Trainer is a model being trained: each Step runs one training step and
// returns its loss.
type Trainer interface {
	Step() (loss float32, err error)
}

// UnreadStepper is a Trainer that can take a step without reading its loss
// back. The page (ag.train's {every}, its "Read loss every N steps") calls
// StepUnread for the steps between those whose loss it shows: on WebGPU
// such a step is submitted and not waited for, while a read in the browser waits
// a round trip to the GPU process (2-4 ms on a GPU, whatever the step's
// size). A captured step gets it from nn.StepCapture.StepUnread. Without
// it every step is read.
type UnreadStepper interface {
	StepUnread() error
}

// LaterStepper is a Trainer that can take a step and ask for its loss
// without waiting for it (core.Later; a captured step gets it from
// nn.StepCapture.StepLater, a lazy one from core.Tensor.ReadLater). The
// page's loop then waits for a loss a few steps after asking for it: in
// the browser the GPU keeps running the steps queued meanwhile, where a
// read waited for at once leaves it idle for the round trip.
type LaterStepper interface {
	// StepLater's Later has the loss as its first output, one value
	// (Later.Item).
	StepLater() (*core.Later, error)
}

// Metrics are named measurements of a model, e.g. "train accuracy".
type Metrics map[string]float64

// Evaluator is a Trainer that can measure itself; Eval must not train.
type Evaluator interface {
	Eval() (Metrics, error)
}

// Sampler is a Trainer that can show what it learned as text (a
// language model's continuation, a policy's episode).
type Sampler interface {
	Sample() (string, error)
}

// Outputter is a Trainer that can give its raw outputs on a fixed input,
// without training (a language model's logits of a fixed prompt, dropout
// off): ag.outputs() returns them, so that a model in the page can be
// compared value by value with the same weights run natively.
type Outputter interface {
	Outputs() ([]float32, error)
}

// Execution modes of a ModeStepper's StepMode: the three the profile page
// compares.
const (
	ModeEager    = "eager"    // every op its own program (core.Device.SetEager)
	ModeLazy     = "lazy"     // the step recorded and lowered to one program at its sync
	ModeCaptured = "captured" // the step recorded once and replayed (core.Capture, nn.CaptureStep)
)

// ModeStep is the one profile mode of a Trainer that is not a ModeStepper:
// its Step as it is.
const ModeStep = "step"

// ModeStepper is a Trainer that can run its step in each of ModeEager,
// ModeLazy and ModeCaptured, so that the page profiles all three.
type ModeStepper interface {
	StepMode(mode string) (float32, error)
}

// ModeTrainer is a ModeStepper whose training steps - Step, and StepUnread
// and StepLater where it has them - can run in each of ModeEager, ModeLazy
// and ModeCaptured: ag.train's {mode} option sets the mode of the steps it
// takes, and a train without one runs them in the Trainer's default mode.
// A train asking a mode of any other Trainer is refused.
type ModeTrainer interface {
	ModeStepper
	// SetMode makes the following steps run in mode; "" is the Trainer's
	// default mode.
	SetMode(mode string) error
}

// Describer is a Trainer that says what was built, beyond the Spec's
// Describe (the tokenizer learned from a text, the architecture): the
// native run prints it after building, the page shows it with the model.
type Describer interface {
	Built() string
}

// Counter is a Trainer that lists its parameters, for the count the page
// and the native run show.
type Counter interface {
	Params() []*core.Tensor
}

// FLOPsCounter is a Trainer that knows the arithmetic of one of its
// training steps, in floating-point operations (a multiply-add counts two):
// ag.build reports it and the page shows it per step.
type FLOPsCounter interface {
	FLOPs() float64
}

// config fills a Config with every Param's default and checks the given
// values: known names, in range, whole where Int.
func (s *Spec) config(given map[string]float64) (Config, error) {
	cfg := Config{}
	for _, p := range s.Params {
		cfg[p.Name] = p.Default
	}
	for k, v := range given {
		p, ok := s.param(k)
		if !ok {
			return nil, fmt.Errorf("%s: unknown parameter %q (have %s)", s.Name, k, strings.Join(cfg.names(), ", "))
		}
		if math.IsNaN(v) || v < p.Min || v > p.Max || p.Int && v != math.Trunc(v) {
			kind := "a number"
			if p.Int {
				kind = "a whole number"
			}
			return nil, fmt.Errorf("%s: parameter %s = %v: want %s in %s..%s", s.Name, k, v, kind, formatNum(p.Min), formatNum(p.Max))
		}
		cfg[k] = v
	}
	return cfg, nil
}

func (s *Spec) param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// check reports a Spec that cannot run.
func (s *Spec) check() error {
	if s.Name == "" || (s.Build == nil) == (s.BuildInput == nil) {
		return fmt.Errorf("app.Run: Spec %q: want a Name and one of Build and BuildInput", s.Name)
	}
	if s.Build != nil && (len(s.Strings) > 0 || len(s.Files) > 0) {
		return fmt.Errorf("app.Run: Spec %s: has Strings or Files: want BuildInput, which gets them, in place of Build", s.Name)
	}
	seen := map[string]bool{"device": true, "steps": true, "eval-every": true, "profile-json": true}
	if s.Checkpoint {
		seen["save"], seen["load"] = true, true
	}
	for _, name := range s.inputNames() {
		if name == "" || seen[name] {
			return fmt.Errorf("app.Run: Spec %s: parameter name %q is empty, repeated or reserved (device, steps, eval-every, profile-json; save and load with Checkpoint)", s.Name, name)
		}
		seen[name] = true
	}
	for _, p := range s.Params {
		if len(p.Choices) > 0 && !(p.Int && p.Min == 0 && p.Max == float64(len(p.Choices)-1)) {
			return fmt.Errorf("app.Run: Spec %s: parameter %s with %d choices: want Int, Min 0 and Max %d (the words' indices)", s.Name, p.Name, len(p.Choices), len(p.Choices)-1)
		}
		if !(p.Min <= p.Default && p.Default <= p.Max) {
			return fmt.Errorf("app.Run: Spec %s: parameter %s: default %v outside %v..%v", s.Name, p.Name, p.Default, p.Min, p.Max)
		}
	}
	return nil
}

func (s *Spec) steps() int {
	if s.Steps > 0 {
		return s.Steps
	}
	return 200
}

// formatNum writes a parameter's value or bound as a person reads it: a
// whole number in full (2147483648, not %v's 2.147483648e+09), others
// as %v does (0.001, 1e-06).
func formatNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
