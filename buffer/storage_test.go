package buffer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
)

// The 16-bit storages, each tested where the device converts it back; the
// others must be refused with core.ErrUnsupported (bf16 on ggml-vulkan).
var halfStorages = []core.Precision{core.PrecisionF16, core.PrecisionBF16}

// mustNewStorage makes a buffer of storage, or skips the test after
// checking that the device refuses a format it cannot read back, clearly.
func mustNewStorage(t *testing.T, dev *core.Device, width, capacity int, storage core.Precision) *Buffer {
	t.Helper()
	b, err := NewWithStorage(dev, width, capacity, storage)
	if storage != core.PrecisionF32 && !canRead(dev, storage) {
		want := fmt.Sprintf("buffer.NewWithStorage: core.Device.NewHalfTable(%d, %d, %v): %s cannot read %v values back (unpack_%v is in its Caps.Unsupported)",
			capacity, width, storage, dev.Name(), storage, storage)
		if !errors.Is(err, core.ErrUnsupported) || err.Error() != want {
			t.Fatalf("NewWithStorage(%v) on %s: error %v, want core.ErrUnsupported with %q", storage, dev.Name(), err, want)
		}
		testenv.Skipf(t, "%s cannot read %v back, and NewWithStorage refuses it: %v", dev.Name(), storage, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}

func canRead(dev *core.Device, p core.Precision) bool {
	op := backend.OpUnpackF16
	if p == core.PrecisionBF16 {
		op = backend.OpUnpackBF16
	}
	return dev.Info().Supports(op)
}

// records draws k records of width values across the format's range, with
// the specials and rounding edges among them.
func records(r *rand.Rand, k, width int) []float32 {
	v := make([]float32, k*width)
	for i := range v {
		v[i] = float32(math.Copysign(math.Exp2(-28+46*r.Float64()), float64(r.IntN(2)*2-1)))
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		65504, 65520, -70000, 5.9604645e-08, 2.9802322e-08, 1.00048828125, 1.00390625, 1e-40, 3.4e38, 0.1}
	for j, e := range edges {
		v[(j*3)%len(v)] = e
	}
	return v
}

// A 16-bit buffer holds the host-rounded records bit for bit - signed
// zeros, subnormals, infinities - in Read, GetRows and GetRowsOf alike, on
// the test device, for odd and even widths; after Device.Close too.
func TestStorageValues(t *testing.T) {
	dev := open(t)
	for _, storage := range halfStorages {
		for _, width := range []int{1, 4, 7} {
			t.Run(fmt.Sprintf("%v/width %d", storage, width), func(t *testing.T) {
				const capacity = 50
				b := mustNewStorage(t, dev, width, capacity, storage)
				if got, want := b.String(), fmt.Sprintf("<buffer> %d x %d %v (device)", width, capacity, storage); got != want {
					t.Errorf("String = %q, want %q", got, want)
				}
				if b.Storage() != storage {
					t.Errorf("Storage = %v", b.Storage())
				}
				r := rand.New(rand.NewPCG(uint64(width), uint64(storage)))
				m := newModel(width, capacity)
				m.storage = storage
				head := 0
				for _, k := range []int{30, 30} { // the second wraps the ring
					recs := records(r, k, width)
					var err error
					if head, err = ringWrite(b, head, recs); err != nil {
						t.Fatal(err)
					}
					for j := range k {
						m.write((head-k+j+capacity)%capacity, recs[j*width:(j+1)*width])
					}
				}
				check := func(what string, got []float32, err error, want []float32) {
					t.Helper()
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if i := backendtest.FirstBitDiff(got, want); i >= 0 {
						t.Fatalf("%s: value %d = %g (bits %08x), want %g (%08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				all, err := b.Read(0, capacity)
				check("Read", all, err, m.data)
				idx := []int{49, 3, 3, 0, 17, 49, 25, 8}
				rows, err := b.GetRows(idx)
				if err != nil {
					t.Fatal(err)
				}
				if rows.RequiresGrad() || !slices.Equal(rows.Shape(), []int{len(idx), width}) {
					t.Fatalf("GetRows gives %v (grad %t), want [%d %d] without gradient", rows, rows.RequiresGrad(), len(idx), width)
				}
				got, err := rows.Data()
				check("GetRows", got, err, m.rows(idx))
				// indices computed on the device: clamped there
				dIdx := core.AddScalar(dev.Tensor([]float32{-5, 1e9, 7, 48}, 2, 2), 0)
				got, err = b.GetRowsOf(dIdx).Data()
				check("GetRowsOf", got, err, m.rows([]int{0, 49, 7, 48}))

				if err := dev.Close(); err != nil {
					t.Fatal(err)
				}
				if s := b.String(); !strings.HasSuffix(s, fmt.Sprintf("%v (host)", storage)) {
					t.Errorf("after Close: String = %q", s)
				}
				rows, err = b.GetRows(idx)
				if err != nil {
					t.Fatal(err)
				}
				got, err = rows.Data()
				check("GetRows after Close", got, err, m.rows(idx))
			})
		}
	}
}

// A 16-bit buffer takes half the device memory of an f32 one (an odd
// width one value more), as Bytes, a step's memory estimate and the
// refusals above the free memory all count it.
func TestStorageMemory(t *testing.T) {
	dev := open(t)
	const capacity = 1000
	idx := dev.Tensor([]float32{1, 2}, 2)
	for _, c := range []struct {
		width   int
		storage core.Precision
		bytes   int64
	}{
		{8, core.PrecisionF32, 4 * 8 * capacity},
		{8, core.PrecisionF16, 2 * 8 * capacity},
		{8, core.PrecisionBF16, 2 * 8 * capacity},
		{7, core.PrecisionF16, 2 * 8 * capacity},
		{7, core.PrecisionF32, 4 * 7 * capacity},
	} {
		t.Run(fmt.Sprintf("%v/width %d", c.storage, c.width), func(t *testing.T) {
			b := mustNewStorage(t, dev, c.width, capacity, c.storage)
			if b.Bytes() != c.bytes {
				t.Errorf("Bytes = %d, want %d", b.Bytes(), c.bytes)
			}
			e, err := dev.EstimateMemory(func() error { b.GetRowsOf(idx); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(c.bytes) + 4*2; e.Inputs != want { // the table and the indices
				t.Errorf("a gather's estimate counts %d bytes of inputs, want %d", e.Inputs, want)
			}
		})
	}

	// Against the free memory and the largest buffer a device reports, a
	// 16-bit buffer counts its own bytes: twice the records fit.
	cases := []struct {
		name            string
		free            uint64
		maxElems        int
		width, capacity int
		storage         core.Precision
		msg             string // "": accepted
	}{
		{"f16 where f32 is refused", 10 << 20, 0, 256, 9000, core.PrecisionF16, ""},
		{"f16 above 85%", 10 << 20, 0, 256, 18000, core.PrecisionF16,
			"buffer.NewWithStorage: 8.8 MB requested, the device reports 10.0 MB free, of which 8.5 MB (85%) may be used. Reduce the capacity."},
		{"odd width counts its padding", 10 << 20, 0, 255, 18000, core.PrecisionBF16,
			"buffer.NewWithStorage: 8.8 MB requested, the device reports 10.0 MB free, of which 8.5 MB (85%) may be used. Reduce the capacity."},
		{"f16 at twice f32's largest buffer", 0, 1 << 20, 1024, 2048, core.PrecisionF16, ""},
		{"f16 above the largest buffer", 0, 1 << 20, 1024, 2049, core.PrecisionF16,
			"buffer.NewWithStorage: 4.0 MB requested, the device's largest buffer holds 4.0 MB. Reduce the capacity."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := openFaulty(t, c.free, c.maxElems)
			b, err := NewWithStorage(dev, c.width, c.capacity, c.storage)
			if c.msg == "" {
				if errors.Is(err, core.ErrUnsupported) {
					testenv.Skipf(t, "%v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Write(c.capacity-1, vals(c.width, 1)); err != nil {
					t.Fatal(err)
				}
				b.Free()
				return
			}
			if !errors.Is(err, ErrTooLarge) || err.Error() != c.msg {
				t.Fatalf("error %v, want ErrTooLarge with %q", err, c.msg)
			}
		})
	}
}

// Errors of 16-bit buffers are f32 buffers' errors: an index out of range,
// a partial record, a freed buffer (a read recorded before Free still
// runs); and bad storage arguments are named.
func TestStorageErrors(t *testing.T) {
	dev := open(t)
	for _, storage := range halfStorages {
		t.Run(storage.String(), func(t *testing.T) {
			b := mustNewStorage(t, dev, 3, 10, storage)
			for _, c := range []struct {
				do       func() error
				sentinel error
				msg      string
			}{
				{func() error { _, err := b.GetRows([]int{0, 10}); return err }, ErrOutOfRange,
					"buffer.GetRows: idx[1] = 10, indices must be whole numbers in 0..9"},
				{func() error { _, err := b.GetRows([]int{-1}); return err }, ErrOutOfRange,
					"buffer.GetRows: idx[0] = -1, indices must be whole numbers in 0..9"},
				{func() error { return b.Write(8, vals(9, 1)) }, ErrOutOfRange,
					"buffer.Write: records 8..10 are outside the buffer (capacity 10)"},
				{func() error { _, err := b.Read(9, 2); return err }, ErrOutOfRange,
					"buffer.Read: records 9..10 are outside the buffer (capacity 10)"},
				{func() error { return b.Write(0, vals(4, 1)) }, nil,
					"buffer.Write: 4 values are not whole records of width 3"},
			} {
				err := c.do()
				if err == nil || err.Error() != c.msg || c.sentinel != nil && !errors.Is(err, c.sentinel) {
					t.Errorf("error %v, want %q (%v)", err, c.msg, c.sentinel)
				}
			}
			if err := b.Write(2, []float32{4, 5, 6}); err != nil {
				t.Fatal(err)
			}
			pending, err := b.GetRows([]int{2})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Free(); err != nil {
				t.Fatal(err)
			}
			if got, err := pending.Data(); err != nil || !slices.Equal(got, []float32{4, 5, 6}) {
				t.Fatalf("a read recorded before Free = %v, %v; want [4 5 6]", got, err)
			}
			if s, want := b.String(), fmt.Sprintf("<buffer> 3 x 10 %v (freed)", storage); s != want {
				t.Errorf("String after Free = %q, want %q", s, want)
			}
			for _, c := range []struct {
				fn string
				do func() error
			}{
				{"Write", func() error { return b.Write(0, vals(3, 1)) }},
				{"Read", func() error { _, err := b.Read(0, 1); return err }},
				{"GetRows", func() error { _, err := b.GetRows([]int{0}); return err }},
				{"Free", b.Free},
				{"GetRowsOf", func() (err error) {
					defer func() { err, _ = recover().(error) }()
					b.GetRowsOf(dev.Tensor([]float32{0}, 1))
					return nil
				}},
			} {
				if err := c.do(); !errors.Is(err, ErrFreed) || err.Error() != "buffer."+c.fn+": the buffer has been freed" {
					t.Errorf("%s on a freed buffer: error %v, want ErrFreed", c.fn, err)
				}
			}
		})
	}
	for _, c := range []struct {
		err error
		msg string
	}{
		{func() error { _, err := NewWithStorage(dev, 3, 10, core.Precision(5)); return err }(), "buffer.NewWithStorage: unknown storage precision 5"},
		{func() error { _, err := NewWithStorage(dev, 0, 10, core.PrecisionF16); return err }(), "buffer.NewWithStorage: width 0 and capacity 10 must be positive"},
		{func() error { _, err := NewWithStorage(nil, 3, 10, core.PrecisionF16); return err }(), "buffer.NewWithStorage: the device is nil"},
	} {
		if c.err == nil || c.err.Error() != c.msg {
			t.Errorf("error %v, want %q", c.err, c.msg)
		}
	}
}

// A captured step that reads a 16-bit buffer sees the records written
// between its replays, from one recording; so does a lazy step that
// repeats, from one program per index length.
func TestStorageCapturedStep(t *testing.T) {
	dev := open(t)
	for _, storage := range halfStorages {
		t.Run(storage.String(), func(t *testing.T) {
			b := mustNewStorage(t, dev, 3, 8, storage)
			m := newModel(3, 8)
			m.storage = storage
			w := dev.Tensor([]float32{1, 0.5, -1, 2, 0.25, -3}, 3, 2)
			c := core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
				return []*core.Tensor{core.MatMul(b.GetRowsOf(in[0]), w)}
			})
			lazy := func(idx []int) ([]float32, error) {
				rows, err := b.GetRows(idx)
				if err != nil {
					return nil, err
				}
				return core.MatMul(rows, w).Data()
			}
			var compiles int
			for k := range 4 {
				recs := vals(3*2, float32(k)*3.3+0.1)
				if err := b.Write(2*k, recs); err != nil { // new records before every replay
					t.Fatal(err)
				}
				m.write(2*k, recs)
				idx := []int{2 * k, 2*k + 1, 0}
				want := matmul64(m.rows(idx), []float32{1, 0.5, -1, 2, 0.25, -3}, 3, 3, 2)
				got, err := c.Call(core.In([]float32{float32(2 * k), float32(2*k + 1), 0}, 3))
				if err != nil {
					t.Fatal(err)
				}
				close64(t, fmt.Sprintf("replay %d", k), got[0], want, 1e-6)
				got2, err := lazy(idx)
				if err != nil {
					t.Fatal(err)
				}
				close64(t, fmt.Sprintf("lazy step %d", k), got2, want, 1e-6)
				if k == 0 {
					compiles = dev.Stats().Compiles
				}
			}
			if c.Records() != 1 {
				t.Errorf("%d recordings, want 1", c.Records())
			}
			if n := dev.Stats().Compiles - compiles; n != 0 {
				t.Errorf("3 repeated lazy steps compiled %d programs, want 0", n)
			}
		})
	}
}

// Concurrent writers and gatherers on one 16-bit buffer: every record
// ends as written, and every gather sees a whole record as written (each
// goroutine owns its records).
func TestStorageConcurrent(t *testing.T) {
	dev := open(t)
	const workers, per, width = 4, 8, 5
	b := mustNewStorage(t, dev, width, workers*per, core.PrecisionF16)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Go(func() {
			for k := range per {
				r := g*per + k
				rec := vals(width, float32(r))
				if err := b.Write(r, rec); err != nil {
					errs <- err
					return
				}
				y, err := b.GetRows([]int{r})
				if err != nil {
					errs <- err
					return
				}
				got, err := y.Data()
				if err != nil || !slices.Equal(got, stored(rec, core.PrecisionF16)) {
					errs <- fmt.Errorf("record %d: %v, %v; want %v", r, got, err, rec)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := b.Read(0, workers*per)
	if err != nil {
		t.Fatal(err)
	}
	for r := range workers * per {
		if want := stored(vals(width, float32(r)), core.PrecisionF16); !slices.Equal(all[r*width:(r+1)*width], want) {
			t.Errorf("record %d = %v, want %v", r, all[r*width:(r+1)*width], want)
		}
	}
}
