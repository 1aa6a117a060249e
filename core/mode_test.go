package core

import "testing"

// A goroutine's mode ends for its next op even while another goroutine
// is in a mode, in the stack the first one left (modeOf remembers the
// last stack it found, which must forget it when the mode ends).
func TestModeEndsWhileAnotherGoroutineIsInOne(t *testing.T) {
	dev := open(t)
	w := dev.Param([]float32{1}, 1)
	var inside *Tensor
	dev.NoGrad(func() { inside = Mul(w, w) })
	entered, leave, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		dev.NoGrad(func() { // takes the stack this goroutine left
			close(entered)
			<-leave
		})
	}()
	<-entered
	after := Mul(w, w)
	close(leave)
	<-done
	if inside.RequiresGrad() || !after.RequiresGrad() {
		t.Errorf("requires grad: inside NoGrad %t, after it %t (another goroutine in NoGrad): want false, true", inside.RequiresGrad(), after.RequiresGrad())
	}
}
