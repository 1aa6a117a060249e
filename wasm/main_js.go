//go:build js

package main

import (
	"runtime"
	"syscall/js"
	"time"

	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/webgpu"

	"github.com/ag-go/ag/internal/jsbridge"
)

func main() {
	q := jsbridge.NewQueue()
	go q.Work()
	s := newSession()
	// time.Sleep parks the worker, so the runtime returns to the event loop
	// and the browser can paint progress between pure-Go steps.
	s.yield = func() { time.Sleep(time.Millisecond) }

	api := map[string]any{
		"version": "ag wasm (" + runtime.Version() + ")",
		"devices": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			return jsbridge.Promise(q, func() (any, error) { return devices(s), nil })
		}),
		"build": js.FuncOf(func(_ js.Value, args []js.Value) any {
			o := jsbridge.Arg(args, 0)
			cfg := BuildConfig{
				Width: int(jsbridge.Num(o, "width", 0)), Depth: int(jsbridge.Num(o, "depth", 0)), Batch: int(jsbridge.Num(o, "batch", 0)),
				LR: jsbridge.Num(o, "lr", 0), Device: jsbridge.Str(o, "device", "best"),
			}
			return jsbridge.Promise(q, func() (any, error) { return s.build(cfg) })
		}),
		"train": js.FuncOf(func(_ js.Value, args []js.Value) any {
			steps, err := jsbridge.Count(jsbridge.Arg(args, 0), "train: steps", 0)
			if err != nil {
				return jsbridge.Promise(q, func() (any, error) { return nil, err })
			}
			cb := jsbridge.Arg(args, 1)
			var progress func(int, float32, float64)
			if cb.Type() == js.TypeFunction {
				progress = func(step int, loss float32, ms float64) { cb.Invoke(step, loss, ms) }
			}
			// A mode that is not a string reaches train as its JS text
			// ("<number: 5>"), which train refuses, naming it.
			mode, every := ModeLazy, 1
			if o := jsbridge.Arg(args, 2); o.Type() == js.TypeObject {
				if !o.Get("mode").IsUndefined() {
					mode = o.Get("mode").String()
				}
				var err error
				if every, err = jsbridge.Count(o.Get("every"), "train: every", 1); err != nil {
					return jsbridge.Promise(q, func() (any, error) { return nil, err })
				}
			}
			return jsbridge.Promise(q, func() (any, error) { return s.train(steps, mode, every, progress) })
		}),
		"profile": js.FuncOf(func(_ js.Value, args []js.Value) any {
			o := jsbridge.Arg(args, 0)
			mode, steps := jsbridge.Str(o, "mode", ModeCaptured), 5
			if o.Type() == js.TypeObject {
				var err error
				if steps, err = jsbridge.Count(o.Get("steps"), "profile: steps", 5); err != nil {
					return jsbridge.Promise(q, func() (any, error) { return nil, err })
				}
			}
			return jsbridge.Promise(q, func() (any, error) { return s.profile(mode, steps) })
		}),
		"trace": js.FuncOf(func(_ js.Value, args []js.Value) any {
			mode := ""
			if a := jsbridge.Arg(args, 0); a.Type() == js.TypeString {
				mode = a.String()
			}
			return jsbridge.Promise(q, func() (any, error) { return s.traceJSON(mode) })
		}),
		// stop is no Promise: it must act while the worker is busy training.
		"stop": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			s.stop.Store(true)
			return nil
		}),
	}
	js.Global().Set("ag", js.ValueOf(api))
	if ready := js.Global().Get("agReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // keep the functions alive
}
