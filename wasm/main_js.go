//go:build js

package main

import (
	"runtime"
	"syscall/js"
	"time"

	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/webgpu"

	"github.com/ag-go/ag/internal/browser/jsbridge"
	"github.com/ag-go/ag/internal/browser/pageapi"
)

func main() {
	q := jsbridge.NewQueue()
	go q.Work()
	s := newSession()
	// time.Sleep parks the worker, so the runtime returns to the event loop
	// and the browser can paint progress between pure-Go steps.
	s.yield = func() { time.Sleep(time.Millisecond) }
	js.Global().Set("ag", js.ValueOf(api(q, s)))
	if ready := js.Global().Get("agReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // keep the functions alive
}

// api is globalThis.ag: s's methods run on q's worker. A function of its
// own so that the tests call the functions the page calls.
func api(q *jsbridge.Queue, s *session) map[string]any {
	fn := func(name string, f func(args []js.Value) (func() (any, error), error)) js.Func {
		return pageapi.Func(q, name, f)
	}
	return map[string]any{
		"version": "ag wasm (" + runtime.Version() + ")",
		"devices": fn("devices", func([]js.Value) (func() (any, error), error) {
			return func() (any, error) { return devices(s), nil }, nil
		}),
		"build": fn("build", func(args []js.Value) (func() (any, error), error) {
			o, err := pageapi.Options("build", jsbridge.Arg(args, 0), "width", "depth", "batch", "lr", "device")
			if err != nil {
				return nil, err
			}
			// 0 (absent) is each field's default, see session.build.
			var cfg BuildConfig
			for _, f := range []struct {
				key string
				to  *int
			}{{"width", &cfg.Width}, {"depth", &cfg.Depth}, {"batch", &cfg.Batch}} {
				if *f.to, err = pageapi.Whole("build", o, f.key, 0); err != nil {
					return nil, err
				}
			}
			if cfg.LR, err = pageapi.Number("build", o, "lr", 0); err != nil {
				return nil, err
			}
			if cfg.Device, err = pageapi.String("build", o, "device", "best"); err != nil {
				return nil, err
			}
			return func() (any, error) { return s.build(cfg) }, nil
		}),
		"train": fn("train", func(args []js.Value) (func() (any, error), error) {
			c, err := pageapi.ReadTrain(args, &s.stop, ModeLazy)
			if err != nil {
				return nil, err
			}
			return func() (any, error) {
				r, err := s.train(c.Steps, c.Mode, c.Every, c.Progress())
				return r, c.Err(r.Total, err)
			}, nil
		}),
		"profile": fn("profile", func(args []js.Value) (func() (any, error), error) {
			mode, steps, err := pageapi.ProfileArgs(args, ModeCaptured)
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.profile(mode, steps) }, nil
		}),
		"trace": fn("trace", func(args []js.Value) (func() (any, error), error) {
			mode, err := pageapi.TraceArg(args)
			if err != nil {
				return nil, err
			}
			return func() (any, error) { return s.traceJSON(mode) }, nil
		}),
		// stop is no Promise: it must act while the worker is busy training.
		"stop": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			s.stop.Store(true)
			return nil
		}),
	}
}
