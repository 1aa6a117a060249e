package core

import (
	"math"
	"strings"
	"testing"
)

func init() {
	gradCases = append(gradCases,
		gradCase{name: "expm1", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Expm1(Scale(p[0], 3)) }})
}

// Expm1 keeps its relative precision near 0 (|x| < 0.35: 1e-6), where
// Exp(x) - 1 does not, on every device but ggml (exp(x) - 1 there:
// absolute precision); farther out it is as precise as the device's exp.
func TestExpm1(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	xs := []float64{-30, -5, -1, -0.3499, -0.35, 0.35, -1e-3, -1e-5, 1e-7, 1e-5, 3e-4, 0.1, 0.5, 2, 7, 88, 89, 0, nan, inf, -inf}
	eachDevice(t, func(t *testing.T, dev *Device) {
		abs := 0.0
		if strings.Contains(t.Name(), "ggml") {
			abs = 2e-7
		}
		got, err := Expm1(dev.Tensor(f32s(xs), len(xs))).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range xs {
			w := float64(float32(math.Expm1(float64(float32(x)))))
			g := float64(got[i])
			rel := 1e-6
			if math.Abs(x) >= 0.35 {
				rel = 1e-5 // the device's exp (lavapipe's exp(88) is 1.7e-6 off)
			}
			if !(math.IsNaN(w) && math.IsNaN(g) || w == g || math.Abs(g-w) <= abs+rel*math.Abs(w)) {
				t.Errorf("Expm1(%g) = %g, want %g", x, g, w)
			}
		}
	})
}
