package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/core"
)

// core.Device.GraphOf on the device under test: an MLP step's graph has a
// kernel for every computed node on a backend that fuses nothing, and
// fewer on webgpu, whose fused kernels run chains of them (the dump
// shows which).
func TestGraphOfDevice(t *testing.T) {
	dev := openDev(t)
	rng := rand.New(rand.NewPCG(1, 2))
	m := Sequential{NewLinear(dev, 16, 32, true, rng), Func(core.ReLU), NewLinear(dev, 32, 4, true, rng)}
	x := dev.Tensor(make([]float32, 8*16), 8, 16)
	y := dev.Tensor(make([]float32, 8*4), 8, 4)
	g, err := dev.GraphOf(func() error { return MSELoss(m.Forward(x), y).Backward() })
	if err != nil {
		t.Fatal(err)
	}
	computed := 0
	for _, n := range g.Nodes {
		if n.Kernel >= 0 {
			computed++
		}
		if n.Store == "fused" && n.Kernel < 0 {
			t.Errorf("node %s %v is fused but in no kernel", n.Op, n.Shape)
		}
	}
	t.Logf("%s: %d nodes, %d computed, %d kernels, peak %d bytes", g.Device, len(g.Nodes), computed, g.Kernels, g.PeakBytes)
	switch {
	case g.Kernels == 0 || g.Kernels > computed:
		t.Errorf("%d kernels for %d computed nodes", g.Kernels, computed)
	case g.Device == "webgpu" && g.Kernels == computed:
		t.Errorf("webgpu: %d kernels for %d computed nodes: its fusion does not show", g.Kernels, computed)
	case g.Device != "webgpu" && g.Kernels != computed:
		t.Errorf("%s fuses nothing, yet %d kernels for %d computed nodes", g.Device, g.Kernels, computed)
	}
	if _, err := core.Sum(x).Item(); err != nil {
		t.Errorf("the device after GraphOf: %v", err)
	}
}

// core.Device.SetMemoryBudget on the device under test: a run past the
// budget is refused before it runs, the values from before stay, and
// without the budget the same run goes through.
func TestMemoryBudgetDevice(t *testing.T) {
	dev := openDev(t)
	x := dev.Tensor(make([]float32, 4096), 4096)
	if _, err := core.Sum(x).Item(); err != nil {
		t.Fatal(err)
	}
	dev.SetMemoryBudget(dev.MemoryHeld() + 4096)
	// a 4 MiB result (kept: no backend can fuse it away)
	big := func() *core.Tensor { return core.Scale(core.Expand(core.Reshape(x, 1, 4096), 256, 4096), 2) }
	if _, err := big().Data(); err == nil {
		t.Error("a run keeping 4 MiB ran within a budget of 4 KiB more than held")
	}
	if v, err := core.Sum(x).Item(); err != nil || v != 0 {
		t.Errorf("the value from before: %v, %v", v, err)
	}
	dev.SetMemoryBudget(0)
	if v, err := big().Data(); err != nil || len(v) != 256*4096 {
		t.Errorf("without the budget: %d values, %v", len(v), err)
	}
}
