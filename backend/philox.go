package backend

import "math/bits"

// The device random number generator: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
// library), a counter-based generator: the 128 random bits of block c under
// key k are a pure function of (k, c), so every element of a random tensor
// is computed on its own, in any order, on any device, with the same bits.
//
// OpRandUniform's element e (row-major) of a node whose state input holds
// the key k and the base counter B, with Node.Start = s, is word e%4 of
// Philox(k, counter) for the 128-bit counter (c0, c1, 0, 0) where
// c1:c0 = B + s + e/4 (a 64-bit sum, wrapping), turned into an f32 in
// [0, 1) from its top 24 bits: float32(w>>8) * 2^-24, exact in f32, so every
// backend gives the same bits.
//
// The state input is RandStateLen f32 values, each a whole number in
// 0..65535 (exact in f32, which holds integers up to 2^24 only): the key's
// and the base counter's 16-bit pieces, lowest first (see RandState).

// The Philox4x32 constants: the round multipliers and the key increments
// (the golden ratio and sqrt(3)-1 in 32-bit fixed point).
const (
	PhiloxM0 = 0xD2511F53
	PhiloxM1 = 0xCD9E8D57
	PhiloxW0 = 0x9E3779B9
	PhiloxW1 = 0xBB67AE85
)

// RandStateLen is the length of OpRandUniform's state input.
const RandStateLen = 8

// Philox4x32 is Philox4x32-10: ten rounds over the counter ctr under key.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += PhiloxW0
			k1 += PhiloxW1
		}
		hi0, lo0 := bits.Mul32(PhiloxM0, c0)
		hi1, lo1 := bits.Mul32(PhiloxM1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}

// UniformFromBits is the f32 in [0, 1) of a random word: its top 24 bits
// times 2^-24 (exact).
func UniformFromBits(w uint32) float32 { return float32(w>>8) * 0x1p-24 }

// RandState encodes a key (a seed) and a base counter as OpRandUniform's
// state input.
func RandState(key, counter uint64) []float32 {
	s := make([]float32, RandStateLen)
	for i := 0; i < 4; i++ {
		s[i] = float32(uint16(key >> (16 * i)))
		s[4+i] = float32(uint16(counter >> (16 * i)))
	}
	return s
}

// ParseRandState decodes a state input made by RandState. Other values
// (not whole numbers in 0..65535) give unspecified keys and counters, here
// and on every backend.
func ParseRandState(s []float32) (key, counter uint64) {
	piece := func(f float32) uint64 {
		if !(f >= 0 && f < 1<<16) {
			return 0
		}
		return uint64(f)
	}
	for i := 0; i < 4; i++ {
		key |= piece(s[i]) << (16 * i)
		counter |= piece(s[4+i]) << (16 * i)
	}
	return key, counter
}

// RandUniformFill writes elements lo..hi-1 of an OpRandUniform node into
// out[0:hi-lo], for the key and counter of its state input (ParseRandState)
// and its Node.Start. It is the reference every backend's kernel matches.
func RandUniformFill(out []float32, key, counter uint64, start int, lo int) {
	k := [2]uint32{uint32(key), uint32(key >> 32)}
	base := counter + uint64(start)
	e := lo
	for j := 0; j < len(out); {
		blk := base + uint64(e/4)
		w := Philox4x32([4]uint32{uint32(blk), uint32(blk >> 32), 0, 0}, k)
		for q := e % 4; q < 4 && j < len(out); q++ {
			out[j] = UniformFromBits(w[q])
			j++
			e++
		}
	}
}
