package core

import (
	"slices"
	"strings"
	"testing"
)

// ReadLater and CallLater give what Data and Call give, waited for in any
// order and more than once; Later.Item refuses an output that is not one
// element; a failed run is the ReadLater's error. On the cpu backend (no
// backend.LaterReader) the values are read when asked for.
func TestReadLater(t *testing.T) {
	dev, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	x := dev.Tensor([]float32{1, 2, 3}, 3)
	y := AddScalar(Scale(x, 2), 1)
	l, err := y.ReadLater()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := l.Wait()
		if err != nil || len(out) != 1 || !slices.Equal(out[0], []float32{3, 5, 7}) {
			t.Fatalf("Wait: %v, %v", out, err)
		}
	}
	if _, err := l.Item(); err == nil || !strings.Contains(err.Error(), "3 elements, want 1") {
		t.Fatalf("Item of 3 elements: err %v", err)
	}
	if v, err := Ready([]float32{4}).Item(); v != 4 || err != nil {
		t.Fatalf("Ready's Item: %v, %v", v, err)
	}

	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		return []*Tensor{Sum(in[0]), Scale(in[0], 3)}
	})
	var ls []*Later
	for i := range 4 { // the first call records
		if ls = append(ls, nil); i%2 == 0 {
			ls[i], err = c.CallLater(In([]float32{float32(i), 1}, 2))
		} else {
			var out [][]float32
			out, err = c.Call(In([]float32{float32(i), 1}, 2))
			ls[i] = Ready(out...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := len(ls) - 1; i >= 0; i-- {
		out, err := ls[i].Wait()
		if err != nil || len(out) != 2 || out[0][0] != float32(i+1) || !slices.Equal(out[1], []float32{float32(3 * i), 3}) {
			t.Fatalf("call %d: %v, %v", i, out, err)
		}
	}
	if _, err := c.CallLater(In([]float32{1, 2, 3}, 2)); err == nil || !strings.Contains(err.Error(), "3 values for shape [2]") {
		t.Fatalf("CallLater with 3 values for 2: err %v", err)
	}
}
