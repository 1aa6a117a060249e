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

// Every 16-bit pattern decodes to the reference's value and (but NaN's
// payload) encodes back to itself, in both formats; random f32 bit
// patterns pack to the reference's words.
func TestPackHalves(t *testing.T) {
	for _, bf := range []bool{false, true} {
		pack, unpack := OpPackF16, OpUnpackF16
		dec, enc := F16Value, F16Bits
		if bf {
			pack, unpack, dec, enc = OpPackBF16, OpUnpackBF16, BF16Value, BF16Bits
		}
		words := make([]float32, 1<<15)
		for i := range words {
			words[i] = math.Float32frombits(uint32(2*i) | uint32(2*i+1)<<16)
		}
		g := &Graph{Nodes: []Node{{Op: OpArg, Shape: []int{len(words)}}, {Op: unpack, In: []int{0}, Shape: []int{2 * len(words)}}}, Outputs: []Output{{Node: 1, Arg: 1}}, NumArgs: 2}
		in := make([]float64, len(words))
		for i, w := range words {
			in[i] = reference.Widen(w)
		}
		ref, err := reference.Eval(g, [][]float64{in, make([]float64, 2*len(words))})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 2*len(words))
		UnpackHalves(got, words, bf)
		for h := range 1 << 16 {
			v, want := got[h], ref[1][h]
			if math.IsNaN(want) != math.IsNaN(float64(v)) || !math.IsNaN(want) && (float64(v) != want || math.Signbit(float64(v)) != math.Signbit(want)) {
				t.Fatalf("%v of %04x = %g, reference %g", unpack, h, v, want)
			}
			if v != dec(uint16(h)) && !math.IsNaN(float64(v)) {
				t.Fatalf("%v of %04x = %g, single decode %g", unpack, h, v, dec(uint16(h)))
			}
			back := enc(v)
			if math.IsNaN(float64(v)) {
				if back&0x7fff != map[bool]uint16{false: 0x7e00, true: 0x7fc0}[bf] || back&0x8000 != uint16(h)&0x8000 {
					t.Fatalf("%v of NaN %04x gives %04x, want the quiet NaN of its sign", pack, h, back)
				}
			} else if back != uint16(h) {
				t.Fatalf("%04x decodes to %g and encodes to %04x", h, v, back)
			}
		}
		r := rand.New(rand.NewPCG(3, 4))
		xs := make([]float32, 100001)
		for i := range xs {
			xs[i] = math.Float32frombits(r.Uint32())
		}
		xs[0], xs[1], xs[2] = 65520, 65519.99, 6e-8
		pg := &Graph{Nodes: []Node{{Op: OpArg, Shape: []int{len(xs)}}, {Op: pack, In: []int{0}, Shape: []int{PackedLen(len(xs))}}}, Outputs: []Output{{Node: 1, Arg: 1}}, NumArgs: 2}
		xin := make([]float64, len(xs))
		for i, x := range xs {
			xin[i] = float64(x)
		}
		pref, err := reference.Eval(pg, [][]float64{xin, make([]float64, PackedLen(len(xs)))})
		if err != nil {
			t.Fatal(err)
		}
		pw := make([]float32, PackedLen(len(xs)))
		PackHalves(pw, xs, bf)
		for i, w := range pw {
			if a, b := math.Float32bits(w), math.Float32bits(reference.Narrow(pref[1][i])); a != b {
				t.Fatalf("%v word %d of %g, %g: %08x, reference %08x", pack, i, xs[2*i], xs[min(2*i+1, len(xs)-1)], a, b)
			}
		}
	}
}
