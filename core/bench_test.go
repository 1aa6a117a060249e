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
