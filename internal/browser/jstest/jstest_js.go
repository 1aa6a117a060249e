//go:build js

// Package jstest calls the browser builds' JS API from Go tests run under
// Node, as the page calls it.
package jstest

import (
	"syscall/js"
	"testing"
	"time"
)

// Call calls ag[name](args...) as the page does and awaits the Promise:
// the value, or the rejection's text ("rejected: " and its message).
func Call(t *testing.T, ag js.Value, name string, args ...any) (js.Value, string) {
	t.Helper()
	type settled struct {
		v   js.Value
		err string
	}
	ch := make(chan settled, 1)
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- settled{v: a[0]}; return nil })
	fail := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- settled{err: "rejected: " + a[0].Get("message").String()}
		return nil
	})
	defer ok.Release()
	defer fail.Release()
	ag.Get(name).Invoke(args...).Call("then", ok, fail)
	select {
	case s := <-ch:
		return s.v, s.err
	case <-time.After(60 * time.Second): // a hang guard, not a speed check
		t.Fatalf("ag.%s did not settle in 60 s", name)
		return js.Undefined(), ""
	}
}

// Eval is the value of the JS expression src.
func Eval(src string) js.Value { return js.Global().Get("Function").New("return " + src).Invoke() }
