package backendtest

import (
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
)

// packCases check the 16-bit storage ops. Their words are compared bit for
// bit ("words_f16", "words_bf16": but NaNs' payloads): the layout is a contract (an f16 array's bytes, WGSL's
// pack2x16float, ggml's F16 tensors), and a word may be an f32 subnormal or
// signaling NaN that a float comparison would excuse or a float copy change.
// The values unpacked from them are exact.
func packCases() []opCase {
	var cs []opCase
	for _, f := range []struct {
		name         string
		words        string // the words' tolerance
		pack, unpack backend.Op
		lo, hi       float64 // log2 of the magnitudes drawn
	}{
		{"f16", "words_f16", backend.OpPackF16, backend.OpUnpackF16, -26, 17},
		{"bf16", "words_bf16", backend.OpPackBF16, backend.OpUnpackBF16, -133, 128},
	} {
		// magnitudes across the format's range and past it, with the
		// specials and the f16 edges (overflow at 65520, subnormals, ties)
		// at positions that land in both halves of words
		draw := func(r *rand.Rand, n int) []float32 {
			d := make([]float32, n)
			for i := range d {
				d[i] = float32(math.Copysign(math.Exp2(f.lo+(f.hi-f.lo)*r.Float64()), float64(r.IntN(2)*2-1)))
			}
			edges := append(append([]float32(nil), specials...), 65504, 65519.996, 65520, -65520, 5.9604645e-08,
				2.9802322e-08, -2.9802326e-08, 6.1035156e-05, 1.00048828125, 1.001953125, 1.00390625, 1.01171875, 3.4e38, -3.4e38)
			for k, v := range edges {
				d[(k*7)%n] = v
			}
			return d
		}
		cs = append(cs, opCase{"pack/" + f.name + "/words", f.words, func(r *rand.Rand) []instance {
			var is []instance
			for _, n := range []int{1, 2, 37, 1030, 1031, 100003} {
				var b builder
				x := b.arg(draw(r, n), n)
				b.out(b.op(f.pack, []int{backend.PackedLen(n)}, x))
				is = append(is, b.inst(0))
			}
			return is
		}})
		cs = append(cs, opCase{"pack/" + f.name + "/roundtrip", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for rank := 1; rank <= 4; rank++ {
				s := randShape(r, rank, maxElems)
				n := backend.NumElems(s)
				var b builder
				x := b.arg(draw(r, n), s...)
				p := b.op(f.pack, []int{backend.PackedLen(n)}, x)
				b.out(b.op(f.unpack, s, p))
				is = append(is, b.inst(0))
			}
			return is
		}})
		// every 16-bit pattern in both halves of a word: NaNs of every
		// payload (words that are signaling NaNs as f32 among them),
		// infinities, subnormals
		cs = append(cs, opCase{"pack/" + f.name + "/every-pattern", "exact", func(r *rand.Rand) []instance {
			const words = 1 << 15
			w := make([]float32, words)
			for i := range w {
				w[i] = math.Float32frombits(uint32(2*i) | uint32(2*i+1)<<16)
			}
			r.Shuffle(words, func(i, j int) { w[i], w[j] = w[j], w[i] })
			var b builder
			x := b.arg(w, words)
			b.out(b.op(f.unpack, []int{2 * words}, x))
			return []instance{b.inst(0)}
		}})
		// a 16-bit table: records of w values padded to whole words,
		// gathered by get_rows and unpacked by rows; every word class in
		// the table, every row read (in a shuffled order), rows repeated,
		// and indices that clamp
		cs = append(cs, opCase{"pack/" + f.name + "/get_rows", "unpacked", func(r *rand.Rand) []instance {
			var is []instance
			for _, w := range []int{1, 2, 3, 7, 8, 37} {
				W := backend.PackedLen(w)
				rows := (2*len(wordClasses)+W-1)/W + r.IntN(8)
				tab := wordTable(r, rows*W)
				idx := make([]float32, 0, 2*rows+3)
				for _, k := range r.Perm(rows) {
					idx = append(idx, float32(k))
				}
				for range rows / 2 {
					idx = append(idx, float32(r.IntN(rows)))
				}
				idx = append(idx, -1, float32(rows), 1e6)
				n := len(idx)
				var b builder
				t := b.arg(tab, rows, W)
				x := b.arg(idx, n)
				gw := b.op(backend.OpGetRows, []int{n, W}, t, x)
				b.out(b.op(f.unpack, []int{n, w}, gw))
				is = append(is, b.inst(0))
			}
			return is
		}})
		// the rows form without a gather: a whole table read back
		cs = append(cs, opCase{"pack/" + f.name + "/rows", "unpacked", func(r *rand.Rand) []instance {
			var is []instance
			for _, w := range []int{1, 6, 37} {
				W := backend.PackedLen(w)
				rows := (2*len(wordClasses)+W-1)/W + r.IntN(8)
				var b builder
				t := b.arg(wordTable(r, rows*W), rows, W)
				b.out(b.op(f.unpack, []int{rows, w}, t))
				is = append(is, b.inst(0))
			}
			return is
		}})
	}
	return cs
}

// wordClasses are 32-bit words of every class a table of 16-bit values
// holds, which a get_rows must move bit for bit: f32 subnormal words (the
// f16 pair [1, 0] is 0x00003c00, and [-0, 0] is 0x00008000), f32
// signaling NaN words (0x7f803c00 holds a bf16 +Inf in its high half: a
// quieted copy would hold a NaN), f32 quiet NaNs and infinities, f16
// infinities and NaNs (quiet and signaling) in either half, zeros of both
// signs (0x80000000 is f32 -0) and ordinary values.
var wordClasses = []uint32{
	0x00003c00, 0x00000001, 0x007fffff, 0x80003c00, 0x807f0001, 0x00008000,
	0x7f803c00, 0x7fa00001, 0xffbfffff, 0xff800001, 0x7f800001,
	0x7fc00000, 0xffffffff, 0x7f800000, 0xff800000,
	0x7c00fc00, 0x7e007c01, 0xfc017e00, 0x7bff0400, 0x03ff8001,
	0x00000000, 0x80008000, 0x80000000,
	0x3c003c00, 0x40490fdb, 0xc2f6e979,
}

// wordTable returns n words: every word class twice among random bits,
// shuffled (twice: with odd records a word may land last in a record,
// where its high half is padding that no unpack reads).
func wordTable(r *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = math.Float32frombits(r.Uint32())
	}
	for k, c := range wordClasses {
		w[2*k], w[2*k+1] = math.Float32frombits(c), math.Float32frombits(c)
	}
	r.Shuffle(n, func(i, j int) { w[i], w[j] = w[j], w[i] })
	return w
}
