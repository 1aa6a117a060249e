package core

import (
	"math"
	"testing"

	"github.com/ag-go/ag/backend"
)

// MaxPool2d's value and gradient are MaxAxis's over the gathered windows,
// exactly, on every backend (its native lowering where the device has
// one): values drawn from a few levels so windows tie, a NaN, and a
// channel of -Inf, with overlapping padded windows and disjoint ones.
func TestMaxPool2dMatchesMaxAxis(t *testing.T) {
	const nb, c, h, w = 2, 3, 6, 5
	xs := make([]float32, nb*c*h*w)
	for i := range xs {
		xs[i] = float32((i*7)%5) - 2 // ties in every window
	}
	xs[7] = float32(math.NaN())
	for i := range h * w {
		xs[(1*c+2)*h*w+i] = float32(math.Inf(-1)) // image 1, channel 2
	}
	gs := make([]float32, 0, 64)
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, win := range []backend.Window{
			{KH: 3, KW: 3, SH: 1, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1},
			{KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1},
			{KH: 1, KW: 3, SH: 1, SW: 2, PW: 1, DH: 1, DW: 1},
		} {
			oh, ow := win.Out(h, w)
			gs = gs[:0]
			for i := range nb * c * oh * ow {
				gs = append(gs, float32(i%11)-5)
			}
			rows := dev.Constant(win.Rows(nb, h, w), nb*oh*ow*win.KH*win.KW)
			run := func(composite bool) (y, dx []float32) {
				x := dev.Param(xs, nb, c, h, w)
				var out *Tensor
				if composite {
					out = MaxPool2d(x, rows, win)
				} else {
					wins := Reshape(Gather(padRowsOf(x, win), rows), nb*oh*ow, win.KH*win.KW, c)
					out = Permute(Reshape(MaxAxis(wins, 1, false), nb, oh, ow, c), 0, 3, 1, 2)
				}
				if err := Sum(Mul(out, dev.Tensor(gs, nb, c, oh, ow))).Backward(); err != nil {
					t.Fatal(err)
				}
				y, err := out.Data()
				if err != nil {
					t.Fatal(err)
				}
				if dx, err = x.Grad().Data(); err != nil {
					t.Fatal(err)
				}
				return y, dx
			}
			y, dx := run(true)
			wy, wdx := run(false)
			for i := range wy {
				if !same(y[i], float64(wy[i]), 0) {
					t.Errorf("window %+v: y[%d] = %g, MaxAxis gives %g", win, i, y[i], wy[i])
				}
			}
			for i := range wdx {
				if !same(dx[i], float64(wdx[i]), 0) {
					t.Errorf("window %+v: dx[%d] = %g, MaxAxis's gradient gives %g", win, i, dx[i], wdx[i])
				}
			}
		}
	})
}
