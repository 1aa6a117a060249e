//go:build js

package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall/js"
	"time"

	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/webgpu"
)

// queue is an unbounded FIFO of jobs for the worker goroutine. Enqueueing
// never blocks, so a js.FuncOf callback can hand work over and return at
// once: a callback that blocked would stall the event loop the WebGPU
// backend's awaits depend on.
type queue struct {
	mu   sync.Mutex
	jobs []func()
	wake chan struct{}
}

func (q *queue) push(f func()) {
	q.mu.Lock()
	q.jobs = append(q.jobs, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// work runs the jobs one after another, forever.
func (q *queue) work() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.mu.Unlock()
			<-q.wake
			continue
		}
		f := q.jobs[0]
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		f()
	}
}

var (
	jsPromise = js.Global().Get("Promise")
	jsError   = js.Global().Get("Error")
	jsJSON    = js.Global().Get("JSON")
)

// promise returns a Promise settled by job, which runs on the worker. The
// result is JSON-encoded in Go and parsed in JS (one crossing, plain
// objects); a string result stays a string. A panic rejects too.
func promise(q *queue, job func() (any, error)) js.Value {
	var exec js.Func
	exec = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		exec.Release() // the executor runs once, synchronously, inside New
		q.push(func() {
			v, err := run(job)
			if err != nil {
				reject.Invoke(jsError.New(err.Error()))
				return
			}
			if str, ok := v.(string); ok {
				resolve.Invoke(str)
				return
			}
			txt, err := jsonOf(v)
			if err != nil {
				reject.Invoke(jsError.New(err.Error()))
				return
			}
			resolve.Invoke(jsJSON.Call("parse", txt))
		})
		return nil
	})
	return jsPromise.New(exec)
}

// run calls job, turning a panic into an error with its stack.
func run(job func() (any, error)) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ag: internal error: %v\n%s", r, debug.Stack())
		}
	}()
	return job()
}

// num reads a numeric field of a JS object (def when absent).
func num(o js.Value, key string, def float64) float64 {
	if o.Type() != js.TypeObject {
		return def
	}
	v := o.Get(key)
	if v.Type() != js.TypeNumber {
		return def
	}
	return v.Float()
}

func str(o js.Value, key, def string) string {
	if o.Type() != js.TypeObject {
		return def
	}
	v := o.Get(key)
	if v.Type() != js.TypeString {
		return def
	}
	return v.String()
}

func arg(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

func main() {
	q := &queue{wake: make(chan struct{}, 1)}
	go q.work()
	s := newSession()
	// time.Sleep parks the worker, so the runtime returns to the event loop
	// and the browser can paint progress between pure-Go steps.
	s.yield = func() { time.Sleep(time.Millisecond) }

	api := map[string]any{
		"version": "ag wasm (" + runtime.Version() + ")",
		"devices": js.FuncOf(func(_ js.Value, _ []js.Value) any {
			return promise(q, func() (any, error) { return devices(s), nil })
		}),
		"build": js.FuncOf(func(_ js.Value, args []js.Value) any {
			o := arg(args, 0)
			cfg := BuildConfig{
				Width: int(num(o, "width", 0)), Depth: int(num(o, "depth", 0)), Batch: int(num(o, "batch", 0)),
				LR: num(o, "lr", 0), Device: str(o, "device", "best"),
			}
			return promise(q, func() (any, error) { return s.build(cfg) })
		}),
		"train": js.FuncOf(func(_ js.Value, args []js.Value) any {
			steps := 0
			if a := arg(args, 0); a.Type() == js.TypeNumber {
				steps = a.Int()
			}
			cb := arg(args, 1)
			var progress func(int, float32, float64)
			if cb.Type() == js.TypeFunction {
				progress = func(step int, loss float32, ms float64) { cb.Invoke(step, loss, ms) }
			}
			return promise(q, func() (any, error) { return s.train(steps, progress) })
		}),
		"profile": js.FuncOf(func(_ js.Value, args []js.Value) any {
			o := arg(args, 0)
			mode, steps := str(o, "mode", ModeCaptured), int(num(o, "steps", 5))
			return promise(q, func() (any, error) { return s.profile(mode, steps) })
		}),
		"trace": js.FuncOf(func(_ js.Value, args []js.Value) any {
			mode := ""
			if a := arg(args, 0); a.Type() == js.TypeString {
				mode = a.String()
			}
			return promise(q, func() (any, error) { return s.traceJSON(mode) })
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
