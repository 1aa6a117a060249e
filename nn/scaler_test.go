package nn

import (
	"errors"
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// The loss a GradScaler scales stays readable after the step has run, as
// a plain Backward's loss does, without a Keep of the user's own.
func TestGradScalerLossReadable(t *testing.T) {
	dev := openDev(t)
	w := dev.Param([]float32{1, 2, 3}, 3)
	opt := NewSGD([]*core.Tensor{w}, 0.1, 0)
	s := NewGradScaler(1024)
	loss := linearLoss(w, []float32{1, -1, 2}) // 1 - 2 + 6
	if err := s.Backward(loss); err != nil {
		t.Fatal(err)
	}
	if _, skipped, err := s.Step(opt, 0); err != nil || skipped {
		t.Fatalf("Step: skipped %t, %v", skipped, err)
	}
	if v, err := loss.Item(); err != nil || v != 5 {
		t.Errorf("loss.Item() after the step = %g, %v: want 5", v, err)
	}
}

// A scale that backs off step after step stops at 0x1p-126, where the
// next finite step unscales the gradients exactly; it used to reach a
// subnormal whose reciprocal is +Inf, so the weights became -Inf.
func TestGradScalerScaleFloor(t *testing.T) {
	dev := openDev(t)
	inf := float32(math.Inf(1))
	w := dev.Param([]float32{1, 1}, 2)
	opt := NewSGD([]*core.Tensor{w}, 0.5, 0)
	s := NewGradScaler(65536)
	step := func(c []float32) bool {
		opt.ZeroGrad()
		if err := s.Backward(linearLoss(w, c)); err != nil {
			t.Fatal(err)
		}
		_, skipped, err := s.Step(opt, 0)
		if err != nil {
			t.Fatal(err)
		}
		return skipped
	}
	for range 145 { // 2^16 * 2^-145 is a subnormal
		if !step([]float32{inf, 1}) {
			t.Fatal("an Inf gradient was not skipped")
		}
	}
	if s.Scale != 0x1p-126 || s.Skipped != 145 {
		t.Errorf("after 145 overflows: scale %g, skipped %d: want %g, 145", s.Scale, s.Skipped, float32(0x1p-126))
	}
	if step([]float32{1, -2}) {
		t.Fatal("a finite step was skipped")
	}
	got, err := w.Data()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0.5 || got[1] != 2 {
		t.Errorf("w after a finite step at the floor = %v, want [0.5 2]", got)
	}

	checkPanics(t, []panicCase{
		{"subnormal", "nn.NewGradScaler: scale 1e-40", func() { NewGradScaler(1e-40) }},
		{"zero", "nn.NewGradScaler: scale 0", func() { NewGradScaler(0) }},
	})
	s.Scale = 1e-40
	if err := s.Backward(linearLoss(w, []float32{1, 1})); err == nil {
		t.Error("Backward with a subnormal scale: no error")
	}
	if _, _, err := s.Step(opt, 0); err == nil {
		t.Error("Step with a subnormal scale: no error")
	}
}

// Finite gradients whose norm passes sqrt(MaxFloat32) ~ 1.8e19, where the
// float32 sum of squares overflows: the norm is read exactly, the step is
// not skipped (GradScaler) nor refused (ClipGradNorm).
func TestGradNormPastFloat32Squares(t *testing.T) {
	dev := openDev(t)
	c := []float32{3e19, -4e19} // norm 5e19
	for _, scaler := range []bool{false, true} {
		w := dev.Param([]float32{1, 1}, 2)
		opt := NewSGD([]*core.Tensor{w}, 1, 0)
		var norm float32
		var err error
		if scaler {
			s := NewGradScaler(1)
			if err := s.Backward(linearLoss(w, c)); err != nil {
				t.Fatal(err)
			}
			var skipped bool
			norm, skipped, err = s.Step(opt, 10)
			if skipped {
				t.Errorf("scaler: a finite step was skipped")
			}
		} else {
			if err := linearLoss(w, c).Backward(); err != nil {
				t.Fatal(err)
			}
			norm, err = ClipGradNorm(opt, 10)
		}
		if err != nil {
			t.Fatalf("scaler %t: %v", scaler, err)
		}
		if math.Abs(float64(norm)/5e19-1) > 1e-6 {
			t.Errorf("scaler %t: norm %g, want 5e19", scaler, norm)
		}
		got, err := w.Data()
		if err != nil {
			t.Fatal(err)
		}
		// clipped to norm 10: w - 10*c/|c|
		if want := []float64{1 - 6, 1 + 8}; math.Abs(float64(got[0])-want[0]) > 1e-5 || math.Abs(float64(got[1])-want[1]) > 1e-5 {
			t.Errorf("scaler %t: w = %v, want %v", scaler, got, want)
		}
	}
	// An Inf gradient is still an Inf norm.
	w := dev.Param([]float32{1, 1}, 2)
	if err := linearLoss(w, []float32{float32(math.Inf(1)), 1}).Backward(); err != nil {
		t.Fatal(err)
	}
	if _, err := ClipGradNorm(NewSGD([]*core.Tensor{w}, 1, 0), 1); !errors.Is(err, ErrNonFiniteNorm) {
		t.Errorf("Inf gradient: err = %v, want ErrNonFiniteNorm", err)
	}
}
