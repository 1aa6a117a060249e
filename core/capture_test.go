package core

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/profile"
)

func TestCaptureReplays(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1, 2, 3, 4}, 2, 2)
	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		y := MatMul(in[0], w)
		return []*Tensor{Sum(y), ReLU(Sub(y, in[1]))}
	})
	profile.Count(true)
	defer profile.Count(false)
	for i := range 4 {
		x := []float32{float32(i), 1, 0, 1}
		out, err := c.Call(In(x, 2, 2), In([]float32{2, 2, 2, 2}, 2, 2))
		if err != nil {
			t.Fatal(err)
		}
		y := []float32{x[0]*1 + x[1]*3, x[0]*2 + x[1]*4, x[2]*1 + x[3]*3, x[2]*2 + x[3]*4}
		want0 := y[0] + y[1] + y[2] + y[3]
		if out[0][0] != want0 {
			t.Errorf("call %d: sum %v, want %v", i, out[0], want0)
		}
		relu := make([]float32, 4)
		for k := range y {
			relu[k] = max(y[k]-2, 0)
		}
		if !slices.Equal(out[1], relu) {
			t.Errorf("call %d: relu %v, want %v", i, out[1], relu)
		}
	}
	if c.Records() != 1 {
		t.Errorf("%d recordings for one input shape", c.Records())
	}
	// One upload and one download per replay, nothing else.
	tr := profile.XferData()
	for _, s := range tr.Sites {
		if s.Site != "capture inputs" && s.Site != "capture outputs" && s.Site != "inputs" {
			t.Errorf("unexpected transfer site %+v", s)
		}
		if s.Site == "capture inputs" && s.Count != 3 || s.Site == "capture outputs" && s.Count != 4 {
			t.Errorf("transfers at %s: %d", s.Site, s.Count)
		}
	}
	// A new shape records again; so does a reopened device.
	if _, err := c.Call(In(make([]float32, 6), 3, 2), In(make([]float32, 6), 3, 2)); err != nil {
		t.Fatal(err)
	}
	dev.Close()
	if _, err := c.Call(In(make([]float32, 6), 3, 2), In(make([]float32, 6), 3, 2)); err != nil {
		t.Fatal(err)
	}
	if c.Records() != 3 {
		t.Errorf("%d recordings, want 3 (shape change, device reopened)", c.Records())
	}
}

func TestCaptureGuard(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1, 2}, 2)
	cases := map[string]func(in []*Tensor) []*Tensor{
		"host value made inside": func(in []*Tensor) []*Tensor {
			return []*Tensor{Add(in[0], dev.Tensor([]float32{1, 1}, 2))}
		},
		"download inside": func(in []*Tensor) []*Tensor {
			if _, err := Sum(in[0]).Item(); err != nil {
				panic(err)
			}
			return []*Tensor{in[0]}
		},
		"write inside": func(in []*Tensor) []*Tensor {
			if err := w.WriteAt(0, []float32{0}); err != nil {
				panic(err)
			}
			return []*Tensor{Add(in[0], w)}
		},
	}
	for name, fn := range cases {
		_, err := NewCapture(dev, fn).Call(In([]float32{1, 2}, 2))
		if err == nil || !errors.Is(err, ErrCapture) {
			t.Errorf("%s: err = %v, want a capture guard error", name, err)
		}
	}
	// the device is still usable afterwards
	if v, err := Sum(w).Item(); err != nil || v != 3 {
		t.Errorf("after guard errors: %v, %v", v, err)
	}
}

// A Constant made inside a Capture's function is baked into the recording
// (Cumsum's triangle is one); a Tensor made there is refused.
func TestCaptureConstants(t *testing.T) {
	dev := open(t)
	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		return []*Tensor{Add(Cumsum(in[0], 0), dev.Constant([]float32{10, 20, 30}, 3)), ArgMax(in[0], 0, false)}
	})
	for _, x := range [][]float32{{1, 2, 3}, {0, 1, 0}} {
		runtime.GC() // the Constants have no owner but the recording
		runtime.GC()
		out, err := c.Call(In(x, 3))
		if err != nil {
			t.Fatal(err)
		}
		want := []float32{x[0] + 10, x[0] + x[1] + 20, x[0] + x[1] + x[2] + 30}
		if !slices.Equal(out[0], want) {
			t.Errorf("Call(%v) = %v, want %v", x, out[0], want)
		}
		if am := slices.Index(x, slices.Max(x)); out[1][0] != float32(am) {
			t.Errorf("ArgMax(%v) = %v, want %d", x, out[1], am)
		}
	}
	if n := c.Records(); n != 1 {
		t.Errorf("%d recordings, want 1: a collection freed a Constant the recording reads", n)
	}
	bad := NewCapture(dev, func(in []*Tensor) []*Tensor {
		return []*Tensor{Add(in[0], dev.Tensor([]float32{1, 2, 3}, 3))}
	})
	if _, err := bad.Call(In([]float32{1, 2, 3}, 3)); err == nil || !strings.Contains(err.Error(), "pass it as an input") {
		t.Errorf("a Tensor made inside the function: error %v, want one saying to pass it as an input", err)
	}
}

// A Capture keeps one recording per guarded mode: switching back and forth
// replays both, and a shape change under one mode replaces only its own.
func TestCaptureGuardedModes(t *testing.T) {
	dev := open(t)
	double := false
	c := NewCapture(dev, func(in []*Tensor) []*Tensor {
		if dev.Guard(func() bool { return double }) {
			return []*Tensor{Scale(in[0], 2)}
		}
		return []*Tensor{Scale(in[0], 3)}
	})
	call := func(want float32, n int) {
		t.Helper()
		x := make([]float32, n)
		for i := range x {
			x[i] = 1
		}
		out, err := c.Call(In(x, n))
		if err != nil {
			t.Fatal(err)
		}
		if out[0][0] != want {
			t.Fatalf("double=%t: got %g, want %g", double, out[0][0], want)
		}
	}
	call(3, 4)
	double = true
	call(2, 4)
	double = false
	call(3, 4)
	double = true
	call(2, 4)
	if r := c.Records(); r != 2 {
		t.Errorf("%d recordings after switching modes twice, want 2 (one per mode)", r)
	}
	call(2, 5) // new shape under double: replaces that mode's recording
	double = false
	call(3, 4)
	if r, n := c.Records(), len(c.slot.recs); r != 3 || n != 2 {
		t.Errorf("%d recordings made, %d kept: want 3 made, 2 kept", r, n)
	}
}

// TestCaptureRun checks Run against Call: a training step captured once
// and advanced by Run (no outputs read) leaves the parameters where Call's
// steps leave them, and Run downloads nothing, the recording call aside.
func TestCaptureRun(t *testing.T) {
	train := func(read func(c *Capture, in ...Input) error) ([]float32, float32) {
		dev := open(t)
		w := dev.Param([]float32{1, -2, 3, 0.5}, 4)
		vel, err := dev.Zeros(4)
		if err != nil {
			t.Fatal(err)
		}
		c := NewCapture(dev, func(in []*Tensor) []*Tensor {
			w.ZeroGrad()
			loss := Sum(Mul(Mul(w, w), in[0]))
			if err := loss.Backward(); err != nil {
				panic(err)
			}
			SGDUpdate(w, w.Grad(), vel, in[1])
			return []*Tensor{loss}
		})
		hp := In([]float32{0.05, 0.9, 0}, 3)
		for i := range 6 {
			x := In([]float32{1, float32(i), 2, 1}, 4)
			if i == 0 || i == 5 {
				if _, err := c.Call(x, hp); err != nil { // records; the last reads
					t.Fatal(err)
				}
				continue
			}
			if err := read(c, x, hp); err != nil {
				t.Fatal(err)
			}
		}
		out, err := c.Call(In([]float32{1, 1, 1, 1}, 4), hp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.Data()
		if err != nil {
			t.Fatal(err)
		}
		return got, out[0][0]
	}
	wantW, wantLoss := train(func(c *Capture, in ...Input) error { _, err := c.Call(in...); return err })
	profile.Count(true)
	defer profile.Count(false)
	gotW, gotLoss := train((*Capture).Run)
	if !slices.Equal(gotW, wantW) || gotLoss != wantLoss {
		t.Errorf("after Run steps: w %v, loss %v; after Call steps: w %v, loss %v", gotW, gotLoss, wantW, wantLoss)
	}
	// The recording Call, the replayed one and the last read; the 4 Runs
	// do not.
	n := 0
	for _, s := range profile.XferData().Sites {
		if s.Site == "capture outputs" {
			n = s.Count
		}
	}
	if n != 3 {
		t.Errorf("%d output downloads, want 3 (three Calls; four Runs read nothing)", n)
	}
	if err := NewCapture(open(t), func(in []*Tensor) []*Tensor { return in }).Run(); err == nil || !strings.Contains(err.Error(), "Capture.Run: no inputs") {
		t.Errorf("Run with no inputs: %v, want an error naming Capture.Run", err)
	}
}

// A replay writes the values the recording kept (gradients) into their
// buffers again: one a read moved to the host, or ZeroGrad gave back, must
// not be written behind its tensor's back (a stale gradient, or another
// value's memory overwritten), so the capture records anew where needed.
func TestCaptureKeptOutputsGivenBack(t *testing.T) {
	cases := []struct {
		name    string
		between func(w *Tensor) error
		records int
	}{
		{"nothing", func(*Tensor) error { return nil }, 1},
		// a small value read whole moves to the host (keepRead), but not
		// one a replay writes: the recording stays valid
		{"gradient read", func(w *Tensor) error { _, err := w.Grad().Data(); return err }, 1},
		{"ZeroGrad", func(w *Tensor) error { w.ZeroGrad(); return nil }, 4},
	}
	for _, c := range cases {
		dev := open(t)
		w := dev.Param([]float32{1, 1, 1, 1}, 4)
		cp := NewCapture(dev, func(in []*Tensor) []*Tensor {
			loss := Sum(Mul(w, in[0]))
			if err := loss.Backward(); err != nil {
				panic(err)
			}
			return []*Tensor{loss}
		})
		for i := range 3 {
			x := []float32{float32(i), 2, 3, 4}
			if _, err := cp.Call(In(x, 4)); err != nil {
				t.Fatalf("%s: call %d: %v", c.name, i, err)
			}
			if w.Grad() == nil {
				t.Fatalf("%s: call %d: no gradient", c.name, i)
			}
			g, err := w.Grad().Data()
			if err != nil || !slices.Equal(g, x) {
				t.Errorf("%s: call %d: gradient %v (%v), want %v", c.name, i, g, err, x)
			}
			if err := c.between(w); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			// a value of the gradient's size made now, on the device: it
			// may take a buffer given back above
			y := Affine(dev.Full(1, 4), 10, 0)
			if err := dev.Sync(y); err != nil {
				t.Fatal(err)
			}
			if _, err := cp.Call(In([]float32{-1, -1, -1, -1}, 4)); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if v, err := y.Data(); err != nil || !slices.Equal(v, []float32{10, 10, 10, 10}) {
				t.Errorf("%s: call %d: a value made between calls reads %v (%v) after a replay, want 10s", c.name, i, v, err)
			}
		}
		if cp.Records() != c.records {
			t.Errorf("%s: %d recordings, want %d", c.name, cp.Records(), c.records)
		}
	}
}
