package buffer

import (
	"errors"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
)

// FuzzBuffer runs sequences of Write, Read, GetRows and GetRowsOf decoded
// from the input against a plain Go slice model: values must agree exactly
// (copies only, of values the model rounds as the storage does), and a
// call must fail with ErrOutOfRange exactly when the model says its range
// is outside the buffer. The first byte picks the width and the storage
// (f32, f16, bf16). `go test` runs the seed corpus; `go test -fuzz
// FuzzBuffer ./buffer/` explores further.
func FuzzBuffer(f *testing.F) {
	for _, s := range [][]byte{
		{2, 9, 0, 4, 3, 1, 1, 11, 2, 5, 7, 3, 3, 2},  // write, read, gathers
		{0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3, 0},      // 1 x 1 buffer
		{4, 11, 0, 12, 3, 0, 1, 2, 1, 14, 0, 2, 200}, // writes past the end, empty read
		{1, 5, 0, 6, 2, 2, 3, 9, 2, 200, 40, 3, 7, 9, 1, 255, 255},
		{3, 2, 0, 1, 3, 0, 2, 1, 0, 2, 5, 3, 0, 255, 3, 1, 0, 0},
		{7, 9, 0, 4, 3, 1, 1, 11, 2, 5, 7, 3, 3, 2, 0, 9, 200},    // f16, width 3
		{13, 5, 0, 6, 2, 2, 3, 9, 2, 200, 40, 3, 7, 9, 1, 255, 0}, // bf16, width 4
	} {
		f.Add(s)
	}
	dev, err := core.Open(testDevice())
	if err != nil {
		f.Fatalf("%s=%s: %v", testenv.DeviceEnv, testDevice(), err)
	}
	f.Cleanup(func() { dev.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		width, capacity := 1+int(data[0])%5, 1+int(data[1])%12
		storage := core.Precision(int(data[0]/5) % 3)
		b, err := NewWithStorage(dev, width, capacity, storage)
		if errors.Is(err, core.ErrUnsupported) {
			return // bf16 on ggml-vulkan
		}
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		m := newModel(width, capacity)
		m.storage = storage
		inside := func(off, k int) bool { return off >= 0 && k >= 0 && off+k <= capacity }
		wantErr := func(what string, err error, ok bool) bool {
			t.Helper()
			switch {
			case ok && err != nil:
				t.Fatalf("%s: %v", what, err)
			case !ok && !errors.Is(err, ErrOutOfRange):
				t.Fatalf("%s: error %v, want ErrOutOfRange", what, err)
			}
			return ok
		}
		ops := data[2:]
		for step := 0; len(ops) >= 3 && step < 24; step++ {
			op, a, c := ops[0], int(ops[1]), int(ops[2])
			ops = ops[3:]
			off := a%(capacity+3) - 1 // -1 .. capacity+1
			switch op % 4 {
			case 0:
				k := c % 4
				recs := make([]float32, k*width)
				for i := range recs {
					recs[i] = float32(step*1000+i) + float32(int8(a^c))/8
				}
				if wantErr("Write", b.Write(off, recs), inside(off, k)) {
					m.write(off, recs)
				}
			case 1:
				k := c%(capacity+2) - 1 // -1 .. capacity
				got, err := b.Read(off, k)
				if wantErr("Read", err, inside(off, k)) && !slices.Equal(got, m.read(off, k)) {
					t.Fatalf("Read(%d, %d) = %v, want %v", off, k, got, m.read(off, k))
				}
			case 2:
				idx := indices(a, c, capacity)
				y, err := b.GetRows(idx)
				ok := !slices.ContainsFunc(idx, func(i int) bool { return i < 0 || i >= capacity })
				if wantErr("GetRows", err, ok) {
					got, err := y.Data()
					if err != nil || !slices.Equal(got, m.rows(idx)) {
						t.Fatalf("GetRows(%v) = %v, %v; want %v", idx, got, err, m.rows(idx))
					}
				}
			case 3:
				idx := indices(a, c, capacity)
				fidx := make([]float32, len(idx))
				for i, v := range idx {
					fidx[i] = float32(v)
					if v == capacity { // far outside, still clamped
						fidx[i] = 1e6
					}
					idx[i] = min(max(v, 0), capacity-1)
				}
				got, err := b.GetRowsOf(dev.Tensor(fidx, len(fidx))).Data()
				if err != nil || !slices.Equal(got, m.rows(idx)) {
					t.Fatalf("GetRowsOf(%v) = %v, %v; want %v", fidx, got, err, m.rows(idx))
				}
			}
		}
		if got, err := b.Read(0, capacity); err != nil || !slices.Equal(got, m.data) {
			t.Fatalf("final buffer %v, %v; want %v", got, err, m.data)
		}
	})
}

// indices decodes 1..5 indices in -1..capacity from two bytes.
func indices(a, c, capacity int) []int {
	idx := make([]int, 1+c%5)
	for j := range idx {
		idx[j] = (a+7*j*(c+1))%(capacity+2) - 1
	}
	return idx
}
