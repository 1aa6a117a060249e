package backend

import (
	"math"
	"testing"
)

// The known-answer vectors of Random123 (kat_vectors, philox4x32 10):
// counter, key, result.
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := Philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("Philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

func TestRandStateRoundTrip(t *testing.T) {
	for _, kc := range [][2]uint64{{0, 0}, {1, 2}, {0xdeadbeefcafef00d, 0xffffffffffffffff}, {1 << 63, 1<<32 - 1}} {
		s := RandState(kc[0], kc[1])
		for i, v := range s {
			if v != float32(int(v)) || v < 0 || v > 65535 {
				t.Fatalf("RandState(%x, %x)[%d] = %g, not a 16-bit whole number", kc[0], kc[1], i, v)
			}
		}
		if k, c := ParseRandState(s); k != kc[0] || c != kc[1] {
			t.Errorf("ParseRandState(RandState(%x, %x)) = %x, %x", kc[0], kc[1], k, c)
		}
	}
}

// RandUniformFill agrees with Philox block by block, whatever range it is
// asked for, and carries the counter across 32 bits.
func TestRandUniformFill(t *testing.T) {
	key, ctr := uint64(0x0123456789abcdef), uint64(1<<32-2)
	all := make([]float32, 37)
	RandUniformFill(all, key, ctr, 1, 0)
	for e := range all {
		blk := ctr + 1 + uint64(e/4)
		w := Philox4x32([4]uint32{uint32(blk), uint32(blk >> 32), 0, 0}, [2]uint32{uint32(key), uint32(key >> 32)})
		if want := UniformFromBits(w[e%4]); all[e] != want {
			t.Fatalf("element %d = %g, want %g", e, all[e], want)
		}
		if !(all[e] >= 0 && all[e] < 1) {
			t.Fatalf("element %d = %g outside [0, 1)", e, all[e])
		}
	}
	part := make([]float32, 11)
	RandUniformFill(part, key, ctr, 1, 13)
	for j, v := range part {
		if v != all[13+j] {
			t.Fatalf("range from 13: element %d = %g, want %g", j, v, all[13+j])
		}
	}
	if UniformFromBits(math.MaxUint32) != 1-0x1p-24 || UniformFromBits(0xff) != 0 {
		t.Fatalf("UniformFromBits's ends are wrong")
	}
}
