package backend

import "math"

// RoundF16 is OpRoundF16 of one value: x rounded to the nearest IEEE
// binary16 value, ties to even, as f32 (see Special values). It works on
// the bits, as the WGSL kernel does, so that no library conversion's
// rounding mode enters.
func RoundF16(x float32) float32 {
	u := math.Float32bits(x)
	s, a := u&0x80000000, u&0x7fffffff
	switch {
	case a >= 0x7f800000: // Inf, NaN
		return x
	case a >= 0x477ff000: // 65520 and up: past the largest f16 (65504) by half a step
		return math.Float32frombits(s | 0x7f800000)
	case a < 0x38800000: // below 2^-14: f16 subnormals, multiples of 2^-24
		q := float64(math.Float32frombits(a)) * (1 << 24)
		return math.Float32frombits(s | math.Float32bits(float32(math.RoundToEven(q)/(1<<24))))
	}
	r := a + 0xfff + (a>>13)&1 // ties to even on the 13 dropped bits
	return math.Float32frombits(s | r&0xffffe000)
}

// RoundBF16 is OpRoundBF16 of one value: x rounded to the nearest bfloat16
// value, ties to even, as f32; NaN stays NaN.
func RoundBF16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return x
	}
	r := u + 0x7fff + (u>>16)&1
	return math.Float32frombits(r & 0xffff0000)
}

// PackedLen is the number of 32-bit words that n 16-bit values take (the
// shape [PackedLen(n)] of OpPackF16's and OpPackBF16's result).
func PackedLen(n int) int { return n/2 + n%2 }

// F16Bits is the binary16 encoding of RoundF16(x): OpPackF16's half of a
// word. A NaN becomes the quiet NaN 0x7e00 with x's sign.
func F16Bits(x float32) uint16 {
	u := math.Float32bits(RoundF16(x))
	s, a := uint16(u>>16)&0x8000, u&0x7fffffff
	switch {
	case a > 0x7f800000:
		return s | 0x7e00
	case a == 0x7f800000:
		return s | 0x7c00
	case a < 0x38800000: // an f16 subnormal (or zero): a whole multiple of 2^-24
		return s | uint16(math.Float32frombits(a)*(1<<24))
	}
	return s | uint16((a>>23)-112)<<10 | uint16(a>>13)&0x3ff
}

// F16Value is the f32 value of the binary16 encoding h (exact: every f16
// is an f32): OpUnpackF16 of one half of a word.
func F16Value(h uint16) float32 {
	s := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case e == 0:
		v := float32(m) / (1 << 24)
		if s != 0 {
			v = -v
		}
		return v
	case e == 31 && m == 0:
		return math.Float32frombits(s | 0x7f800000)
	case e == 31:
		return math.Float32frombits(s | 0x7fc00000 | m<<13)
	}
	return math.Float32frombits(s | (e+112)<<23 | m<<13)
}

// BF16Bits is the bfloat16 encoding of RoundBF16(x): OpPackBF16's half of
// a word. A NaN becomes the quiet NaN 0x7fc0 with x's sign.
func BF16Bits(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16)&0x8000 | 0x7fc0
	}
	return uint16(math.Float32bits(RoundBF16(x)) >> 16)
}

// BF16Value is the f32 value of the bfloat16 encoding h: its 16 bits
// followed by 16 zero bits.
func BF16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// PackHalves is OpPackF16 (bf false) or OpPackBF16 (bf true) of src into
// the words dst (len PackedLen(len(src))), each word an f32 bit pattern:
// the CPU backends' kernel and the reference's.
func PackHalves(dst, src []float32, bf bool) {
	enc := F16Bits
	if bf {
		enc = BF16Bits
	}
	for i := range dst {
		lo := uint32(enc(src[2*i]))
		var hi uint32
		if 2*i+1 < len(src) {
			hi = uint32(enc(src[2*i+1]))
		}
		dst[i] = math.Float32frombits(lo | hi<<16)
	}
}

// UnpackHalves is OpUnpackF16 / OpUnpackBF16: the len(dst) values that
// the words src hold.
func UnpackHalves(dst, src []float32, bf bool) {
	dec := F16Value
	if bf {
		dec = BF16Value
	}
	for i := range dst {
		w := math.Float32bits(src[i/2])
		dst[i] = dec(uint16(w >> (16 * (i % 2))))
	}
}
