package buffer

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkGetRows gathers a batch of 256 records of 64 floats from a
// buffer of 100k records and reads the batch back (one run per op).
func BenchmarkGetRows(b *testing.B) {
	dev := open(b)
	buf, err := New(dev, 64, 100_000)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	rng := rand.New(rand.NewPCG(5, 6))
	idx := make([]int, 256)
	for b.Loop() {
		for i := range idx {
			idx[i] = rng.IntN(100_000)
		}
		rows, err := buf.GetRows(idx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rows.Data(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes 256 records of 64 floats into a ring of 100k.
func BenchmarkWrite(b *testing.B) {
	dev := open(b)
	buf, err := New(dev, 64, 100_000)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	recs := vals(256*64, 1)
	head := 0
	b.SetBytes(4 * int64(len(recs)))
	for b.Loop() {
		if head, err = ringWrite(buf, head, recs); err != nil {
			b.Fatal(err)
		}
	}
}
