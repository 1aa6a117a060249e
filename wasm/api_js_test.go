//go:build js

package main

import (
	"strings"
	"syscall/js"
	"testing"

	"github.com/ag-go/ag/internal/browser/jsbridge"
	"github.com/ag-go/ag/internal/browser/jstest"
)

// newAPI is globalThis.ag as main puts it there, on a fresh session.
func newAPI() js.Value {
	q := jsbridge.NewQueue()
	go q.Work()
	return js.ValueOf(api(q, newSession()))
}

// TestAPIRefuses calls each function with bad arguments as JS can pass
// them: each rejects at once naming the function and the value (before,
// a misspelt or mistyped option was ignored and its default used, 2.5
// became 2, a NaN lr built a model that could not step, a throwing getter
// killed the Go runtime), and the API works afterwards.
func TestAPIRefuses(t *testing.T) {
	ag := newAPI()
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	cb := js.FuncOf(func(js.Value, []js.Value) any { return nil })
	defer cb.Release()
	for _, c := range []struct {
		fn   string
		args []any
		want string
	}{
		{"build", []any{"cpu"}, "build: options cpu"},
		{"build", []any{jstest.Eval(`{widht: 8}`)}, `build: unknown option "widht"`},
		{"build", []any{jstest.Eval(`{width: 2.5}`)}, "build: width 2.5"},
		{"build", []any{jstest.Eval(`{width: NaN}`)}, "build: width NaN"},
		{"build", []any{jstest.Eval(`{width: "8"}`)}, "build: width 8: want a whole number"},
		{"build", []any{jstest.Eval(`{depth: Infinity}`)}, "build: depth Infinity"},
		{"build", []any{jstest.Eval(`{lr: NaN}`)}, "build: lr NaN"},
		{"build", []any{jstest.Eval(`{lr: -1}`)}, "build: lr -1"},
		{"build", []any{jstest.Eval(`{lr: Infinity}`)}, "build: lr +Inf"},
		{"build", []any{jstest.Eval(`{lr: "0.1"}`)}, "build: lr 0.1: want a number"},
		{"build", []any{jstest.Eval(`{device: 5}`)}, "build: device 5"},
		{"build", []any{jstest.Eval(`{get width() { throw new Error("getter") }}`)}, "build: reading the arguments: JavaScript error: getter"},
		{"train", []any{2.5}, "train: steps 2.5"},
		{"train", []any{"3"}, "train: steps 3"},
		{"train", []any{3, jstest.Eval(`{every: 2}`)}, "train: onProgress [object Object]"},
		{"train", []any{3, "cb"}, "train: onProgress cb"},
		{"train", []any{3, cb, 5}, "train: options 5"},
		{"train", []any{3, cb, jstest.Eval(`{evry: 2}`)}, `train: unknown option "evry"`},
		{"train", []any{3, cb, jstest.Eval(`{mode: 5}`)}, "train: mode 5"},
		{"train", []any{3, cb, jstest.Eval(`{every: NaN}`)}, "train: every NaN"},
		{"train", []any{3, cb, jstest.Eval(`{get every() { throw new Error("getter") }}`)}, "train: reading the arguments: JavaScript error: getter"},
		{"train", []any{3, cb, jstest.Eval(`new Proxy({}, {ownKeys() { throw new Error("trap") }})`)}, "train: reading the arguments: JavaScript error: trap"},
		{"train", []any{3, cb, jstest.Eval(`{mode: {toString() { throw new Error("str") }}}`)}, "train: reading the arguments: JavaScript error: str"},
		{"profile", []any{"lazy"}, "profile: options lazy"},
		{"profile", []any{jstest.Eval(`{mode: 5}`)}, "profile: mode 5"},
		{"profile", []any{jstest.Eval(`{steps: 2.5}`)}, "profile: steps 2.5"},
		{"trace", []any{5}, "trace: mode 5"},
	} {
		if _, err := jstest.Call(t, ag, c.fn, c.args...); !strings.HasPrefix(err, "rejected: "+c.want) {
			t.Errorf("ag.%s(%v): %q, want a rejection starting %q", c.fn, c.args, err, c.want)
		}
	}
	// The model built first is still there, and null options are defaults.
	r, err := jstest.Call(t, ag, "train", 2, nil, jstest.Eval(`{mode: null, every: null}`))
	if err != "" || r.Get("total").Int() != 2 || r.Get("mode").String() != ModeLazy {
		t.Fatalf("train after the refusals: %v, total %v", err, r.Get("total"))
	}
	if info, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, lr: 1, device: "cpu"}`)); err != "" || info.Get("config").Get("lr").Float() != 1 {
		t.Fatalf("build lr 1: %v", err)
	}
}

// TestAPICallbackThrows: an onProgress that throws stops the train at its
// next read and rejects naming the step, and the steps run are counted
// (before, the rejection was an internal error with a Go stack and the
// next train numbered its steps from before the failed one).
func TestAPICallbackThrows(t *testing.T) {
	ag := newAPI()
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	for _, mode := range []string{ModeLazy, ModeCaptured, ModeEager} {
		thrower := jstest.Eval(`function (step) { if (step >= 4) throw new Error("boom at " + step) }`)
		_, err := jstest.Call(t, ag, "train", 100, thrower, jstest.Eval(`{every: 2, mode: "`+mode+`"}`))
		if !strings.HasPrefix(err, "rejected: train: onProgress threw at step 4: JavaScript error: boom at 4; stopped there") {
			t.Fatalf("%s: train with a throwing onProgress: %q", mode, err)
		}
		var steps []int
		cb := js.FuncOf(func(_ js.Value, a []js.Value) any { steps = append(steps, a[0].Int()); return nil })
		r, err := jstest.Call(t, ag, "train", 2, cb, jstest.Eval(`{mode: "`+mode+`"}`))
		cb.Release()
		total := r.Get("total").Int()
		if err != "" || len(steps) != 2 || steps[1] != total || total < 6 || total > 100 {
			t.Fatalf("%s: train after it: %v, progress at %v, total %d", mode, err, steps, total)
		}
		if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
			t.Fatal(err)
		}
	}
}
