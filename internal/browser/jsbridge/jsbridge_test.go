//go:build js

package jsbridge

import (
	"math"
	"strings"
	"syscall/js"
	"testing"
)

// TestCount: whole numbers pass, undefined and null give the default, and
// everything else is refused naming the value as JavaScript writes it.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		v    js.Value
		want int
	}{
		{js.ValueOf(10), 10}, {js.ValueOf(-3), -3}, {js.ValueOf(0), 0}, {js.ValueOf(1e15), 1e15},
		{js.Undefined(), 7}, {js.Null(), 7},
	} {
		got, err := Count(c.v, "train: every", 7)
		if err != nil || got != c.want {
			t.Errorf("Count(%v) = %d, %v; want %d", c.v, got, err, c.want)
		}
	}
	for _, c := range []struct {
		v    js.Value
		text string
	}{
		{js.ValueOf(math.NaN()), "NaN"}, {js.ValueOf(math.Inf(1)), "Infinity"}, {js.ValueOf(math.Inf(-1)), "-Infinity"},
		{js.ValueOf(2.5), "2.5"}, {js.ValueOf(1e300), "1e+300"}, {js.ValueOf("many"), "many"}, {js.ValueOf("10"), "10"},
		{js.ValueOf(true), "true"}, {js.ValueOf(map[string]any{}), "[object Object]"},
	} {
		got, err := Count(c.v, "train: every", 7)
		if err == nil {
			t.Errorf("Count(%s) = %d, want an error", c.text, got)
			continue
		}
		if want := "train: every " + c.text + ":"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Count(%s): %q, want it to start %q", c.text, err, want)
		}
	}
}
