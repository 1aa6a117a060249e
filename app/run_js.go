//go:build js

package app

import (
	"bytes"
	"fmt"
	"runtime"
	"syscall/js"
	"time"

	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/webgpu"

	"github.com/ag-go/ag/internal/browser/jsbridge"
	"github.com/ag-go/ag/internal/browser/pageapi"
)

// Run puts the page's API for spec's model on globalThis.ag, calls
// globalThis.agReady when it is there, and never returns:
//
//	ag.app()                         Info: name, description, parameters, modes
//	ag.devices()                     drivers, the best device, WebGPU's adapter or why none
//	ag.build({PARAM: value, ..., device})  a fresh model ("best": webgpu when it runs, else cpu); a Choices parameter a word or its index, a FileParam {name, text}
//	ag.train(steps, onProgress(step, loss, ms), {every, mode})  trains, reading the loss every `every` steps (1 by default; see UnreadStepper), a ModeTrainer's steps in mode (its default when not given); resolves with the losses and step times
//	ag.eval()                        the metrics of an Evaluator
//	ag.sample()                      the text of a Sampler
//	ag.outputs()                     an Outputter's outputs, an array of numbers (each a float32 exactly)
//	ag.profile({mode, steps})        profiles steps in one of Info.Modes
//	ag.trace(mode?)                  the Chrome trace JSON of the last profile
//	ag.save()                        a Checkpointer's state, a Uint8Array (the page downloads it)
//	ag.load(bytes)                   loads a state ag.save made into the built model
//	ag.stop()                        ends a running train after its current read
//
// Every call but stop returns a Promise; the work runs on one worker
// goroutine in call order, never inside a js.FuncOf callback (the WebGPU
// backend waits on JS promises).
func Run(spec Spec) {
	if err := spec.check(); err != nil {
		js.Global().Get("console").Call("error", err.Error())
		panic(err)
	}
	q := jsbridge.NewQueue()
	go q.Work()
	s := newSession(&spec, "browser")
	s.yield = func() { time.Sleep(time.Millisecond) }
	js.Global().Set("ag", js.ValueOf(api(q, s)))
	if ready := js.Global().Get("agReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {}
}

// readGiven reads ag.build's inputs from o: a number per Param (a word
// or an index for one with Choices), a string per StringParam, and per
// FileParam {name, text}. A wrong type is an error naming it, never a
// value quietly left at its default.
func readGiven(spec *Spec, o js.Value) (given, error) {
	g := given{nums: map[string]float64{}, choices: map[string]string{}, strs: map[string]string{}, files: map[string]File{}}
	set := func(name string) (js.Value, bool) {
		v := pageapi.Field(o, name)
		return v, !v.IsUndefined() && !v.IsNull()
	}
	for _, p := range spec.Params {
		v, ok := set(p.Name)
		switch {
		case !ok:
		case len(p.Choices) > 0 && v.Type() == js.TypeString:
			g.choices[p.Name] = v.String()
		case v.Type() == js.TypeNumber:
			g.nums[p.Name] = v.Float()
		case len(p.Choices) > 0:
			return given{}, fmt.Errorf("build: %s: parameter %s %s: want one of %q or its index", spec.Name, p.Name, pageapi.Text(v), p.Choices)
		default:
			return given{}, fmt.Errorf("build: %s: parameter %s %s: want a number", spec.Name, p.Name, pageapi.Text(v))
		}
	}
	for _, p := range spec.Strings {
		if v, ok := set(p.Name); ok {
			if v.Type() != js.TypeString {
				return given{}, fmt.Errorf("build: %s: parameter %s %s: want a string", spec.Name, p.Name, pageapi.Text(v))
			}
			g.strs[p.Name] = v.String()
		}
	}
	for _, p := range spec.Files {
		if v, ok := set(p.Name); ok {
			if v.Type() != js.TypeObject || v.Get("text").Type() != js.TypeString {
				return given{}, fmt.Errorf("build: %s: file %s %s: want {name, text}", spec.Name, p.Name, pageapi.Text(v))
			}
			name := ""
			if n := v.Get("name"); n.Type() == js.TypeString {
				name = n.String()
			}
			g.files[p.Name] = File{Name: name, Data: []byte(v.Get("text").String())}
		}
	}
	return g, nil
}

// api is globalThis.ag for s's model: its methods run on q's worker. Bad
// arguments reject at once, naming the function and the value (see
// pageapi.Func); a function of its own so that the tests call what the
// page calls.
func api(q *jsbridge.Queue, s *session) map[string]any {
	spec := s.spec
	type job = func() (any, error)
	fn := func(name string, f func(args []js.Value) (job, error)) js.Func { return pageapi.Func(q, name, f) }
	return map[string]any{
		"version": "ag app " + spec.Name + " (" + runtime.Version() + ")",
		"app": fn("app", func([]js.Value) (job, error) {
			return func() (any, error) { return s.info(), nil }, nil
		}),
		"devices": fn("devices", func([]js.Value) (job, error) {
			return func() (any, error) { return s.devices(), nil }, nil
		}),
		"build": fn("build", func(args []js.Value) (job, error) {
			known := append([]string{"device"}, spec.inputNames()...)
			o, err := pageapi.Options("build", jsbridge.Arg(args, 0), known...)
			if err != nil {
				return nil, err
			}
			g, err := readGiven(spec, o)
			if err != nil {
				return nil, err
			}
			device, err := pageapi.String("build", o, "device", "best")
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.buildInput(g, device) }, nil
		}),
		"train": fn("train", func(args []js.Value) (job, error) {
			c, err := pageapi.ReadTrain(args, &s.stop)
			if err != nil {
				return nil, err
			}
			return func() (any, error) {
				r, err := s.train(c.Steps, c.Mode, c.Every, c.Progress())
				return r, c.Err(r.Total, err)
			}, nil
		}),
		"eval": fn("eval", func([]js.Value) (job, error) {
			return func() (any, error) { return s.eval() }, nil
		}),
		"sample": fn("sample", func([]js.Value) (job, error) {
			return func() (any, error) { return s.sample() }, nil
		}),
		"outputs": fn("outputs", func([]js.Value) (job, error) {
			return func() (any, error) { return s.outputs() }, nil
		}),
		"profile": fn("profile", func(args []js.Value) (job, error) {
			mode, steps, err := pageapi.ProfileArgs(args, ModeCaptured)
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.profile(mode, steps) }, nil
		}),
		"trace": fn("trace", func(args []js.Value) (job, error) {
			mode, err := pageapi.TraceArg(args)
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.traceJSON(mode) }, nil
		}),
		"save": fn("save", func([]js.Value) (job, error) {
			return func() (any, error) {
				var b bytes.Buffer
				if err := s.save(&b); err != nil {
					return nil, err
				}
				a := js.Global().Get("Uint8Array").New(b.Len())
				js.CopyBytesToJS(a, b.Bytes())
				return a, nil
			}, nil
		}),
		"load": fn("load", func(args []js.Value) (job, error) {
			v := jsbridge.Arg(args, 0)
			if v.Type() != js.TypeObject || !v.InstanceOf(js.Global().Get("Uint8Array")) {
				return nil, fmt.Errorf("load: %s: want the file's bytes, a Uint8Array", pageapi.Text(v))
			}
			b := make([]byte, v.Get("length").Int())
			js.CopyBytesToGo(b, v)
			return func() (any, error) { return nil, s.load(bytes.NewReader(b)) }, nil
		}),
		// stop is no Promise: it must act while the worker is busy training.
		"stop": js.FuncOf(func(js.Value, []js.Value) any {
			s.stop.Store(true)
			return nil
		}),
	}
}
