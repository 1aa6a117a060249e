package backend_test

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
)

// eval1 runs op over xs in the reference interpreter (float64).
func eval1(t *testing.T, op Op, xs []float32) []float64 {
	in := make([]float64, len(xs))
	for i, x := range xs {
		in[i] = float64(x)
	}
	g := &Graph{Nodes: []Node{{Op: OpArg, Shape: []int{len(xs)}}, {Op: op, In: []int{0}, Shape: []int{len(xs)}}}, Outputs: []Output{{Node: 1, Arg: 1}}, NumArgs: 2}
	out, err := reference.Eval(g, [][]float64{in, make([]float64, len(xs))})
	if err != nil {
		t.Fatal(err)
	}
	return out[1]
}

// RoundF16 and RoundBF16 (bit operations, as the kernels) against the
// reference interpreter's float64 definition, on every special value and
// 200000 random bit patterns.
func TestRoundHalf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, -65520, 1e6, 2.9802322e-08, 2.9802326e-08, 5.9604645e-08, 6e-8, 1e-10,
		6.1035156e-05, 6.1035152e-05, 1.0009765625, 1.00048828125, 1.000732421875, 3.4028235e38, -3.4028235e38, 1.0039062, 1.00390625, 1.01171875}
	for range 200000 {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	f16, bf16 := eval1(t, OpRoundF16, xs), eval1(t, OpRoundBF16, xs)
	for i, x := range xs {
		if math.IsNaN(float64(x)) {
			if !math.IsNaN(float64(RoundF16(x))) || !math.IsNaN(float64(RoundBF16(x))) {
				t.Fatalf("NaN %08x did not stay NaN", math.Float32bits(x))
			}
			continue
		}
		if got, want := RoundF16(x), f16[i]; float64(got) != want || math.Signbit(float64(got)) != math.Signbit(float64(x)) {
			t.Fatalf("RoundF16(%g) = %g, want %g", x, got, want)
		}
		if got, want := RoundBF16(x), bf16[i]; float64(got) != want || math.Signbit(float64(got)) != math.Signbit(float64(x)) {
			t.Fatalf("RoundBF16(%g) = %g, want %g", x, got, want)
		}
	}
}
