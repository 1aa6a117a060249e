package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestCustomDevice runs core.Custom on the device under test
// (AG_TEST_DEVICE): a straight-through rounding and a clipped gradient,
// values and gradients against host truth, lazily and under Checkpoint.
func TestCustomDevice(t *testing.T) {
	dev := openDev(t)
	const n = 301 // past a workgroup
	xs, cs := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i] = float32(i-150) / 7
		cs[i] = float32((i*37)%23-11) / 4
	}
	ste := func(x *core.Tensor) *core.Tensor {
		return core.Custom("steRound",
			// x+1536 lies in [1024, 2048), where f16 values are whole numbers
			func(in []*core.Tensor) *core.Tensor {
				return core.AddScalar(core.RoundF16(core.AddScalar(in[0], 1536)), -1536)
			},
			func(_ []*core.Tensor, _, g *core.Tensor) []*core.Tensor { return []*core.Tensor{g} },
			x)
	}
	clip := func(x *core.Tensor) *core.Tensor {
		return core.Custom("clipGrad",
			func(in []*core.Tensor) *core.Tensor { return in[0] },
			func(_ []*core.Tensor, _, g *core.Tensor) []*core.Tensor { return []*core.Tensor{core.Clamp(g, -1, 1)} },
			x)
	}
	f := func(x *core.Tensor) *core.Tensor { return core.Add(ste(x), clip(x)) }
	for _, ckpt := range []bool{false, true} {
		x := dev.Param(xs, n)
		var y *core.Tensor
		if ckpt {
			y = core.Checkpoint(f, x)
		} else {
			y = f(x)
		}
		y.Keep()
		if err := core.Sum(core.Mul(y, dev.Tensor(cs, n))).Backward(); err != nil {
			t.Fatal(err)
		}
		yv, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		gv, err := x.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			wy := float32(math.RoundToEven(float64(xs[i]))) + xs[i]
			wg := cs[i] + max(-1, min(1, cs[i]))
			if yv[i] != wy || gv[i] != wg {
				t.Fatalf("checkpoint %v: at %d (x %g): value %g grad %g, want %g and %g", ckpt, i, xs[i], yv[i], gv[i], wy, wg)
			}
		}
	}
}
