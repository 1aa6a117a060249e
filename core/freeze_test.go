package core

import (
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/profile"
)

// backwardNodes counts the pending nodes a Backward recorded.
func backwardNodes(d *Device) int {
	d.lock()
	defer d.mu.Unlock()
	n := 0
	for _, t := range d.pending {
		if t.pass == profile.PassBackward {
			n++
		}
	}
	return n
}

// freezeNet is a two-layer net: loss = sum(tanh(tanh(x·w1)·w2)).
func freezeNet(x, w1, w2 *Tensor) *Tensor {
	return Sum(Tanh(MatMul(Tanh(MatMul(x, w1)), w2)))
}

// A frozen parameter gets no gradient and costs the backward nothing: the
// backward of a net whose first layer is frozen records exactly the nodes
// of the same net with that layer as data (none for w1's gradient, none
// for the gradient of its layer's output), whether the layer was frozen
// before the forward was recorded or after; the other gradient is the
// same; thawed, the layer has its gradient again.
func TestFreezeBackward(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		xv := []float32{0.5, -1, 0.25, 2, 0.75, -0.5}
		w1v := []float32{0.3, -0.2, 0.1, 0.4, -0.5, 0.6, 0.2, 0.1, -0.3, 0.5, 0.7, -0.1}
		w2v := []float32{0.2, -0.4, 0.6, 0.1, -0.3, 0.5, 0.3, -0.2}
		x := dev.Tensor(xv, 2, 3)
		w1, w2 := dev.Param(w1v, 3, 4), dev.Param(w2v, 4, 2)
		grad := func(p *Tensor) []float32 {
			t.Helper()
			g := p.Grad()
			if g == nil {
				t.Fatalf("%v has no gradient", p)
			}
			v, err := g.Data()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		step := func(freezeAfterForward bool) (nodes int, g2 []float32) {
			t.Helper()
			w1.ZeroGrad()
			w2.ZeroGrad()
			loss := freezeNet(x, w1, w2)
			if freezeAfterForward {
				w1.SetRequiresGrad(false)
			}
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			nodes = backwardNodes(dev)
			return nodes, grad(w2)
		}

		all, gAll := step(false)
		g1 := grad(w1)
		w1.SetRequiresGrad(false)
		if w1.RequiresGrad() || w1.Grad() != nil {
			t.Fatalf("frozen w1: RequiresGrad %t, Grad %v; want false, nil (freezing drops the gradient)", w1.RequiresGrad(), w1.Grad())
		}
		frozen, gFrozen := step(false)
		if w1.Grad() != nil {
			t.Errorf("frozen w1 got a gradient from Backward")
		}
		// The same net with w1 as data: the backward a frozen layer should cost.
		w2.ZeroGrad()
		if err := freezeNet(x, dev.Tensor(w1v, 3, 4), w2).Backward(); err != nil {
			t.Fatal(err)
		}
		asData := backwardNodes(dev)
		gData := grad(w2)
		w1.SetRequiresGrad(true)
		after, gAfter := step(true) // frozen between the forward and Backward
		if w1.Grad() != nil {
			t.Errorf("w1 frozen after the forward got a gradient from Backward")
		}
		t.Logf("backward nodes: trainable %d, frozen %d, as data %d, frozen after the forward %d", all, frozen, asData, after)
		if frozen != asData || after != asData || frozen >= all {
			t.Errorf("backward nodes: trainable %d, frozen %d, frozen after the forward %d, with w1 as data %d: want the frozen ones equal to data's and fewer than trainable", all, frozen, after, asData)
		}
		for name, g := range map[string][]float32{"frozen": gFrozen, "as data": gData, "frozen after the forward": gAfter} {
			if !near(g, gAll, 1e-6) {
				t.Errorf("w2's gradient %s %v, trainable %v: want the same", name, g, gAll)
			}
		}
		w1.SetRequiresGrad(true)
		if _, g := step(false); !near(g, gAll, 1e-6) || !near(grad(w1), g1, 1e-6) {
			t.Errorf("thawed: w1's gradient %v, w2's %v; want %v, %v", grad(w1), g, g1, gAll)
		}
		// Every parameter frozen: Backward says so instead of doing nothing.
		w1.SetRequiresGrad(false)
		loss := freezeNet(x, w1, w2)
		w2.SetRequiresGrad(false)
		if err := loss.Backward(); err == nil || !strings.Contains(err.Error(), "frozen") {
			t.Errorf("Backward with every parameter frozen after the forward: %v, want an error saying they are frozen", err)
		}
		if err := freezeNet(x, w1, w2).Backward(); err == nil {
			t.Errorf("Backward of a loss of frozen parameters only: no error")
		}
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
	})
}

// Detach is the value without the gradient: d(w*detach(w))/dw = w, not 2w;
// its value is w's; w itself keeps its gradient.
func TestDetach(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		w := dev.Param([]float32{1, -2, 3}, 3)
		d := w.Detach()
		if d.RequiresGrad() || d == w {
			t.Fatalf("Detach: %v requires grad %t; want a new tensor without", d, d.RequiresGrad())
		}
		loss := Sum(Mul(w, d))
		d.Keep()
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := w.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.Data()
		if err != nil {
			t.Fatal(err)
		}
		if want := []float32{1, -2, 3}; !slices.Equal(g, want) || !slices.Equal(v, want) {
			t.Errorf("d/dw sum(w*detach(w)) = %v, detach(w) = %v; want %v (not 2w) and w", g, v, want)
		}
		// Only what depends on nothing but detached values: no gradient at all.
		if err := Sum(Mul(w.Detach(), w.Detach())).Backward(); err == nil {
			t.Errorf("Backward through detached values only: no error")
		}
	})
}

// SetRequiresGrad switches parameters only: data, results and Zeros'
// persistent state panic, naming the tensor and Detach.
func TestSetRequiresGradRefused(t *testing.T) {
	dev := open(t)
	z, err := dev.Zeros(2)
	if err != nil {
		t.Fatal(err)
	}
	w := dev.Param([]float32{1, 2}, 2)
	for name, x := range map[string]*Tensor{"data": dev.Tensor([]float32{1, 2}, 2), "result": Neg(w), "zeros": z} {
		func() {
			defer func() {
				r, _ := recover().(string)
				if !strings.Contains(r, "core.Tensor.SetRequiresGrad") || !strings.Contains(r, "not a parameter") || !strings.Contains(r, "Detach") {
					t.Errorf("%s: SetRequiresGrad(false) panicked with %q, want a message naming it, the tensor and Detach", name, r)
				}
			}()
			x.SetRequiresGrad(false)
		}()
		if x.IsParam() {
			t.Errorf("%s: IsParam true", name)
		}
	}
	if !w.IsParam() || !w.SetRequiresGrad(false).IsParam() {
		t.Errorf("a parameter, frozen or not: IsParam false")
	}
}

// A capture recorded with a parameter trainable does not replay once it is
// frozen (the replay would update it): it records again, and replays each
// recording under its own setting; the frozen parameter stays bit-identical.
func TestCaptureFreeze(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		w1 := dev.Param([]float32{0.3, -0.2, 0.1, 0.4, -0.5, 0.6}, 3, 2)
		w2 := dev.Param([]float32{0.2, -0.4}, 2, 1)
		vel1, _ := dev.Zeros(3, 2)
		vel2, _ := dev.Zeros(2, 1)
		// The gradients are dropped inside the function, so the recording
		// keeps none: only the guard on the switches can tell it is stale.
		c := NewCapture(dev, func(in []*Tensor) []*Tensor {
			loss := Sum(Tanh(MatMul(Tanh(MatMul(in[0], w1)), w2)))
			if err := loss.Backward(); err != nil {
				panic(err)
			}
			hp := dev.Constant([]float32{0.1, 0, 0}, 3)
			for i, p := range []*Tensor{w1, w2} {
				if g := p.Grad(); g != nil {
					SGDUpdate(p, g, []*Tensor{vel1, vel2}[i], hp)
				}
				p.ZeroGrad()
			}
			return []*Tensor{loss}
		})
		x := In([]float32{1, 2, 3, -1, 0.5, 2}, 2, 3)
		read := func(p *Tensor) []float32 {
			v, err := p.Data()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		call := func() {
			t.Helper()
			if _, err := c.Call(x); err != nil {
				t.Fatal(err)
			}
		}
		call()
		call()
		w1.SetRequiresGrad(false)
		before := read(w1)
		call()
		call()
		if got := read(w1); !slices.Equal(got, before) {
			t.Errorf("frozen w1 changed across replays of a capture: %v -> %v", before, got)
		}
		if c.Records() != 2 {
			t.Errorf("%d recordings after freezing, want 2 (the recording made with w1 trainable must not replay)", c.Records())
		}
		w1.SetRequiresGrad(true)
		call()
		if got := read(w1); slices.Equal(got, before) {
			t.Errorf("thawed w1 did not change")
		}
		if c.Records() != 2 {
			t.Errorf("%d recordings after thawing, want 2 (the first replays)", c.Records())
		}
	})
}
