package core

import (
	"testing"

	"github.com/ag-go/ag/profile"
)

// BenchmarkRecord measures recording ops lazily (no run), the path the
// profiler hook sits on. Compare a normal build (hook present, profiling
// off) with `-tags agnoprof` (hook compiled out):
//
//	go test -run x -bench Record -count 10 ./core/ > on.txt
//	go test -tags agnoprof -run x -bench Record -count 10 ./core/ > off.txt
//	benchstat off.txt on.txt
func BenchmarkRecord(b *testing.B) {
	profile.Forward(false)
	dev, err := Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	x := dev.Tensor(make([]float32, 64), 8, 8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		y := Add(Mul(x, x), x)
		_ = ReLU(y)
		if len(dev.pending) > 4096 {
			b.StopTimer()
			dev.pending = dev.pending[:0]
			b.StartTimer()
		}
	}
}

// BenchmarkLazyStep measures core's own cost of a lazy training step:
// recording, autograd, lowering, the program-cache lookup and realizing
// the kept values, on a model too small for the arithmetic to matter.
func BenchmarkLazyStep(b *testing.B) {
	dev, err := Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	const n, w = 4, 8
	x := dev.Tensor(make([]float32, n*w), n, w)
	var ps []*Tensor
	for range 4 {
		ps = append(ps, dev.Param(make([]float32, w*w), w, w))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := x
		for _, p := range ps {
			p.ZeroGrad()
			h = ReLU(MatMul(h, p))
		}
		loss := Mean(Mul(h, h))
		if err := loss.Backward(); err != nil {
			b.Fatal(err)
		}
		if _, err := loss.Item(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArgsort measures Argsort of one row of 4096 random values on
// the cpu device (recording, lowering and the run; the program is cached
// after the first):
//
//	go test -run x -bench Argsort ./core/
func BenchmarkArgsort(b *testing.B) {
	dev, err := Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	const n = 4096
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i*7919)%n) - n/2 // a permutation of whole numbers
	}
	x := dev.Tensor(v, 1, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Argsort(x, -1, false).Data(); err != nil {
			b.Fatal(err)
		}
	}
}
