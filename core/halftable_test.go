package core

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// halfValues draws n values across the format's range with the specials
// and the rounding edges among them: what WriteRows must round on the host.
func halfValues(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Copysign(math.Exp2(-30+50*r.Float64()), float64(r.IntN(2)*2-1)))
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		-float32(math.NaN()), 65504, 65520, -1e6, 5.9604645e-08, 2.9802322e-08, 1.00048828125, 1e-40, 3.4e38, 1, -2}
	for k, e := range edges {
		v[(k*5)%n] = e
	}
	return v
}

// rounded is what a table of p stores of v: the host rounding, as f32.
func rounded(v []float32, p Precision) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		if p == PrecisionBF16 {
			out[i] = backend.BF16Value(backend.BF16Bits(x))
		} else {
			out[i] = backend.F16Value(backend.F16Bits(x))
		}
	}
	return out
}

// halfTables opens a table of each format the device converts back, and
// checks that it refuses the others with ErrUnsupported.
func halfTables(t *testing.T, dev *Device, rows, width int, f func(t *testing.T, h *HalfTable)) {
	for _, p := range []Precision{PrecisionF16, PrecisionBF16} {
		t.Run(p.String(), func(t *testing.T) {
			h, err := dev.NewHalfTable(rows, width, p)
			if !dev.Info().Supports(unpackOp(p)) {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("NewHalfTable(%v) on a device without %v: error %v, want ErrUnsupported", p, unpackOp(p), err)
				}
				testenv.Skipf(t, "%s cannot read %v back: NewHalfTable refuses it (%v)", dev.Name(), p, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Release() })
			f(t, h)
		})
	}
}

// Written rows read back as the host rounds them, bit for bit, and a
// gather by repeated, shuffled and clamped indices converts the same bits
// on the device, for odd and even widths, on every device.
func TestHalfTableValues(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, width := range []int{1, 6, 7} {
			t.Run(fmt.Sprint("width ", width), func(t *testing.T) {
				const rows = 40
				halfTables(t, dev, rows, width, func(t *testing.T, h *HalfTable) {
					r := rand.New(rand.NewPCG(uint64(width), uint64(h.prec)))
					vals := halfValues(r, 30*width)
					if err := h.WriteRows(5, vals); err != nil {
						t.Fatal(err)
					}
					all := make([]float32, rows*width) // zeros but the rows written
					copy(all[5*width:], rounded(vals, h.prec))
					got, err := h.ReadRows(0, rows)
					if err != nil {
						t.Fatal(err)
					}
					if i := backendtest.FirstBitDiff(got, all); i >= 0 {
						t.Fatalf("ReadRows: value %d (row %d) = %g (%08x), want %g", i, i/width, got[i], math.Float32bits(got[i]), all[i])
					}
					idx := []float32{34, 5, 5, 0, 12, 39, 34, -3, 1e6}
					rowsOf := []int{34, 5, 5, 0, 12, 39, 34, 0, 39} // clamped
					y := h.Gather(dev.Tensor(idx, len(idx)))
					if y.RequiresGrad() || !slices.Equal(y.Shape(), []int{len(idx), width}) {
						t.Fatalf("Gather gives %v (grad %t), want [%d %d] without gradient", y, y.RequiresGrad(), len(idx), width)
					}
					gv, err := y.Data()
					if err != nil {
						t.Fatal(err)
					}
					var want []float32
					for _, k := range rowsOf {
						want = append(want, all[k*width:(k+1)*width]...)
					}
					if i := backendtest.FirstBitDiff(gv, want); i >= 0 {
						t.Fatalf("Gather: value %d (row %d of the table) = %g (%08x), want %g", i, rowsOf[i/width], gv[i], math.Float32bits(gv[i]), want[i])
					}
				})
			})
		}
	})
}

// The table's words cross Device.Close and the next upload bit for bit,
// signaling NaNs and subnormals as f32 words included: bf16 [1, +Inf] is
// the word 0x7f803f80, f16 [1, 0] is 0x00003c00.
func TestHalfTableCloseKeepsBits(t *testing.T) {
	inf := float32(math.Inf(1))
	eachDevice(t, func(t *testing.T, dev *Device) {
		halfTables(t, dev, 3, 2, func(t *testing.T, h *HalfTable) {
			vals := []float32{1, inf, 1, 0, -2, float32(math.Copysign(0, -1))}
			if err := h.WriteRows(0, vals); err != nil {
				t.Fatal(err)
			}
			if err := dev.Close(); err != nil {
				t.Fatal(err)
			}
			if h.OnDevice() || !strings.HasSuffix(h.String(), "(host)") {
				t.Fatalf("after Close: %v, OnDevice %t", h, h.OnDevice())
			}
			got, err := h.Gather(dev.Tensor([]float32{0, 1, 2}, 3)).Data()
			if err != nil {
				t.Fatal(err)
			}
			if i := backendtest.FirstBitDiff(got, vals); i >= 0 {
				t.Fatalf("after Close and a gather: %v, want %v", got, vals)
			}
			if err := dev.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := h.ReadRows(0, 3); err != nil || backendtest.FirstBitDiff(got, vals) >= 0 {
				t.Fatalf("ReadRows on the host copy: %v, %v; want %v", got, err, vals)
			}
		})
	})
}

// A table takes half an f32 table's memory: EstimateMemory counts its
// words as the step's input.
func TestHalfTableMemory(t *testing.T) {
	dev := open(t)
	const rows, width = 1000, 64
	h, err := dev.NewHalfTable(rows, width, PrecisionF16)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	f, err := dev.Zeros(rows, width)
	if err != nil {
		t.Fatal(err)
	}
	idx := dev.Tensor([]float32{1, 2, 3}, 3)
	estimate := func(gather func() *Tensor) MemoryEstimate {
		e, err := dev.EstimateMemory(func() error { gather(); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e16 := estimate(func() *Tensor { return h.Gather(idx) })
	e32 := estimate(func() *Tensor { return Gather(f, idx) })
	if h.Bytes() != 2*rows*width || e16.Inputs != uint64(h.Bytes())+12 || e32.Inputs != 4*rows*width+12 {
		t.Fatalf("Bytes %d; step inputs %d (f16 table) and %d (f32), want %d and %d", h.Bytes(), e16.Inputs, e32.Inputs, 2*rows*width+12, 4*rows*width+12)
	}
	if e16.Outputs != e32.Outputs {
		t.Errorf("the gathered f32 rows: %d bytes from the f16 table, %d from the f32", e16.Outputs, e32.Outputs)
	}
	odd, err := dev.NewHalfTable(rows, 7, PrecisionBF16)
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Release()
	if odd.Bytes() != 4*rows*4 {
		t.Errorf("width 7: %d bytes, want %d (4 words a row)", odd.Bytes(), 4*rows*4)
	}
}

// A captured step that gathers from the table reads the rows written
// between its replays, without recording again; a Checkpoint recomputes a
// gather; eager mode runs one.
func TestHalfTableInSteps(t *testing.T) {
	dev := open(t)
	h, err := dev.NewHalfTable(4, 3, PrecisionF16)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if err := h.WriteRows(0, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}); err != nil {
		t.Fatal(err)
	}
	c := NewCapture(dev, func(in []*Tensor) []*Tensor { return []*Tensor{SumAxis(h.Gather(in[0]), 1, false)} })
	for k, want := range [][]float32{{33, 6}, {33, 0.75}, {30.5, 0.75}} {
		switch k {
		case 1:
			h.WriteRows(0, []float32{0.5, 0.25, 0})
		case 2:
			h.WriteRows(3, []float32{10, 10, 10.5})
		}
		got, err := c.Call(In([]float32{3, 0}, 2))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0], want) {
			t.Fatalf("replay %d: %v, want %v", k, got[0], want)
		}
	}
	if c.Records() != 1 {
		t.Errorf("%d recordings, want 1", c.Records())
	}

	// Checkpoint: the backward recomputes the gather inside the segment.
	x := dev.Param([]float32{1, -1, 2}, 3)
	idx := dev.Tensor([]float32{1, 3}, 2)
	var grads [2][]float32
	for k, ckpt := range []bool{false, true} {
		f := func(x *Tensor) *Tensor { return Mul(h.Gather(idx), Tanh(x)) }
		var y *Tensor
		if ckpt {
			y = Checkpoint(f, x)
		} else {
			y = f(x)
		}
		if err := Sum(y).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := x.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		grads[k] = g
		x.ZeroGrad()
	}
	if !slices.Equal(grads[0], grads[1]) {
		t.Errorf("gradient through a gather: %v plain, %v checkpointed", grads[0], grads[1])
	}

	dev.SetEager(true)
	defer dev.SetEager(false)
	if got, err := h.Gather(dev.Tensor([]float32{2}, 1)).Data(); err != nil || !slices.Equal(got, []float32{7, 8, 9}) {
		t.Errorf("eager gather: %v, %v", got, err)
	}
}

// Errors name the function and the values; a released table fails every
// use with ErrReleased; a format the device cannot read back is refused
// with ErrUnsupported.
func TestHalfTableErrors(t *testing.T) {
	dev := open(t)
	h, err := dev.NewHalfTable(10, 3, PrecisionBF16)
	if err != nil {
		t.Fatal(err)
	}
	if s := h.String(); s != "HalfTable[10 3] bf16 (device)" {
		t.Errorf("String = %q", s)
	}
	panics := func(f func()) (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		f()
		return ""
	}
	other := open(t)
	cases := []struct {
		name string
		err  func() error
		want string
	}{
		{"no rows", func() error { _, err := dev.NewHalfTable(0, 3, PrecisionF16); return err },
			"core.Device.NewHalfTable: rows 0 and width 3 must be positive"},
		{"f32", func() error { _, err := dev.NewHalfTable(2, 3, PrecisionF32); return err },
			"core.Device.NewHalfTable: precision f32 is not a 16-bit format (an f32 table is Device.Zeros)"},
		{"unknown precision", func() error { _, err := dev.NewHalfTable(2, 3, Precision(7)); return err },
			"core.Device.NewHalfTable: unknown precision 7"},
		{"too large", func() error { _, err := dev.NewHalfTable(1<<40, 1<<20, PrecisionF16); return err },
			"core.Device.NewHalfTable(1099511627776, 1048576, f16): [1099511627776 524288] words: shape"},
		{"partial row", func() error { return h.WriteRows(0, make([]float32, 4)) },
			"core.HalfTable.WriteRows: 4 values are not whole rows of width 3"},
		{"write past the end", func() error { return h.WriteRows(9, make([]float32, 6)) },
			"core.HalfTable.WriteRows: rows 9..10 are outside the table of 10 rows"},
		{"read at a negative row", func() error { _, err := h.ReadRows(-1, 1); return err },
			"core.HalfTable.ReadRows: rows -1..-1 are outside the table of 10 rows"},
		{"read of negative length", func() error { _, err := h.ReadRows(0, -2); return err },
			"core.HalfTable.ReadRows: -2 rows, must be non-negative"},
	}
	for _, c := range cases {
		if err := c.err(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ name, want, got string }{
		{"2-D indices", "core.HalfTable.Gather: indices of shape [1 2], want 1-D", panics(func() { h.Gather(dev.Tensor([]float32{0, 1}, 1, 2)) })},
		{"other device", "core.HalfTable.Gather: indices on device cpu#", panics(func() { h.Gather(other.Tensor([]float32{0}, 1)) })},
		{"nil", "core.HalfTable.Gather: the index tensor is nil", panics(func() { h.Gather(nil) })},
	} {
		if !strings.HasPrefix(c.got, c.want) {
			t.Errorf("%s: panic %q, want %q", c.name, c.got, c.want)
		}
	}

	pending := h.Gather(dev.Tensor([]float32{0}, 1))
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if got, err := pending.Data(); err != nil || !slices.Equal(got, []float32{0, 0, 0}) {
		t.Errorf("a gather recorded before Release: %v, %v", got, err)
	}
	if err := h.WriteRows(0, []float32{1, 2, 3}); !errors.Is(err, ErrReleased) || err.Error() != "core.HalfTable.WriteRows: the table: tensor was released" {
		t.Errorf("WriteRows after Release: %v", err)
	}
	if _, err := h.ReadRows(0, 1); !errors.Is(err, ErrReleased) {
		t.Errorf("ReadRows after Release: %v", err)
	}
	func() {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrReleased) {
				t.Errorf("Gather after Release: panic %v, want ErrReleased", err)
			}
		}()
		h.Gather(dev.Tensor([]float32{0}, 1))
	}()
	if err := h.Release(); err != nil || h.String() != "HalfTable[10 3] bf16 (released)" {
		t.Errorf("Release again: %v; %v", err, h)
	}

	// A device that cannot convert bf16 back (ggml-vulkan's caps, here
	// set on a cpu device) refuses a bf16 table and takes an f16 one.
	dev.lock()
	dev.caps.Unsupported = []backend.Op{backend.OpRoundBF16, backend.OpUnpackBF16}
	dev.caps.Name = "no-bf16"
	dev.mu.Unlock()
	_, err = dev.NewHalfTable(10, 3, PrecisionBF16)
	if !errors.Is(err, ErrUnsupported) || err.Error() != "core.Device.NewHalfTable(10, 3, bf16): no-bf16 cannot read bf16 values back (unpack_bf16 is in its Caps.Unsupported)" {
		t.Errorf("bf16 on a device without unpack_bf16: %v", err)
	}
	if _, err := dev.SetActivationStorage(PrecisionBF16); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetActivationStorage(bf16) on a device without unpack_bf16: %v, want ErrUnsupported", err)
	}
	if f, err := dev.NewHalfTable(10, 3, PrecisionF16); err != nil {
		t.Errorf("f16 on the same device: %v", err)
	} else {
		f.Release()
	}
}
