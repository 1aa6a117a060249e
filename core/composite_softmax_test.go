package core

import (
	"math"
	"strings"
	"testing"
)

// MaskedSoftmax is softmax(x*scale + mask) with the mask broadcast, a row
// masked everywhere with -1e30 uniform and one masked with -Inf NaN; its
// gradients for x and for a broadcast mask agree with finite differences.
func TestMaskedSoftmax(t *testing.T) {
	const scale = 0.5
	x := []float32{1, 2, 3, -1, 0.5, 4, 2, -2, 0, 7, 1, 1}                                         // [2, 2, 3]
	m := []float32{0, -1e30, 0, -1e30, -1e30, -1e30}                                               // [2, 3]: rows shared by x's two
	inf := []float32{0, 0, 0, float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))} // row 1 all -Inf
	want := func(mask []float32) []float64 {
		out := make([]float64, len(x))
		for r := 0; r < 4; r++ {
			z := make([]float64, 3)
			mx := math.Inf(-1)
			for j := range z {
				z[j] = float64(x[r*3+j])*scale + float64(mask[(r%2)*3+j])
				mx = max(mx, z[j])
			}
			sum := 0.0
			for _, v := range z {
				sum += math.Exp(v - mx)
			}
			for j, v := range z {
				out[r*3+j] = math.Exp(v-mx) / sum
			}
		}
		return out
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, mask := range [][]float32{m, inf} {
			got, err := MaskedSoftmax(dev.Tensor(x, 2, 2, 3), dev.Tensor(mask, 2, 3), scale).Data()
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want(mask) {
				if !same(got[i], w, 1e-6) {
					t.Errorf("mask %v: element %d = %g, want %g", mask, i, got[i], w)
				}
			}
		}
		xp := dev.Param([]float32{0.3, -1.2, 0.8, 2, -0.1, 0.5, 1.5, -0.7, 0.2, 0.9, -2, 0.4}, 2, 2, 3)
		mp := dev.Param([]float32{0.2, -0.5, 1}, 1, 3)
		wt := dev.Tensor([]float32{1, -2, 0.5, 3, 0.25, -1, 2, 1, -0.5, 0.75, -3, 1.5}, 2, 2, 3)
		f := func() *Tensor { return Sum(Mul(MaskedSoftmax(xp, mp, 0.7), wt)) }
		if err := Gradcheck(f, []*Tensor{xp, mp}, nil); err != nil {
			t.Error(err)
		}
	})
}

func TestMaskedSoftmaxPanics(t *testing.T) {
	dev := open(t)
	x := dev.Full(0, 2, 3)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"mask shape", "does not broadcast", func() { MaskedSoftmax(x, dev.Full(0, 2, 2), 1) }},
		{"mask rank", "does not broadcast", func() { MaskedSoftmax(x, dev.Full(0, 1, 2, 3), 1) }},
		{"scale", "not finite", func() { MaskedSoftmax(x, dev.Full(0, 3), float32(math.NaN())) }},
		{"scalar", "dimensions", func() { MaskedSoftmax(dev.Full(0), dev.Full(0), 1) }},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}
