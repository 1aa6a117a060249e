//go:build js

package main

import (
	"encoding/json"
	"math"
	"strings"
	"syscall/js"
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/internal/browser/jstest"
)

// newAPI is globalThis.ag as the page gets it (app.Run(Spec), the default
// page's ag.wasm), on a fresh session.
func newAPI(t *testing.T) js.Value {
	t.Helper()
	ready := make(chan struct{})
	f := js.FuncOf(func(js.Value, []js.Value) any { close(ready); return nil })
	defer f.Release()
	js.Global().Set("agReady", f)
	go app.Run(Spec) // never returns: its worker serves this API
	<-ready
	js.Global().Delete("agReady")
	return js.Global().Get("ag")
}

// TestAPIRefuses calls each function with bad arguments as JS can pass
// them: each rejects naming the function and the value (before, a
// misspelt or mistyped option was ignored and its default used, 2.5
// became 2, a NaN lr built a model that could not step, a throwing getter
// killed the Go runtime), and the API works afterwards.
func TestAPIRefuses(t *testing.T) {
	ag := newAPI(t)
	if a, err := jstest.Call(t, ag, "app"); err != "" || a.Get("name").String() != "mlp" || a.Get("params").Length() != 4 {
		t.Fatalf("ag.app(): %v, name %v", err, a.Get("name"))
	}
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
		{"build", []any{jstest.Eval(`{width: 2.5}`)}, "build: mlp: parameter width = 2.5"},
		{"build", []any{jstest.Eval(`{width: NaN}`)}, "build: mlp: parameter width = NaN"},
		{"build", []any{jstest.Eval(`{width: "8"}`)}, "build: mlp: parameter width 8: want a number"},
		{"build", []any{jstest.Eval(`{depth: Infinity}`)}, "build: mlp: parameter depth = +Inf"},
		{"build", []any{jstest.Eval(`{lr: NaN}`)}, "build: mlp: parameter lr = NaN"},
		{"build", []any{jstest.Eval(`{lr: -1}`)}, "build: mlp: parameter lr = -1"},
		{"build", []any{jstest.Eval(`{lr: 0}`)}, "build: mlp: parameter lr = 0"},
		{"build", []any{jstest.Eval(`{lr: Infinity}`)}, "build: mlp: parameter lr = +Inf"},
		{"build", []any{jstest.Eval(`{lr: "0.1"}`)}, "build: mlp: parameter lr 0.1: want a number"},
		{"build", []any{jstest.Eval(`{device: 5}`)}, "build: device 5"},
		{"build", []any{jstest.Eval(`{get width() { throw new Error("getter") }}`)}, "build: reading the arguments: JavaScript error: getter"},
		{"train", []any{2.5}, "train: steps 2.5"},
		{"train", []any{"3"}, "train: steps 3"},
		{"train", []any{3, jstest.Eval(`{every: 2}`)}, "train: onProgress [object Object]"},
		{"train", []any{3, "cb"}, "train: onProgress cb"},
		{"train", []any{3, cb, 5}, "train: options 5"},
		{"train", []any{3, cb, jstest.Eval(`{evry: 2}`)}, `train: unknown option "evry"`},
		{"train", []any{3, cb, jstest.Eval(`{mode: 5}`)}, "train: mode 5"},
		{"train", []any{3, cb, jstest.Eval(`{mode: "jit"}`)}, `train: mode "jit": want "eager", "lazy" or "captured"`},
		{"train", []any{3, cb, jstest.Eval(`{every: NaN}`)}, "train: every NaN"},
		{"train", []any{3, cb, jstest.Eval(`{get every() { throw new Error("getter") }}`)}, "train: reading the arguments: JavaScript error: getter"},
		{"train", []any{3, cb, jstest.Eval(`new Proxy({}, {ownKeys() { throw new Error("trap") }})`)}, "train: reading the arguments: JavaScript error: trap"},
		{"train", []any{3, cb, jstest.Eval(`{mode: {toString() { throw new Error("str") }}}`)}, "train: reading the arguments: JavaScript error: str"},
		{"profile", []any{"lazy"}, "profile: options lazy"},
		{"profile", []any{jstest.Eval(`{mode: 5}`)}, "profile: mode 5"},
		{"profile", []any{jstest.Eval(`{mode: "jit"}`)}, `profile: mode "jit"`},
		{"profile", []any{jstest.Eval(`{steps: 2.5}`)}, "profile: steps 2.5"},
		{"trace", []any{5}, "trace: mode 5"},
	} {
		if _, err := jstest.Call(t, ag, c.fn, c.args...); !strings.HasPrefix(err, "rejected: "+c.want) {
			t.Errorf("ag.%s(%v): %q, want a rejection starting %q", c.fn, c.args, err, c.want)
		}
	}
	// The model built first is still there, and null options are defaults.
	r, err := jstest.Call(t, ag, "train", 2, nil, jstest.Eval(`{mode: null, every: null}`))
	if err != "" || r.Get("total").Int() != 2 {
		t.Fatalf("train after the refusals: %v, total %v", err, r.Get("total"))
	}
	if info, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, lr: 1, device: "cpu"}`)); err != "" || info.Get("config").Get("lr").Float() != 1 || info.Get("flops").Float() != 3*2*16*8*8*2 {
		t.Fatalf("build lr 1: %v, answer %v", err, js.Global().Get("JSON").Call("stringify", info))
	}
}

// ag.build({width: 4096, depth: 64}) is inside the fields' bounds but needs
// about 17 GiB: it killed the wasm runtime (out of memory) and every later
// call failed. The page's call is refused, and a model builds and trains
// afterwards.
func TestAPIBuildRefusesWhatDoesNotFit(t *testing.T) {
	ag := newAPI(t)
	_, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 4096, depth: 64, device: "cpu"}`))
	if !strings.HasPrefix(err, "rejected: build mlp on cpu") || !strings.Contains(err, "an MLP of width 4096, depth 64, batch 16 needs about") || !strings.Contains(err, "the largest that fits: width") {
		t.Fatalf("ag.build of a 4096x64 MLP: %q, want the refusal naming what fits", err)
	}
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 16, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
		t.Fatalf("build after a refusal: %s", err)
	}
	if _, err := jstest.Call(t, ag, "train", 2); err != "" {
		t.Fatalf("train after a refusal: %s", err)
	}
}

// TestAPICallbackThrows: an onProgress that throws stops the train at its
// next read and rejects naming the step, and the steps run are counted
// (before, the rejection was an internal error with a Go stack and the
// next train numbered its steps from before the failed one).
func TestAPICallbackThrows(t *testing.T) {
	ag := newAPI(t)
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	for _, mode := range []string{app.ModeLazy, app.ModeCaptured, app.ModeEager} {
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
		if err != "" || len(steps) != 2 || steps[1] != total || total < 6 || total > 100 || r.Get("mode").String() != mode {
			t.Fatalf("%s: train after it: %v, progress at %v, total %d, mode %v", mode, err, steps, total, r.Get("mode"))
		}
		if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 8, depth: 2, batch: 4, device: "cpu"}`)); err != "" {
			t.Fatal(err)
		}
	}
}

// TestAPIProfileModes profiles the three modes as the page's "Profile 3
// modes" does, and checks what tells them apart.
func TestAPIProfileModes(t *testing.T) {
	ag := newAPI(t)
	if _, err := jstest.Call(t, ag, "profile", jstest.Eval(`{mode: "lazy", steps: 2}`)); !strings.Contains(err, "no model") {
		t.Fatalf("profile before build: %q, want a rejection", err)
	}
	if _, err := jstest.Call(t, ag, "build", jstest.Eval(`{width: 16, depth: 2, batch: 8, device: "cpu"}`)); err != "" {
		t.Fatal(err)
	}
	type report struct {
		TotalMS float64 `json:"total_ms"`
		Stages  []struct {
			Pct float64 `json:"pct"`
		} `json:"stages"`
	}
	type prof struct {
		Steps     int                 `json:"steps"`
		Mode      string              `json:"mode"`
		ModeNote  string              `json:"mode_note"`
		Device    string              `json:"device"`
		Source    string              `json:"source"`
		Compiles  int                 `json:"compiles"`
		Forward   report              `json:"forward"`
		Backward  report              `json:"backward"`
		Launches  struct{ Total int } `json:"launches"`
		Transfers struct {
			UpCount int `json:"up_count"`
		} `json:"transfers"`
		Model map[string]float64 `json:"model"`
	}
	const steps = 3
	got := map[string]prof{}
	for _, mode := range []string{app.ModeEager, app.ModeLazy, app.ModeCaptured} {
		v, err := jstest.Call(t, ag, "profile", jstest.Eval(`{mode: "`+mode+`", steps: 3}`))
		if err != "" {
			t.Fatal(err)
		}
		var p prof
		if err := json.Unmarshal([]byte(js.Global().Get("JSON").Call("stringify", v).String()), &p); err != nil {
			t.Fatal(err)
		}
		got[mode] = p
		if p.Steps != steps || p.Mode != mode || p.Device == "" || p.ModeNote == "" || p.Source != "browser" || p.Model["width"] != 16 {
			t.Fatalf("%s: %+v", mode, p)
		}
		for name, r := range map[string]report{"forward": p.Forward, "backward": p.Backward} {
			var sum float64
			for _, s := range r.Stages {
				sum += s.Pct
			}
			if len(r.Stages) == 0 || math.Abs(sum-100) > 0.01 {
				t.Errorf("%s %s: %d stages summing to %.4f%%, want 100 +- 0.01", mode, name, len(r.Stages), sum)
			}
		}
		tr, err := jstest.Call(t, ag, "trace", mode)
		var f struct{ TraceEvents []map[string]any }
		if err != "" || json.Unmarshal([]byte(tr.String()), &f) != nil || len(f.TraceEvents) < 10 {
			t.Fatalf("%s trace: %d events, err %v", mode, len(f.TraceEvents), err)
		}
	}
	// Eager runs a program per op; the lazy modes one per step.
	if e, c := got[app.ModeEager].Launches.Total, got[app.ModeCaptured].Launches.Total; e < 5*c {
		t.Errorf("launches: eager %d, captured %d: want eager >= 5x captured", e, c)
	}
	if n := got[app.ModeLazy].Compiles; n != 0 {
		t.Errorf("lazy: %d compiles during the profile, want 0 (the cache serves every step)", n)
	}
	if n := got[app.ModeCaptured].Compiles; n != 0 {
		t.Errorf("captured: %d compiles during the profile, want 0", n)
	}
	if l, c := got[app.ModeLazy].Transfers.UpCount, got[app.ModeCaptured].Transfers.UpCount; l <= c {
		t.Errorf("uploads: lazy %d, captured %d: want lazy > captured (indices and hyperparameters apart, packed in one)", l, c)
	}
}
