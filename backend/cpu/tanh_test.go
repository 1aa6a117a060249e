package cpu

import (
	"math"
	"testing"
)

// The fast tanh against math.Tanh on a dense grid over [-20, 20], the
// special values and the edges of its three regions.
func TestTanh(t *testing.T) {
	worst, at := 0.0, float32(0)
	check := func(x float32) {
		got, want := float64(tanh(x)), math.Tanh(float64(x))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("tanh(%g) = %g, want NaN", x, got)
			}
			return
		}
		if e := math.Abs(got - want); e > worst {
			worst, at = e, x
		}
		if math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("tanh(%g) = %g: the sign differs from %g", x, got, want)
		}
	}
	for i := -2000000; i <= 2000000; i++ {
		check(float32(i) / 100000)
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), 0.0004, -0.0004, 0.00039999, 7.905311, 7.905312, -7.905312, 1e-30, 3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		check(x)
	}
	if worst > 6e-8 {
		t.Errorf("largest error %g at %g, want <= 6e-8", worst, at)
	}
}

func BenchmarkTanh(b *testing.B) {
	var s float32
	for i := 0; i < b.N; i++ {
		s += tanh(float32(i%2000)/100 - 10)
	}
	_ = s
}
