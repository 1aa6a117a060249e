//go:build js

package app

import (
	"strings"
	"syscall/js"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/browser/jsbridge"
	"github.com/ag-go/ag/internal/browser/jstest"
)

// count is a Trainer whose loss is its step count.
type count struct{ n int }

func (c *count) Step() (float32, error) { c.n++; return float32(c.n), nil }

// TestRunAPIRefuses: the functions Run puts on globalThis.ag reject bad
// arguments naming the function and the value (a parameter given as a
// string or misspelt was left at its default; a throwing getter killed
// the Go runtime), and an onProgress that throws stops the train with its
// steps counted.
func TestRunAPIRefuses(t *testing.T) {
	spec := &Spec{Name: "count", Params: []Param{{Name: "width", Default: 4, Min: 1, Max: 8, Int: true}},
		Build: func(*core.Device, Config) (Trainer, error) { return &count{}, nil }}
	q := jsbridge.NewQueue()
	go q.Work()
	ag := js.ValueOf(api(q, newSession(spec, "browser")))
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 2, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fn   string
		args []any
		want string
	}{
		{"build", []any{jstest.Eval(`{width: "8"}`)}, "build: count: parameter width 8: want a number"},
		{"build", []any{jstest.Eval(`{widht: 8}`)}, `build: unknown option "widht"`},
		{"build", []any{jstest.Eval(`{width: 2.5}`)}, "build: count: parameter width = 2.5"},
		{"build", []any{jstest.Eval(`{device: 5}`)}, "build: device 5"},
		{"build", []any{jstest.Eval(`{get width() { throw new Error("getter") }}`)}, "build: reading the arguments: JavaScript error: getter"},
		{"train", []any{3, jstest.Eval(`{every: 2}`)}, "train: onProgress [object Object]"},
		{"train", []any{3, nil, jstest.Eval(`{mode: "lazy"}`)}, `train: mode "lazy": count trains in its own step only`},
		{"train", []any{3, nil, jstest.Eval(`{mode: 5}`)}, "train: mode 5"},
		{"train", []any{3, nil, jstest.Eval(`{mdoe: "lazy"}`)}, `train: unknown option "mdoe"`},
		{"train", []any{3, nil, jstest.Eval(`{get every() { throw new Error("getter") }}`)}, "train: reading the arguments: JavaScript error: getter"},
		{"profile", []any{jstest.Eval(`{mode: 5}`)}, "profile: mode 5"},
		{"trace", []any{5}, "trace: mode 5"},
	} {
		if _, err := jstest.Call(t, ag, c.fn, c.args...); !strings.HasPrefix(err, "rejected: "+c.want) {
			t.Errorf("ag.%s(%v): %q, want a rejection starting %q", c.fn, c.args, err, c.want)
		}
	}
	_, err := jstest.Call(t, ag, "train", 10, jstest.Eval(`function (step) { if (step == 3) throw new Error("boom") }`))
	if !strings.HasPrefix(err, "rejected: train: onProgress threw at step 3: JavaScript error: boom; stopped there, 3 steps trained since build") {
		t.Fatalf("train with a throwing onProgress: %q", err)
	}
	if r, err := jstest.Call(t, ag, "train", 2); err != "" || r.Get("total").Int() != 5 || r.Get("last_loss").Int() != 5 {
		t.Fatalf("train after it: %v, result %v", err, js.Global().Get("JSON").Call("stringify", r))
	}
}
