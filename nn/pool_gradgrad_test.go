package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// A gradient penalty through a max pool on the device under test: with
// loss = sum(y^2)/2, y = maxpool(x) over windows that do not overlap and
// hold no ties, g = dloss/dx routes y to each window's maximum, so
// penalty = sum(g^2)/2 equals the loss and its gradient equals g. Where
// the device runs the pool's gradient as one op (max_pool2d_back on ggml
// and webgpu), Grad with CreateGraph differentiates its decomposition.
func TestMaxPoolGradientPenalty(t *testing.T) {
	dev := openDev(t)
	const n, c, h, w = 2, 3, 6, 4
	v := make([]float32, n*c*h*w)
	for i := range v {
		v[i] = float32((i*37)%len(v))/10 - 7.05 // distinct (no ties), none 0
	}
	x := dev.Param(v, n, c, h, w)
	y := NewMaxPool2d(2, 0, 0).Forward(x)
	loss := core.Scale(core.Sum(core.Mul(y, y)), 0.5)
	gs, err := core.Grad(loss, []*core.Tensor{x}, &core.GradOptions{CreateGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	penalty := core.Scale(core.Sum(core.Mul(gs[0], gs[0])), 0.5)
	gg, err := core.Grad(penalty, []*core.Tensor{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gs[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	got, err := gg[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	routed := 0
	for i := range g {
		if g[i] != 0 {
			routed++
		}
		if math.Abs(float64(got[i]-g[i])) > 1e-5*(1+math.Abs(float64(g[i]))) {
			t.Fatalf("d(penalty)/dx[%d] = %g, want the gradient %g", i, got[i], g[i])
		}
	}
	if want := n * c * (h / 2) * (w / 2); routed != want {
		t.Errorf("the gradient reached %d elements, want one per window (%d)", routed, want)
	}
}
