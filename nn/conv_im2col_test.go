package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// The im2col convolution (convIm2Col) and the gather one compute the same
// values and gradients, on the device under test, to f32 rounding: a
// convnet layer's geometry (3x3, padding 1) and a strided one, the loss a
// weighted sum of the output so every element's gradient differs.
func TestConvIm2ColMatchesGather(t *testing.T) {
	dev := openDev(t)
	defer func() { im2colMode = 0 }()
	for _, c := range []struct {
		name                  string
		n, in, out, h, w, k   int
		stride, pad, dilation int
	}{
		{"convnet", 16, 8, 16, 4, 4, 3, 1, 1, 1},
		{"first", 16, 1, 8, 8, 8, 3, 1, 1, 1},
		{"strided", 3, 4, 6, 9, 7, 3, 2, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			type result struct{ y, gx, gw, gb []float32 }
			run := func(mode int) result {
				im2colMode = mode
				r := NewRNG(7)
				l := NewConv2d(dev, c.in, c.out, [2]int{c.k, c.k}, ConvOptions{Stride: c.stride, Padding: c.pad, Dilation: c.dilation}, r)
				xv := make([]float32, c.n*c.in*c.h*c.w)
				for i := range xv {
					xv[i] = float32(r.Float64()*2 - 1)
				}
				x := dev.Param(xv, c.n, c.in, c.h, c.w)
				y := l.Forward(x)
				wv := make([]float32, y.Len())
				for i := range wv {
					wv[i] = float32(r.Float64()*2 - 1)
				}
				if err := core.Sum(core.Mul(y, dev.Tensor(wv, y.Shape()...))).Backward(); err != nil {
					t.Fatal(err)
				}
				var res result
				for _, p := range []struct {
					dst *[]float32
					t   *core.Tensor
				}{{&res.y, y}, {&res.gx, x.Grad()}, {&res.gw, l.W.Grad()}, {&res.gb, l.B.Grad()}} {
					v, err := p.t.Data()
					if err != nil {
						t.Fatal(err)
					}
					*p.dst = v
				}
				return res
			}
			a, b := run(-1), run(1)
			for _, p := range []struct {
				name string
				a, b []float32
			}{{"y", a.y, b.y}, {"dx", a.gx, b.gx}, {"dW", a.gw, b.gw}, {"dB", a.gb, b.gb}} {
				scale, worst := 0.0, 0.0
				for i := range p.a {
					scale = max(scale, math.Abs(float64(p.a[i])))
				}
				for i := range p.a {
					worst = max(worst, math.Abs(float64(p.a[i]-p.b[i])))
				}
				t.Logf("%s: max |gather - im2col| %.3g, max |gather| %.3g (ratio %.2g)", p.name, worst, scale, worst/scale)
				// sums of up to a few thousand products in either order
				if !(worst <= 1e-5*scale) {
					t.Errorf("%s: the paths differ by %g (max |value| %g)", p.name, worst, scale)
				}
			}
		})
	}
}
