package buffer

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// vals returns n distinct non-zero values starting at base.
func vals(n int, base float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = base + float32(i)*0.5
	}
	return v
}

// model is the plain-Go image of a buffer: capacity records of width
// values, rounded as the storage rounds them.
type model struct {
	width   int
	storage core.Precision
	data    []float32
}

func newModel(width, capacity int) *model {
	return &model{width: width, data: make([]float32, width*capacity)}
}

func (m *model) write(off int, recs []float32) {
	copy(m.data[off*m.width:], stored(recs, m.storage))
}

// stored is what a buffer of the given storage holds of v: v itself for
// f32, else each value rounded to the format on the host, as Write does.
func stored(v []float32, storage core.Precision) []float32 {
	out := slices.Clone(v)
	for i, x := range v {
		switch storage {
		case core.PrecisionF16:
			out[i] = backend.F16Value(backend.F16Bits(x))
		case core.PrecisionBF16:
			out[i] = backend.BF16Value(backend.BF16Bits(x))
		}
	}
	return out
}

func (m *model) read(off, k int) []float32 {
	return slices.Clone(m.data[off*m.width : (off+k)*m.width])
}

func (m *model) rows(idx []int) []float32 {
	var out []float32
	for _, i := range idx {
		out = append(out, m.read(i, 1)...)
	}
	return out
}

// close64 compares got to a float64 reference: |got-want| <= tol*(1+|want|).
func close64(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: [%d] = %g, want %g (tolerance %g)", what, i, got[i], want[i], tol)
		}
	}
}

func mustNew(t *testing.T, dev *core.Device, width, capacity int) *Buffer {
	t.Helper()
	b, err := New(dev, width, capacity)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Seed case 1: a buffer starts at zero and reads back what was written.
func TestReadWrite(t *testing.T) {
	dev := open(t)
	type write struct {
		off  int
		recs []float32
	}
	cases := []struct {
		name            string
		width, capacity int
		writes          []write
		readOff, readK  int
	}{
		{"zero-filled around a write", 3, 10, []write{{4, vals(6, 1)}}, 0, 10},
		{"overlapping writes", 2, 6, []write{{1, vals(6, 1)}, {2, vals(4, -7)}}, 0, 6},
		{"last record, part read", 4, 5, []write{{4, vals(4, 9)}}, 3, 2},
		{"one float per record", 1, 7, []write{{0, vals(7, 2)}, {3, []float32{-1}}}, 2, 4},
		{"empty write and read", 3, 4, []write{{4, nil}, {0, vals(3, 5)}}, 4, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mustNew(t, dev, c.width, c.capacity)
			defer b.Free()
			m := newModel(c.width, c.capacity)
			for _, w := range c.writes {
				if err := b.Write(w.off, w.recs); err != nil {
					t.Fatal(err)
				}
				m.write(w.off, w.recs)
			}
			got, err := b.Read(c.readOff, c.readK)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.read(c.readOff, c.readK); !slices.Equal(got, want) {
				t.Fatalf("Read(%d, %d) = %v, want %v", c.readOff, c.readK, got, want)
			}
			if all, _ := b.Read(0, c.capacity); !slices.Equal(all, m.data) {
				t.Fatalf("whole buffer = %v, want %v", all, m.data)
			}
		})
	}
}

// A buffer allocated where a freed one was starts at zero again.
func TestZeroAfterReuse(t *testing.T) {
	dev := open(t)
	for i := range 3 {
		b := mustNew(t, dev, 8, 16)
		got, err := b.Read(0, 16)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
			t.Fatalf("round %d: a new buffer holds %v, want zeros", i, got)
		}
		if err := b.Write(0, vals(8*16, 1)); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.Read(15, 1); got[7] != 1+127*0.5 {
			t.Fatalf("round %d: last value %v after a write", i, got)
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// Seed case 2: bounds checks, bad arguments and freed buffers are errors
// naming the function and the values.
func TestErrors(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 3, 10)
	defer b.Free()
	cases := []struct {
		name     string
		do       func() error
		sentinel error // nil: no sentinel, only the message
		msg      string
	}{
		{"write past the end", func() error { return b.Write(8, vals(12, 1)) }, ErrOutOfRange,
			"buffer.Write: records 8..11 are outside the buffer (capacity 10)"},
		{"write at a negative offset", func() error { return b.Write(-1, vals(3, 1)) }, ErrOutOfRange,
			"buffer.Write: offset -1 must be non-negative"},
		{"write of a partial record", func() error { return b.Write(0, vals(7, 1)) }, nil,
			"buffer.Write: 7 values are not whole records of width 3"},
		{"read past the end", func() error { _, err := b.Read(9, 2); return err }, ErrOutOfRange,
			"buffer.Read: records 9..10 are outside the buffer (capacity 10)"},
		{"read of negative length", func() error { _, err := b.Read(0, -1); return err }, ErrOutOfRange,
			"buffer.Read: k = -1 records, must be non-negative"},
		{"empty read outside", func() error { _, err := b.Read(11, 0); return err }, ErrOutOfRange,
			"buffer.Read: offset 11 is outside the buffer (capacity 10)"},
		{"index = capacity", func() error { _, err := b.GetRows([]int{0, 10}); return err }, ErrOutOfRange,
			"buffer.GetRows: idx[1] = 10, indices must be whole numbers in 0..9"},
		{"negative index", func() error { _, err := b.GetRows([]int{-1}); return err }, ErrOutOfRange,
			"buffer.GetRows: idx[0] = -1, indices must be whole numbers in 0..9"},
		{"no index", func() error { _, err := b.GetRows(nil); return err }, ErrOutOfRange,
			"buffer.GetRows: idx is empty"},
		{"zero width", func() error { _, err := New(dev, 0, 10); return err }, nil,
			"buffer.New: width 0 and capacity 10 must be positive"},
		{"negative capacity", func() error { _, err := New(dev, 3, -1); return err }, nil,
			"buffer.New: width 3 and capacity -1 must be positive"},
		{"no device", func() error { _, err := New(nil, 3, 10); return err }, nil,
			"buffer.New: the device is nil"},
		{"free of a nil buffer", (*Buffer)(nil).Free, nil, "buffer.Free: the buffer is nil"},
		{"write to a nil buffer", func() error { return (*Buffer)(nil).Write(0, vals(3, 1)) }, nil, "buffer.Write: the buffer is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if err == nil {
				t.Fatal("no error")
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Errorf("error %q does not wrap %v", err, c.sentinel)
			}
			if err.Error() != c.msg {
				t.Errorf("error %q, want %q", err, c.msg)
			}
		})
	}
	// The failed calls changed nothing.
	if got, _ := b.Read(0, 10); slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
		t.Fatalf("failed writes wrote %v", got)
	}
}

// Indices from 2^24 on are refused: the device gets them as f32.
func TestIndexNotExactInF32(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 1, 1<<24+2)
	defer b.Free()
	if err := b.Write(1<<24+1, []float32{7}); err != nil {
		t.Fatal(err)
	}
	_, err := b.GetRows([]int{1 << 24})
	if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "idx[0] = 16777216, indices from 2^24 on are not exact in f32") {
		t.Fatalf("GetRows(2^24) error = %v", err)
	}
	if got, err := b.Read(1<<24+1, 1); err != nil || got[0] != 7 {
		t.Fatalf("Read above 2^24 = %v, %v; want [7]", got, err)
	}
}

func TestFreed(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 3, 10)
	if s := b.String(); s != "<buffer> 3 x 10 f32 (device)" {
		t.Fatalf("String = %q", s)
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
	// Free ran the pending read first.
	if got, err := pending.Data(); err != nil || !slices.Equal(got, []float32{4, 5, 6}) {
		t.Fatalf("a read recorded before Free = %v, %v; want [4 5 6]", got, err)
	}
	if s := b.String(); s != "<buffer> 3 x 10 f32 (freed)" {
		t.Fatalf("String after Free = %q", s)
	}
	if b.Width() != 3 || b.Capacity() != 10 {
		t.Fatalf("Width, Capacity = %d, %d after Free", b.Width(), b.Capacity())
	}
	cases := []struct {
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
	}
	for _, c := range cases {
		err := c.do()
		if !errors.Is(err, ErrFreed) {
			t.Errorf("%s on a freed buffer: error %v, want ErrFreed", c.fn, err)
			continue
		}
		if want := "buffer." + c.fn + ": the buffer has been freed"; err.Error() != want {
			t.Errorf("%s: error %q, want %q", c.fn, err, want)
		}
	}
}

// Seed case 3: a gather with 0-based repeated indices, used as a MatMul operand.
func TestGatherInMatMul(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 3, 10)
	defer b.Free()
	m := newModel(3, 10)
	recs := vals(3*6, -2)
	if err := b.Write(2, recs); err != nil {
		t.Fatal(err)
	}
	m.write(2, recs)
	idx := []int{5, 4, 5, 0, 7}
	rows, err := b.GetRows(idx)
	if err != nil {
		t.Fatal(err)
	}
	if rows.RequiresGrad() || !slices.Equal(rows.Shape(), []int{5, 3}) {
		t.Fatalf("GetRows gives %v (grad %t), want shape [5 3] without gradient", rows, rows.RequiresGrad())
	}
	w := []float32{1, -2, 0.5, 3, -1, 0.25}
	got, err := core.MatMul(rows, dev.Tensor(w, 3, 2)).Data()
	if err != nil {
		t.Fatal(err)
	}
	close64(t, "gather x w", got, matmul64(m.rows(idx), w, len(idx), 3, 2), 1e-6)
}

// matmul64 multiplies [n, k] by [k, p] in float64.
func matmul64(a, b []float32, n, k, p int) []float64 {
	out := make([]float64, n*p)
	for i := range n {
		for j := range p {
			var s float64
			for l := range k {
				s += float64(a[i*k+l]) * float64(b[l*p+j])
			}
			out[i*p+j] = s
		}
	}
	return out
}

// ringWrite writes recs at head, wrapping with two writes, and returns the
// new head.
func ringWrite(b *Buffer, head int, recs []float32) (int, error) {
	k := len(recs) / b.Width()
	first := min(k, b.Capacity()-head)
	if err := b.Write(head, recs[:first*b.Width()]); err != nil {
		return head, err
	}
	if first < k {
		if err := b.Write(0, recs[first*b.Width():]); err != nil {
			return head, err
		}
	}
	return (head + k) % b.Capacity(), nil
}

// Seed case 4: a ring buffer wraps with two writes.
func TestRingWrap(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 2, 5)
	defer b.Free()
	want := make([]float32, 10) // the ring's image after each batch
	head := 0
	for i, k := range []int{3, 3, 4, 5, 1} {
		recs := vals(2*k, float32(10*(i+1)))
		for r := range k {
			copy(want[2*((head+r)%5):], recs[2*r:2*r+2])
		}
		var err error
		if head, err = ringWrite(b, head, recs); err != nil {
			t.Fatal(err)
		}
		got, err := b.Read(0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d of %d records: buffer %v, want %v", i, k, got, want)
		}
	}
}

// Writes are ordered after pending work that reads the buffer: that work sees
// the old value, work recorded after the write the new one.
func TestWriteAfterPendingRead(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 2, 4)
	defer b.Free()
	if err := b.Write(1, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	before, err := b.GetRows([]int{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	sumBefore := core.Sum(before)
	if err := b.Write(1, []float32{5, 7}); err != nil {
		t.Fatal(err)
	}
	after, err := b.GetRows([]int{1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sumBefore.Item(); err != nil || got != 6 {
		t.Fatalf("work queued before the write: sum %v, %v; want 6 (the old record)", got, err)
	}
	if got, err := after.Data(); err != nil || !slices.Equal(got, []float32{5, 7}) {
		t.Fatalf("work queued after the write: %v, %v; want [5 7]", got, err)
	}
}

// Seed case 5: a step that repeats sees later writes and new indices without
// recompiling (one program per index length), and errors once the buffer is
// freed.
func TestCachedStep(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 3, 8)
	m := newModel(3, 8)
	w := []float32{1, 0.5, -1, 2, 0.25, -3}
	wt := dev.Tensor(w, 3, 2)
	step := func(idx []int) ([]float32, error) {
		rows, err := b.GetRows(idx)
		if err != nil {
			return nil, err
		}
		return core.MatMul(rows, wt).Data()
	}
	recs := vals(3*8, 1)
	if err := b.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	m.write(0, recs)
	cases := []struct {
		name     string
		write    int // record rewritten before the step; -1: none
		idx      []int
		compiles int // new programs for this step
	}{
		{"first batch of 2", -1, []int{1, 2}, 1},
		{"after a write", 1, []int{1, 2}, 0},
		{"new indices", -1, []int{3, 0}, 0},
		{"batch of 3", 6, []int{6, 6, 7}, 1},
		{"batch of 2 again", 0, []int{0, 7}, 0},
		{"batch of 3 again", -1, []int{5, 1, 0}, 0},
	}
	for i, c := range cases {
		if c.write >= 0 {
			r := vals(3, float32(-10*i))
			if err := b.Write(c.write, r); err != nil {
				t.Fatal(err)
			}
			m.write(c.write, r)
		}
		c0 := dev.Stats().Compiles
		got, err := step(c.idx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		close64(t, c.name, got, matmul64(m.rows(c.idx), w, len(c.idx), 3, 2), 1e-6)
		if n := dev.Stats().Compiles - c0; n != c.compiles {
			t.Errorf("%s: %d compiles, want %d", c.name, n, c.compiles)
		}
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := step([]int{1, 2}); !errors.Is(err, ErrFreed) {
		t.Fatalf("step on a freed buffer: error %v, want ErrFreed", err)
	}
}

// Seed case 6: a repeated step's device result equals a plain-Go float64
// computation (relu(rows @ W + bias), random data, fixed seed).
func TestDeviceMatchesReference(t *testing.T) {
	const width, capacity, hidden, batch = 16, 200, 8, 32
	dev := open(t)
	b := mustNew(t, dev, width, capacity)
	defer b.Free()
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	m := newModel(width, capacity)
	head := 0
	for range 9 { // wraps: 9 x 30 records in a ring of 200
		recs := randn(30 * width)
		for r := range 30 {
			m.write((head+r)%capacity, recs[r*width:(r+1)*width])
		}
		var err error
		if head, err = ringWrite(b, head, recs); err != nil {
			t.Fatal(err)
		}
	}
	w, bias := randn(width*hidden), randn(hidden)
	wt, bt := dev.Tensor(w, width, hidden), dev.Tensor(bias, hidden)
	c0 := dev.Stats().Compiles
	for s := range 4 {
		idx := make([]int, batch)
		for i := range idx {
			idx[i] = rng.IntN(capacity)
		}
		rows, err := b.GetRows(idx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := core.ReLU(core.Add(core.MatMul(rows, wt), bt)).Data()
		if err != nil {
			t.Fatal(err)
		}
		want := matmul64(m.rows(idx), w, batch, width, hidden)
		for i := range want {
			want[i] = max(0, want[i]+float64(bias[i%hidden]))
		}
		close64(t, "relu(rows w + b)", got, want, 1e-4)
		if s == 0 {
			c0 = dev.Stats().Compiles
		}
	}
	if n := dev.Stats().Compiles - c0; n != 0 {
		t.Errorf("3 repeated steps compiled %d programs, want 0", n)
	}
}

// Seed case 7: indices already on the device are clamped there, inside a
// repeated step, so an index out of range reads the first or last record.
func TestDeviceIndicesClamped(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 2, 10)
	defer b.Free()
	m := newModel(2, 10)
	recs := vals(20, 1)
	if err := b.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	m.write(0, recs)
	cases := []struct {
		name string
		idx  []float32
		want []int // the records read
	}{
		{"in range", []float32{2, 0, 9, 4}, []int{2, 0, 9, 4}},
		{"out of range", []float32{-5, 1e9, 10, -1}, []int{0, 9, 9, 0}},
		{"infinite and fractional", []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 2.4, -0.4}, []int{9, 0, 2, 0}},
	}
	var c0 int
	for i, c := range cases {
		if i == 1 {
			c0 = dev.Stats().Compiles
		}
		// The indices come from an op, so they exist on the device only.
		idx := core.AddScalar(dev.Tensor(c.idx, 2, 2), 0)
		got, err := core.Scale(b.GetRowsOf(idx), 2).Data()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := m.rows(c.want)
		wf := make([]float64, len(want))
		for j, v := range want {
			wf[j] = 2 * float64(v)
		}
		close64(t, c.name, got, wf, 0)
	}
	if n := dev.Stats().Compiles - c0; n != 0 {
		t.Errorf("new device indices of the same length compiled %d programs, want 0", n)
	}
}

// Seed case 8: after Device.Close the step is recorded anew (a new
// Generation, one more compile) and the buffer's values survive.
func TestGenerationAfterClose(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 4, 6)
	defer b.Free()
	recs := vals(24, 3)
	if err := b.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	step := func() ([]float32, error) {
		rows, err := b.GetRows([]int{5, 1})
		if err != nil {
			return nil, err
		}
		return core.SumAxis(rows, 1, false).Data()
	}
	first, err := step()
	if err != nil {
		t.Fatal(err)
	}
	g0, c0 := dev.Generation(), dev.Stats().Compiles
	if _, err := step(); err != nil || dev.Stats().Compiles != c0 {
		t.Fatalf("repeated step: %v, compiles %d -> %d", err, c0, dev.Stats().Compiles)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := step()
	if err != nil {
		t.Fatal(err)
	}
	if g := dev.Generation(); g != g0+1 {
		t.Errorf("Generation %d after Close, want %d", g, g0+1)
	}
	if c := dev.Stats().Compiles; c != c0+1 {
		t.Errorf("Compiles %d after Close, want %d (recorded anew)", c, c0+1)
	}
	m := newModel(4, 6)
	m.write(0, recs)
	want := []float64{0, 0}
	for i, r := range []int{5, 1} {
		for _, v := range m.read(r, 1) {
			want[i] += float64(v)
		}
	}
	close64(t, "before Close", first, want, 1e-6)
	close64(t, "after Close", again, want, 1e-6)
}

// A buffer survives any number of training steps (forward, backward and an
// in-place update in one program each): its value is untouched, it takes no
// gradient, and the repeated step is compiled once.
func TestSurvivesTrainingSteps(t *testing.T) {
	const width, capacity, batch, steps = 3, 64, 8, 30
	dev := open(t)
	b := mustNew(t, dev, width, capacity)
	defer b.Free()
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([]float32, width*capacity)
	for i := range recs {
		recs[i] = float32(rng.NormFloat64())
	}
	if err := b.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	w := dev.Param(make([]float32, width), width, 1)
	wTrue := dev.Tensor([]float32{1, -2, 0.5}, width, 1)
	vel, err := dev.Zeros(width, 1)
	if err != nil {
		t.Fatal(err)
	}
	hp := dev.Tensor([]float32{0.1, 0, 0}, 3) // lr, momentum, weight decay
	var first, last float32
	var compiles int
	for s := range steps {
		idx := make([]int, batch)
		for i := range idx {
			idx[i] = rng.IntN(capacity)
		}
		rows, err := b.GetRows(idx)
		if err != nil {
			t.Fatal(err)
		}
		diff := core.Sub(core.MatMul(rows, w), core.MatMul(rows, wTrue))
		loss := core.Mean(core.Mul(diff, diff))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		core.SGDUpdate(w, w.Grad(), vel, hp)
		l, err := loss.Item()
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		w.ZeroGrad()
		switch s {
		case 0:
			first = l
		case 2:
			compiles = dev.Stats().Compiles
		}
		last = l
	}
	if n := dev.Stats().Compiles - compiles; n != 0 {
		t.Errorf("steps 3..%d compiled %d programs, want 0", steps, n)
	}
	if !(last < first/10) {
		t.Errorf("loss %g -> %g over %d steps: the model did not learn from the buffer", first, last, steps)
	}
	if got, err := b.Read(0, capacity); err != nil || !slices.Equal(got, recs) {
		t.Fatalf("the buffer changed over training: %v", err)
	}
}
