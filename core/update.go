package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// AdamWUpdate records a fused AdamW update of the parameter w from the
// gradient g, in place on the device: w, the first moment m and the second
// moment v (persistent tensors of w's shape, e.g. from Device.Zeros) are
// updated where they live, at this point of the graph: ops recorded before it
// read the old w, ops recorded after it the new one. hp holds the 7 values
// [lr, beta1, beta2, eps, weight decay, 1/(1-beta1^t), 1/(1-beta2^t)],
// optionally followed by an 8th, a scale the gradient is multiplied by
// first (gradient clipping, in the same pass); being a tensor, it is a
// program input, so changing the learning rate does not recompile
// anything. nn.Adam builds on it.
func AdamWUpdate(w, g, m, v, hp *Tensor) {
	checkUpdate("AdamWUpdate", w, g, hp, 7, m, v)
	w.dev.recordUpdate("AdamWUpdate", backend.OpAdamW, w, g, m, v, hp)
}

// SGDUpdate records an in-place SGD update with momentum of w from g; vel is
// the persistent velocity and hp = [lr, momentum, weight decay]:
// vel = momentum*vel + g + wd*w; w -= lr*vel.
func SGDUpdate(w, g, vel, hp *Tensor) {
	checkUpdate("SGDUpdate", w, g, hp, 3, vel)
	w.dev.recordUpdate("SGDUpdate", backend.OpSGD, w, g, vel, hp)
}

func checkUpdate(fn string, w, g, hp *Tensor, nhp int, state ...*Tensor) {
	var buf [5]*Tensor // on the stack for Adam's and SGD's states
	needTensors(fn, append(append(buf[:0], w, g, hp), state...)...)
	w.dev.lock()
	defer w.dev.mu.Unlock()
	for i := -1; i < len(state); i++ {
		t := w
		if i >= 0 {
			t = state[i]
		}
		if t.op != backend.OpInvalid || t.state() != stateRealized || t.dev != w.dev {
			panic(fmt.Sprintf("core.%s: operand %d (%v) must be a realized persistent tensor (Param or Zeros) of the parameter's device", fn, i+1, t))
		}
		if !slices.Equal(t.shape, w.shape) {
			panic(fmt.Sprintf("core.%s: state of shape %v for a parameter of shape %v", fn, t.shape, w.shape))
		}
	}
	if !slices.Equal(g.shape, w.shape) {
		panic(fmt.Sprintf("core.%s: gradient of shape %v for a parameter of shape %v", fn, g.shape, w.shape))
	}
	// AdamW's 8th value is the gradient's scale (see AdamWUpdate).
	if hp.Len() != nhp && !(fn == "AdamWUpdate" && hp.Len() == 8) {
		panic(fmt.Sprintf("core.%s: %d hyperparameters, want %d", fn, hp.Len(), nhp))
	}
}

func (d *Device) recordUpdate(fn string, op backend.Op, ins ...*Tensor) {
	defer d.enterMode(profile.PassUpdate, true, false)()
	d.record(fn, op, ins[0].shape, attrs{}, ins...) // shapes never change: shared
}
