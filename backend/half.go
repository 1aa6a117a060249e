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
