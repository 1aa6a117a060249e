package core

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReducePrecision runs the cases end to end through core: a
// sum of 2^25 copies of 0.1 (a float32 running sum was 5.7% off), the mean
// squared difference of 2^24 pairs (MSELoss; 3e-3 off), and column sums
// over 2^20 rows (a bias gradient). Each is compared with the float64
// computation on the same float32 inputs; the stated bound is a relative
// error of 1e-6.
func TestReducePrecision(t *testing.T) {
	const bound = 1e-6
	dev := open(t)
	r := rand.New(rand.NewPCG(12, 1))
	uniform := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = 2*r.Float32() - 1
		}
		return x
	}
	check := func(name string, y *Tensor, want []float64) {
		t.Helper()
		got, err := y.Data()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
		}
		for i := range want {
			if rel := math.Abs(float64(got[i])-want[i]) / math.Abs(want[i]); !(rel <= bound) {
				t.Errorf("%s [%d]: got %v, want %v (relative error %.2g > %g)", name, i, got[i], want[i], rel, bound)
			}
		}
	}

	const n = 1 << 25
	check("Sum(Full(0.1, 1<<25))", Sum(dev.Full(0.1, n)), []float64{float64(float32(0.1)) * n})

	const m = 1 << 24
	p, q := uniform(m), uniform(m)
	var mse float64
	for i := range p {
		d := float64(p[i]) - float64(q[i])
		mse += d * d
	}
	d := Sub(dev.Tensor(p, m), dev.Tensor(q, m))
	check("Mean((p-q)^2) over 2^24", Mean(Mul(d, d)), []float64{mse / m})

	const rows, cols = 1 << 20, 3
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = r.Float32()
	}
	colSum := make([]float64, cols)
	for i, v := range x {
		colSum[i%cols] += float64(v)
	}
	check("SumAxis(x [2^20, 3], 0)", SumAxis(dev.Tensor(x, rows, cols), 0, false), colSum)
	check("Sum(Full(0.1, 2^20, 3), axis 0)", SumAxis(dev.Full(0.1, rows, cols), 0, false),
		[]float64{float64(float32(0.1)) * rows, float64(float32(0.1)) * rows, float64(float32(0.1)) * rows})
}
