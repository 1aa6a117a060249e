//go:build js

package app

import (
	"runtime"
	"syscall/js"
	"time"

	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/webgpu"

	"github.com/ag-go/ag/internal/jsbridge"
)

// Run puts the page's API for spec's model on globalThis.ag, calls
// globalThis.agReady when it is there, and never returns:
//
//	ag.app()                         Info: name, description, parameters, modes
//	ag.devices()                     drivers, the best device, WebGPU's adapter or why none
//	ag.build({PARAM: value, ..., device})  a fresh model ("best": webgpu when it runs, else cpu)
//	ag.train(steps, onProgress(step, loss, ms), {every})  trains, reading the loss every `every` steps (1 by default; see UnreadStepper); resolves with the losses and step times
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
	fn := func(f func(args []js.Value) func() (any, error)) js.Func {
		return js.FuncOf(func(_ js.Value, args []js.Value) any { return jsbridge.Promise(q, f(args)) })
	}
	api := map[string]any{
		"version": "ag app " + spec.Name + " (" + runtime.Version() + ")",
		"app": fn(func([]js.Value) func() (any, error) {
			return func() (any, error) { return s.info(), nil }
		}),
		"devices": fn(func([]js.Value) func() (any, error) {
			return func() (any, error) { return s.devices(), nil }
		}),
		"build": fn(func(args []js.Value) func() (any, error) {
			o := jsbridge.Arg(args, 0)
			given := map[string]float64{}
			for _, p := range spec.Params {
				if o.Type() == js.TypeObject && o.Get(p.Name).Type() == js.TypeNumber {
					given[p.Name] = o.Get(p.Name).Float()
				}
			}
			device := "best"
			if o.Type() == js.TypeObject && o.Get("device").Type() == js.TypeString {
				device = o.Get("device").String()
			}
			return func() (any, error) { return s.build(given, device) }
		}),
		"train": fn(func(args []js.Value) func() (any, error) {
			steps, err := jsbridge.Count(jsbridge.Arg(args, 0), "train: steps", 0)
			if err != nil {
				return func() (any, error) { return nil, err }
			}
			var progress func(int, float32, float64)
			if cb := jsbridge.Arg(args, 1); cb.Type() == js.TypeFunction {
				progress = func(step int, loss float32, ms float64) { cb.Invoke(step, loss, ms) }
			}
			every := 1
			if o := jsbridge.Arg(args, 2); o.Type() == js.TypeObject {
				if every, err = jsbridge.Count(o.Get("every"), "train: every", 1); err != nil {
					return func() (any, error) { return nil, err }
				}
			}
			return func() (any, error) { return s.train(steps, every, progress) }
		}),
		"eval": fn(func([]js.Value) func() (any, error) {
			return func() (any, error) { return s.eval() }
		}),
		"sample": fn(func([]js.Value) func() (any, error) {
			return func() (any, error) { return s.sample() }
		}),
		"profile": fn(func(args []js.Value) func() (any, error) {
			o := jsbridge.Arg(args, 0)
			mode, steps := ModeCaptured, 5
			if o.Type() == js.TypeObject {
				if v := o.Get("mode"); v.Type() == js.TypeString {
					mode = v.String()
				}
				var err error
				if steps, err = jsbridge.Count(o.Get("steps"), "profile: steps", 5); err != nil {
					return func() (any, error) { return nil, err }
				}
			}
			return func() (any, error) { return s.profile(mode, steps) }
		}),
		"trace": fn(func(args []js.Value) func() (any, error) {
			mode := ""
			if a := jsbridge.Arg(args, 0); a.Type() == js.TypeString {
				mode = a.String()
			}
			return func() (any, error) { return s.traceJSON(mode) }
		}),
		// stop is no Promise: it must act while the worker is busy training.
		"stop": js.FuncOf(func(js.Value, []js.Value) any {
			s.stop.Store(true)
			return nil
		}),
	}
	js.Global().Set("ag", js.ValueOf(api))
	if ready := js.Global().Get("agReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {}
}
