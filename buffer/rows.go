package buffer

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

// maxExactIndex is 2^24: f32 holds every whole number below it exactly, and
// the device receives indices as f32.
const maxExactIndex = 1 << 24

// GetRows selects records of the buffer by 0-based index, as a device
// operation: only the indices cross the bus. The result is a
// [len(idx), Width()] f32 tensor without gradient (with 16-bit storage,
// the stored values converted on the device), recorded lazily like every
// op and usable as an input to any op. Indices may repeat. Each is checked
// here: an index outside 0..Capacity()-1 (or from 2^24 on, which f32
// cannot hold exactly) is an ErrOutOfRange error.
//
// Inside a step that repeats, GetRows does not cause recompiling: the indices
// are an input of the program, so a new index vector of the same length
// reuses it (the length is part of the shape), and the program reads the
// buffer's current value, so it sees every Write made before it runs.
func (b *Buffer) GetRows(idx []int) (*core.Tensor, error) {
	t, err := b.live("GetRows")
	if err != nil {
		return nil, err
	}
	if len(idx) == 0 {
		return nil, errorf(ErrOutOfRange, "buffer.GetRows: idx is empty")
	}
	f := make([]float32, len(idx))
	for i, v := range idx {
		if v < 0 || v >= b.capacity {
			return nil, errorf(ErrOutOfRange, "buffer.GetRows: idx[%d] = %d, indices must be whole numbers in 0..%d", i, v, b.capacity-1)
		}
		if v >= maxExactIndex {
			return nil, errorf(ErrOutOfRange, "buffer.GetRows: idx[%d] = %d, indices from 2^24 on are not exact in f32", i, v)
		}
		f[i] = float32(v)
	}
	return b.gather(t, b.dev.Tensor(f, len(f))), nil
}

// GetRowsOf is GetRows for indices that are already a tensor on the
// buffer's device (for example computed by earlier ops), read in row-major
// order whatever its shape. They cannot be checked without a sync, so the
// device clamps each to 0..Capacity()-1 before the read (an index is rounded
// to the nearest whole number, NaN reads record 0): an index out of range
// reads the first or last record, never memory outside the buffer. Indices
// are exact below 2^24.
//
// Like the ops of package core, it panics on a programming error: an index
// tensor of another device, or a buffer already freed (the panic value is an
// error wrapping ErrFreed).
func (b *Buffer) GetRowsOf(idx *core.Tensor) *core.Tensor {
	t, err := b.live("GetRowsOf")
	if err != nil {
		panic(err)
	}
	if idx == nil {
		panic("buffer.GetRowsOf: the index tensor is nil")
	}
	if idx.Device() != b.dev {
		panic(fmt.Sprintf("buffer.GetRowsOf: indices on device %s, the buffer is on %s", idx.Device().Name(), b.dev.Name()))
	}
	var flat *core.Tensor
	b.dev.NoGrad(func() { flat = core.Reshape(idx, idx.Len()) })
	return b.gather(t, flat)
}

// gather records the get_rows node (with 16-bit storage, the get_rows and
// the conversion to f32). The node holds the table as its input, so a
// buffer collected while the node is pending keeps its memory until the
// node has run. It is recorded without gradient whatever the indices are.
func (b *Buffer) gather(t tables, idx *core.Tensor) *core.Tensor {
	if t.half != nil {
		return t.half.Gather(idx)
	}
	var out *core.Tensor
	b.dev.NoGrad(func() { out = core.Gather(t.table, idx) })
	return out
}
