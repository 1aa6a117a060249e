package core

import (
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/cpu"
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
	var none *Later
	if _, err := none.Item(); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("Item of a nil Later: err %v, want one saying nil", err)
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

// laterCPU is the cpu backend with reads that complete at their wait, as
// in the browser: ReadLater copies the values when asked (work submitted
// after cannot change them) and hands them over at the wait.
type laterCPU struct {
	backend.Backend
	waits, asked int
}

func (b *laterCPU) Caps() backend.Caps {
	c := b.Backend.Caps()
	c.LaterReads = true
	return c
}

func (b *laterCPU) ReadLater(buf backend.Buffer, off int, dst []float32) (func() error, error) {
	v := make([]float32, len(dst))
	if err := b.Backend.Read(buf, off, v); err != nil {
		return nil, err
	}
	b.asked++
	return func() error { b.waits++; copy(dst, v); return nil }, nil
}

type laterDriver struct{}

func (laterDriver) Open() (backend.Backend, error) {
	be, err := backend.Open("cpu")
	if err != nil {
		return nil, err
	}
	return &laterCPU{Backend: be}, nil
}
func (laterDriver) Available() backend.Availability { return backend.Availability{OK: true} }

func init() { backend.Register("cpu-later", -1, laterDriver{}) }

// On a backend that reads later (Caps.LaterReads), ReadLater and CallLater
// ask and return; the values come at Wait, as they were when asked, and
// the tensor read and released meanwhile gives its memory to later work.
func TestReadLaterAsync(t *testing.T) {
	dev, err := Open("cpu-later")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	be := dev.be.(*laterCPU)
	x := dev.Tensor([]float32{1, 2, 3}, 3)
	y := Mul(x, x)
	l, err := y.ReadLater()
	if err != nil {
		t.Fatal(err)
	}
	if be.asked != 1 || be.waits != 0 {
		t.Fatalf("after ReadLater: %d asked, %d waited, want 1, 0", be.asked, be.waits)
	}
	if err := y.Release(); err != nil {
		t.Fatal(err)
	}
	if v, err := Scale(Mul(x, x), -1).Data(); err != nil || v[2] != -9 {
		t.Fatalf("later work: %v %v", v, err)
	}
	out, err := l.Wait()
	if err != nil || !slices.Equal(out[0], []float32{1, 4, 9}) || be.waits != 1 {
		t.Fatalf("Wait: %v %v (%d waits)", out, err, be.waits)
	}
	if _, err := l.Wait(); err != nil || be.waits != 1 {
		t.Fatalf("a second Wait: %v, %d backend waits, want 1", err, be.waits)
	}

	c := NewCapture(dev, func(in []*Tensor) []*Tensor { return []*Tensor{Sum(in[0])} })
	var ls []*Later
	for i := range 3 {
		l, err := c.CallLater(In([]float32{float32(i), 1}, 2))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if be.asked != 3 { // the recording call read at once
		t.Fatalf("3 CallLater: %d reads asked later, want 2 (+1 before)", be.asked)
	}
	for i, l := range ls {
		if v, err := l.Item(); err != nil || v != float32(i+1) {
			t.Fatalf("call %d: %v %v", i, v, err)
		}
	}
}
