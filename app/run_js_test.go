//go:build js

package app

import (
	"fmt"
	"io"
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

// saver is a count whose checkpoint is its step count, built from a
// choice and a file.
type saver struct {
	count
	in Input
}

func (s *saver) Save(w io.Writer) error { _, err := fmt.Fprint(w, s.n); return err }
func (s *saver) Load(r io.Reader) error { _, err := fmt.Fscan(r, &s.n); return err }

// TestRunAPIInputs: ag.build takes a choice's word or index and a file as
// {name, text}, refusing other types naming them; ag.save resolves with a
// Uint8Array that ag.load reads back, and refuses what is no Uint8Array.
func TestRunAPIInputs(t *testing.T) {
	var built *saver
	spec := &Spec{Name: "saver", Checkpoint: true,
		Params: []Param{ChoiceParam("size", "tiny", "", "tiny", "mini")},
		Files:  []FileParam{{Name: "text"}},
		BuildInput: func(_ *core.Device, in Input) (Trainer, error) {
			built = &saver{in: in}
			return built, nil
		}}
	q := jsbridge.NewQueue()
	go q.Work()
	ag := js.ValueOf(api(q, newSession(spec, "browser")))
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{size: "mini", text: {name: "a.txt", text: "hello"}, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	if built.in.Choice("size") != "mini" || string(built.in.File("text").Data) != "hello" || built.in.File("text").Name != "a.txt" {
		t.Fatalf("BuildInput got %+v", built.in)
	}
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{size: 0, device: "cpu"}`)); err != "" || built.in.Choice("size") != "tiny" || built.in.File("text").Name != "" {
		t.Fatalf("build with the index 0: %q, %+v", err, built.in)
	}
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{jstest.Eval(`{size: "huge"}`)}, `build: saver: parameter size "huge": want one of tiny, mini`},
		{[]any{jstest.Eval(`{size: true}`)}, `build: saver: parameter size true: want one of ["tiny" "mini"] or its index`},
		{[]any{jstest.Eval(`{text: "hello"}`)}, "build: saver: file text hello: want {name, text}"},
	} {
		if _, err := jstest.Call(t, ag, "build", c.args...); !strings.HasPrefix(err, "rejected: "+c.want) {
			t.Errorf("ag.build(%v): %q, want a rejection starting %q", c.args, err, c.want)
		}
	}
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	if _, err := jstest.Call(t, ag, "train", 3); err != "" {
		t.Fatal(err)
	}
	b, err := jstest.Call(t, ag, "save")
	if err != "" || !b.InstanceOf(js.Global().Get("Uint8Array")) || b.Get("length").Int() != 1 {
		t.Fatalf("save: %q, %v: want a Uint8Array of \"3\"", err, b)
	}
	built.n = 0
	if _, err := jstest.Call(t, ag, "load", b); err != "" || built.n != 3 {
		t.Fatalf("load: %q, count %d: want 3", err, built.n)
	}
	if _, err := jstest.Call(t, ag, "load", "3"); !strings.HasPrefix(err, "rejected: load: 3: want the file's bytes, a Uint8Array") {
		t.Errorf("load of a string: %q", err)
	}
}
