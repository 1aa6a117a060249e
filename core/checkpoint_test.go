package core

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// stack is a deep tanh MLP with dropout; ckpt checkpoints each layer.
type stack struct {
	ws []*Tensor
	x  *Tensor
}

func newStack(d *Device, layers, batch, width int, seed uint64) *stack {
	r := rand.New(rand.NewPCG(seed, 1))
	vals := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
		return v
	}
	s := &stack{x: d.Tensor(vals(batch*width, 1), batch, width)}
	for range layers {
		s.ws = append(s.ws, d.Param(vals(width*width, 1/math.Sqrt(float64(width))), width, width))
	}
	return s
}

func (s *stack) loss(ckpt bool) *Tensor {
	h := s.x
	for _, w := range s.ws {
		layer := func(x *Tensor) *Tensor { return Dropout(Tanh(Exp(Scale(Tanh(MatMul(x, w)), 0.5))), 0.2) }
		if ckpt {
			h = Checkpoint(layer, h)
		} else {
			h = layer(h)
		}
	}
	return Mean(Mul(h, h))
}

func (s *stack) grads(t *testing.T) [][]float32 {
	var out [][]float32
	for _, w := range s.ws {
		g, err := w.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

func TestCheckpointGradients(t *testing.T) {
	// without checkpoints; with them, forward and backward in one run; and
	// with a sync (reading the loss) between forward and backward
	var got [3][][]float32
	var loss [3]float32
	for i, ckpt := range []bool{false, true, true} {
		d := open(t)
		if err := d.Seed(7); err != nil {
			t.Fatal(err)
		}
		s := newStack(d, 4, 8, 16, 3)
		l := s.loss(ckpt).Keep()
		var err error
		if i == 2 {
			if loss[i], err = l.Item(); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		if loss[i], err = l.Item(); err != nil {
			t.Fatal(err)
		}
		got[i] = s.grads(t)
	}
	for i := 1; i < 3; i++ {
		if loss[0] != loss[i] {
			t.Errorf("case %d: loss %g with checkpoints, %g without", i, loss[i], loss[0])
		}
		for k := range got[0] {
			for j := range got[0][k] {
				if a, b := got[0][k][j], got[i][k][j]; math.Abs(float64(a-b)) > 1e-6*(1+math.Abs(float64(a))) {
					t.Fatalf("case %d: layer %d gradient %d: %g with checkpoints, %g without (the recomputed dropout must drop the same elements)", i, k, j, b, a)
				}
			}
		}
	}
}

func TestCheckpointSavesMemory(t *testing.T) {
	d := open(t)
	s := newStack(d, 16, 256, 128, 4)
	var est [2]MemoryEstimate
	for i, ckpt := range []bool{false, true} {
		var err error
		est[i], err = d.EstimateMemory(func() error { return s.loss(ckpt).Backward() })
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range s.ws {
			if w.Grad() != nil {
				t.Fatalf("EstimateMemory left a gradient")
			}
		}
	}
	t.Logf("without checkpoints: %v", est[0])
	t.Logf("with checkpoints:    %v", est[1])
	act := uint64(256 * 128 * 4) // one activation
	if est[0].Inputs != est[1].Inputs || est[0].Inputs < 16*128*128*4 {
		t.Errorf("inputs %d and %d bytes, want equal and at least the weights'", est[0].Inputs, est[1].Inputs)
	}
	// Without checkpoints every layer keeps about five activations for its
	// backward; with them, one per layer plus one layer's worth at a time.
	without, with := est[0].Outputs+est[0].Intermediates, est[1].Outputs+est[1].Intermediates
	if with > without/2 || without < 16*4*act {
		t.Errorf("outputs+intermediates %d bytes with checkpoints, %d without (one activation: %d): want less than half", with, without, act)
	}
	// and the device still trains: nothing of the estimate remains
	l := s.loss(true)
	if err := l.Backward(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ws[0].Grad().Data(); err != nil {
		t.Fatal(err)
	}
}

func TestEstimateMemoryDropsItsValues(t *testing.T) {
	d := open(t)
	w := d.Param([]float32{1, 2}, 2)
	var y *Tensor
	e, err := d.EstimateMemory(func() error {
		y = Mul(w, w).Keep()
		return Sum(y).Backward()
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Inputs != 8 || e.Total() == 0 {
		t.Errorf("estimate %+v: want inputs 8 bytes (w) and something more", e)
	}
	if _, err := y.Data(); !errors.Is(err, ErrRunFailed) && (err == nil || !errors.Is(err, errEstimate)) {
		t.Errorf("reading a value of the estimate: %v, want an error", err)
	}
	if w.Grad() != nil {
		t.Errorf("the estimate's gradient stayed")
	}
	if _, err := d.EstimateMemory(func() error { return errors.New("boom") }); err == nil {
		t.Errorf("a failing step: no error")
	}
	if _, err := d.EstimateMemory(nil); err == nil {
		t.Errorf("nil step: no error")
	}
}

func TestCheckpointEagerAndCapture(t *testing.T) {
	d := open(t)
	w := d.Param([]float32{0.5, -1, 2, 0.25}, 2, 2)
	f := func(x *Tensor) *Tensor { return Tanh(MatMul(x, w)) }
	x := d.Tensor([]float32{1, 2}, 1, 2)
	want, err := f(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	prev := d.SetEager(true)
	got, err := Checkpoint(f, x).Data()
	d.SetEager(prev)
	if err != nil || !near(got, want, 0) {
		t.Errorf("eager Checkpoint = %v, %v; want %v", got, err, want)
	}
	c := NewCapture(d, func(in []*Tensor) []*Tensor {
		y := Checkpoint(f, in[0])
		l := Sum(y)
		if err := l.Backward(); err != nil {
			panic(err)
		}
		return []*Tensor{y, w.Grad()}
	})
	for range 2 {
		out, err := c.Call(In([]float32{1, 2}, 1, 2))
		if err != nil {
			t.Fatal(err)
		}
		if !near(out[0], want, 0) {
			t.Errorf("captured Checkpoint = %v, want %v", out[0], want)
		}
	}
}
