//go:build js

package app

import (
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
//	ag.build({PARAM: value, ..., device})  a fresh model ("best": webgpu when it runs, else cpu)
//	ag.train(steps, onProgress(step, loss, ms), {every, mode})  trains, reading the loss every `every` steps (1 by default; see UnreadStepper), a ModeTrainer's steps in mode (its default when not given); resolves with the losses and step times
//	ag.eval()                        the metrics of an Evaluator
//	ag.sample()                      the text of a Sampler
//	ag.profile({mode, steps})        profiles steps in one of Info.Modes
//	ag.trace(mode?)                  the Chrome trace JSON of the last profile
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
			known := []string{"device"}
			for _, p := range spec.Params {
				known = append(known, p.Name)
			}
			o, err := pageapi.Options("build", jsbridge.Arg(args, 0), known...)
			if err != nil {
				return nil, err
			}
			// A parameter that is no number was left at its default.
			given := map[string]float64{}
			for _, p := range spec.Params {
				if v := pageapi.Field(o, p.Name); !v.IsUndefined() && !v.IsNull() {
					if v.Type() != js.TypeNumber {
						return nil, fmt.Errorf("build: %s: parameter %s %s: want a number", spec.Name, p.Name, pageapi.Text(v))
					}
					given[p.Name] = v.Float()
				}
			}
			device, err := pageapi.String("build", o, "device", "best")
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.build(given, device) }, nil
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
		// stop is no Promise: it must act while the worker is busy training.
		"stop": js.FuncOf(func(js.Value, []js.Value) any {
			s.stop.Store(true)
			return nil
		}),
	}
}
