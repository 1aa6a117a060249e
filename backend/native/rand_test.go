//go:build ggml

package native

import (
	"testing"

	"github.com/ag-go/ag/backend"
)

// ggml-vulkan's host fill of rand_uniform, split across goroutines, gives
// the values of the one-piece reference at every chunk boundary (sizes
// past randChunk, not multiples of 4; counters that carry past 32 bits).
func TestFillParallel(t *testing.T) {
	for _, c := range []struct {
		n          int
		key, count uint64
		start      uint64
	}{{3*randChunk + 7, 1, 2, 0}, {5*randChunk + 1, 0xdeadbeef, 1<<32 - 3, 11}, {randChunk - 1, 9, 9, 3}} {
		var st [backend.RandStateLen]float32
		copy(st[:], backend.RandState(c.key, c.count))
		got := make([]float32, c.n)
		fillParallel(got, &st, c.start)
		want := make([]float32, c.n)
		backend.RandUniformFill(want, c.key, c.count, int(c.start), 0)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("n %d: element %d = %g, want %g", c.n, i, got[i], want[i])
			}
		}
	}
}
