package core

import (
	"math"
	"slices"
	"testing"
)

func init() {
	gradCases = append(gradCases,
		gradCase{name: "maximum", shapes: [][]int{{4, 5}, {4, 5}}, f: func(p []*Tensor) *Tensor { return Maximum(p[0], p[1]) }},
		gradCase{name: "maximum-broadcast", shapes: [][]int{{4, 5}, {5}}, f: func(p []*Tensor) *Tensor { return Maximum(p[0], p[1]) }},
		gradCase{name: "minimum-broadcast", shapes: [][]int{{3, 1}, {3, 4}}, f: func(p []*Tensor) *Tensor { return Minimum(p[0], p[1]) }},
	)
}

// TestMaximumMinimum: values, NaN, infinities, ties and the tie gradient
// (half to each input, as PyTorch's) on every backend.
func TestMaximumMinimum(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	a := []float32{1, -2, nan, 3, inf, -inf, 2, 5}
	b := []float32{0.5, 4, 1, nan, 7, -inf, 2, -inf}
	wantMax := []float32{1, 4, nan, nan, inf, -inf, 2, 5}
	wantMin := []float32{0.5, -2, nan, nan, 7, -inf, 2, -inf}
	same := func(x, y float32) bool { return x == y || (x != x && y != y) }
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, c := range []struct {
			name string
			f    func(a, b *Tensor) *Tensor
			want []float32
		}{{"Maximum", Maximum, wantMax}, {"Minimum", Minimum, wantMin}} {
			got, err := c.f(dev.Tensor(a, len(a)), dev.Tensor(b, len(b))).Data()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for i := range got {
				if !same(got[i], c.want[i]) {
					t.Errorf("%s(%g, %g) = %g, want %g", c.name, a[i], b[i], got[i], c.want[i])
				}
			}
		}
		x := dev.Param([]float32{3, 1, 2}, 3)
		y := dev.Param([]float32{1, 3, 2}, 3)
		if err := Sum(Maximum(x, y)).Backward(); err != nil {
			t.Fatal(err)
		}
		gx, err := x.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		gy, _ := y.Grad().Data()
		if !slices.Equal(gx, []float32{1, 0, 0.5}) || !slices.Equal(gy, []float32{0, 1, 0.5}) {
			t.Errorf("gradients of sum(max(x, y)): %v and %v, want [1 0 0.5] and [0 1 0.5]", gx, gy)
		}
	})
}
