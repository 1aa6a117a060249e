//go:build js

package pageapi

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"syscall/js"

	"github.com/ag-go/ag/internal/browser/jsbridge"
)

// Func is the API function name of both browser builds: f reads the JS
// arguments and returns the job for the worker, or an error naming name
// and the bad value, which rejects at once (a call with bad arguments does
// not wait behind a running train). Reading an argument runs JS (a getter,
// a toString) that may throw, which syscall/js turns into a panic; a panic
// inside a js.FuncOf callback kills the Go runtime and every later call
// with it, so it rejects this call instead.
func Func(q *jsbridge.Queue, name string, f func(args []js.Value) (func() (any, error), error)) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (p any) {
		defer func() {
			if r := recover(); r != nil {
				p = Reject(fmt.Errorf("%s: reading the arguments: %v", name, r))
			}
		}()
		job, err := f(args)
		if err != nil {
			return Reject(err)
		}
		return jsbridge.Promise(q, job)
	})
}

// Reject is a Promise rejected with err's text.
func Reject(err error) js.Value {
	return js.Global().Get("Promise").Call("reject", js.Global().Get("Error").New(err.Error()))
}

// Text is v as JavaScript's String(v) writes it.
func Text(v js.Value) string { return js.Global().Call("String", v).String() }

// Options is an options argument: undefined or null (none: every option
// its default, an empty object is returned) or a plain object whose keys
// are all known. A misspelt key is refused: ignored, it trained with the
// default in its place.
func Options(fn string, v js.Value, known ...string) (js.Value, error) {
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return js.Global().Get("Object").New(), nil
	case js.TypeObject:
		if js.Global().Get("Array").Call("isArray", v).Bool() {
			break
		}
		keys := js.Global().Get("Object").Call("keys", v)
		for i := range keys.Length() {
			if k := keys.Index(i).String(); !slices.Contains(known, k) {
				return js.Undefined(), fmt.Errorf("%s: unknown option %q (have %s)", fn, k, strings.Join(known, ", "))
			}
		}
		return v, nil
	}
	return js.Undefined(), fmt.Errorf("%s: options %s: want an object or nothing", fn, Text(v))
}

// Field is o[key], undefined when o is not an object. It reads through
// Reflect.get: Value.Get does not catch a JS exception (a throwing getter,
// a Proxy), which then unwinds through the Go frames and kills the
// runtime, where Call turns it into a panic that Func recovers.
func Field(o js.Value, key string) js.Value {
	if o.Type() != js.TypeObject {
		return js.Undefined()
	}
	return js.Global().Get("Reflect").Call("get", o, key)
}

// Whole reads option key of o: def when undefined or null, else a whole
// number (2.5, NaN, Infinity, "8" are refused, naming the value; as they
// were read, 2.5 became 2 and the others the default).
func Whole(fn string, o js.Value, key string, def int) (int, error) {
	v := Field(o, key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return def, nil
	case js.TypeNumber:
		if f := v.Float(); f == math.Trunc(f) && math.Abs(f) <= 1<<53 { // false for NaN and ±Inf
			return int(f), nil
		}
	}
	return 0, fmt.Errorf("%s: %s %s: want a whole number", fn, key, Text(v))
}

// Number reads option key of o: def when undefined or null, else a number
// (a string is refused; NaN and infinities pass, for the caller's range
// check to refuse naming them).
func Number(fn string, o js.Value, key string, def float64) (float64, error) {
	v := Field(o, key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return def, nil
	case js.TypeNumber:
		return v.Float(), nil
	}
	return 0, fmt.Errorf("%s: %s %s: want a number", fn, key, Text(v))
}

// String reads option key of o: def when undefined or null, else a string.
func String(fn string, o js.Value, key, def string) (string, error) {
	v := Field(o, key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return def, nil
	case js.TypeString:
		return v.String(), nil
	}
	return "", fmt.Errorf("%s: %s %s: want a string", fn, key, Text(v))
}

// Callback is train's onProgress. A JS exception in it panics in
// syscall/js on the worker, where it ended the train as an internal error
// with a Go stack and left the steps it had run uncounted; Callback stops
// the train at its next read instead (through stop, as ag.stop does) and
// Err names the step.
type Callback struct {
	fn   js.Value
	stop *atomic.Bool
	err  error
}

// NewCallback reads v: undefined or null (no callback, a nil *Callback) or
// a function. Anything else is refused: an options object passed in its
// place was ignored.
func NewCallback(fn string, v js.Value, stop *atomic.Bool) (*Callback, error) {
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return nil, nil
	case js.TypeFunction:
		return &Callback{fn: v, stop: stop}, nil
	}
	return nil, fmt.Errorf("%s: onProgress %s: want a function or nothing", fn, Text(v))
}

// Progress is Train.Progress (nil for a nil Callback).
func (c *Callback) Progress() func(step int, loss float32, ms float64) {
	if c == nil {
		return nil
	}
	return func(step int, loss float32, ms float64) {
		if c.err != nil {
			return // the reads in flight when it threw
		}
		defer func() {
			if r := recover(); r != nil {
				c.err = fmt.Errorf("onProgress threw at step %d: %v", step, r)
				c.stop.Store(true)
			}
		}()
		c.fn.Invoke(step, loss, ms)
	}
}

// Err is the exception of the callback, nil when it did not throw.
func (c *Callback) Err() error {
	if c == nil {
		return nil
	}
	return c.err
}

// ProfileArgs reads ag.profile's argument {mode, steps}: mode defMode and
// 5 steps unless given.
func ProfileArgs(args []js.Value, defMode string) (mode string, steps int, err error) {
	o, err := Options("profile", jsbridge.Arg(args, 0), "mode", "steps")
	if err != nil {
		return "", 0, err
	}
	if mode, err = String("profile", o, "mode", defMode); err != nil {
		return "", 0, err
	}
	steps, err = jsbridge.Count(Field(o, "steps"), "profile: steps", 5)
	return mode, steps, err
}

// TraceArg reads ag.trace's argument: a mode, or nothing
// ("").
func TraceArg(args []js.Value) (string, error) {
	switch a := jsbridge.Arg(args, 0); a.Type() {
	case js.TypeString:
		return a.String(), nil
	case js.TypeUndefined, js.TypeNull:
		return "", nil
	default:
		return "", fmt.Errorf("trace: mode %s: want a string or nothing", Text(a))
	}
}

// TrainCall is one ag.train(steps, onProgress, options) call's arguments
// (ReadTrain).
type TrainCall struct {
	Steps, Every int
	Mode         string // "" when not given
	cb           *Callback
}

// ReadTrain reads ag.train's arguments: options {every, mode}, every 1
// and mode "" unless given. stop is the flag ag.stop sets, which a
// throwing onProgress sets too.
func ReadTrain(args []js.Value, stop *atomic.Bool) (TrainCall, error) {
	var c TrainCall
	var err error
	if c.Steps, err = jsbridge.Count(jsbridge.Arg(args, 0), "train: steps", 0); err != nil {
		return c, err
	}
	if c.cb, err = NewCallback("train", jsbridge.Arg(args, 1), stop); err != nil {
		return c, err
	}
	o, err := Options("train", jsbridge.Arg(args, 2), "every", "mode")
	if err != nil {
		return c, err
	}
	if c.Mode, err = String("train", o, "mode", ""); err != nil {
		return c, err
	}
	c.Every, err = jsbridge.Count(Field(o, "every"), "train: every", 1)
	return c, err
}

// Progress is the onProgress to train with (see Callback.Progress).
func (c TrainCall) Progress() func(step int, loss float32, ms float64) { return c.cb.Progress() }

// Err is the call's error: err, or, where the train ended without one
// because onProgress threw, that exception with the steps trained since
// build (total).
func (c TrainCall) Err(total int, err error) error {
	if err == nil && c.cb.Err() != nil {
		return fmt.Errorf("train: %w; stopped there, %d steps trained since build", c.cb.Err(), total)
	}
	return err
}
