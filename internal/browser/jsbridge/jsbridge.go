//go:build js

// Package jsbridge is what package app's browser runner puts its Promise
// API on globalThis with: one worker goroutine that runs the calls in
// order, never inside a js.FuncOf callback (the WebGPU backend waits on JS
// promises, which would deadlock a callback), and the readers of JS
// arguments.
package jsbridge

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"syscall/js"
)

// Queue is an unbounded FIFO of jobs for the worker goroutine. Enqueueing
// never blocks, so a js.FuncOf callback can hand work over and return at
// once: a callback that blocked would stall the event loop the WebGPU
// backend's awaits depend on.
type Queue struct {
	mu   sync.Mutex
	jobs []func()
	wake chan struct{}
}

// NewQueue makes a queue; run Work on a goroutine of its own.
func NewQueue() *Queue { return &Queue{wake: make(chan struct{}, 1)} }

// Push appends a job.
func (q *Queue) Push(f func()) {
	q.mu.Lock()
	q.jobs = append(q.jobs, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Work runs the jobs one after another, forever.
func (q *Queue) Work() {
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

// Promise returns a Promise settled by job, which runs on q's worker. The
// result is JSON-encoded in Go and parsed in JS (one crossing, plain
// objects); a string result stays a string, and a js.Value (bytes made in
// JS, a Uint8Array) resolves as it is. A panic rejects with its stack.
func Promise(q *Queue, job func() (any, error)) js.Value {
	var exec js.Func
	exec = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		exec.Release() // the executor runs once, synchronously, inside New
		q.Push(func() {
			v, err := run(job)
			if err != nil {
				reject.Invoke(jsError.New(err.Error()))
				return
			}
			switch v := v.(type) {
			case string:
				resolve.Invoke(v)
				return
			case js.Value:
				resolve.Invoke(v)
				return
			}
			b, err := json.Marshal(v)
			if err != nil {
				reject.Invoke(jsError.New(fmt.Sprintf("encoding %T: %v", v, err)))
				return
			}
			resolve.Invoke(jsJSON.Call("parse", string(b)))
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

// Arg is args[i], or undefined past the end.
func Arg(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

// Count reads a JS argument that counts steps (train's steps and every):
// def when it is undefined or null, else a whole number. Anything else is
// an error naming what (such as "train: every") and the value as JS
// writes it: a string, NaN, Infinity, 2.5. Converted as they were, NaN
// and Infinity became integers nothing could report truthfully, and 2.5
// quietly became 2.
func Count(v js.Value, what string, def int) (int, error) {
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return def, nil
	case js.TypeNumber:
		f := v.Float()
		if f == math.Trunc(f) && math.Abs(f) <= 1<<53 { // false for NaN and ±Inf
			return int(f), nil
		}
	}
	return 0, fmt.Errorf("%s %s: want a whole number of steps", what, text(v))
}

// text is v as JavaScript's String(v) writes it.
func text(v js.Value) string { return js.Global().Call("String", v).String() }
