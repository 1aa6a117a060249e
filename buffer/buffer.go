package buffer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ag-go/ag/core"
)

// Buffer is a table of Capacity() records of Width() values kept on a
// device without a gradient: written in place with Write, read back with
// Read, and read by record index inside graphs with GetRows and GetRowsOf.
// Typical use is a replay buffer, one record per transition. The values
// are stored as f32 (New) or, in half the memory, as f16 or bf16
// (NewWithStorage); every read gives f32.
//
// Writes are synchronous: when Write returns, the data is on the device and
// every graph run afterwards reads it. Pending graph nodes that read the
// buffer and were recorded before the write run first, so they see the old
// value.
type Buffer struct {
	dev      *core.Device
	width    int
	capacity int
	storage  core.Precision
	mu       sync.Mutex // guards the tables: a Buffer is safe for concurrent use
	tables
}

// tables is where the records live: table for f32 storage, half for f16
// and bf16; both nil once freed.
type tables struct {
	table *core.Tensor    // [capacity, width]
	half  *core.HalfTable // capacity rows of width values
}

// New allocates a zero-filled buffer of capacity records of width floats on
// dev, stored as f32. It fails with ErrTooLarge when the buffer needs more
// than 85% of the free memory the device reports (drivers' estimates are
// approximate, so a margin is kept) or more than the device's largest
// allocation.
func New(dev *core.Device, width, capacity int) (*Buffer, error) {
	return newBuffer("New", dev, width, capacity, core.PrecisionF32)
}

// NewWithStorage is New with the records stored on the device as storage:
// core.PrecisionF32 (New's), or core.PrecisionF16 or core.PrecisionBF16,
// which take half the memory - 2 bytes a value, a record padded to whole
// 4-byte words (an odd width takes one value more) - so twice the records
// fit the device. Write rounds every value to the format on the host (to
// nearest, ties to even; see core.HalfTable): f16 keeps 11 significant
// bits and magnitudes up to 65504 (from 65520 on a value becomes ±Inf),
// bf16 keeps 8 significant bits and f32's range. Read, GetRows and
// GetRowsOf give the stored values as f32 exactly; GetRows converts them
// on the device, so only the indices cross the bus.
//
// The name says what the precision applies to: the buffer's storage, as
// core.Device.SetActivationStorage's does, not the arithmetic of what
// reads it. A device that cannot convert the format back to f32 (bf16 on
// ggml-vulkan) is an error wrapping core.ErrUnsupported: pick another
// format, never a silent fallback.
func NewWithStorage(dev *core.Device, width, capacity int, storage core.Precision) (*Buffer, error) {
	return newBuffer("NewWithStorage", dev, width, capacity, storage)
}

func newBuffer(fn string, dev *core.Device, width, capacity int, storage core.Precision) (*Buffer, error) {
	if dev == nil {
		return nil, fmt.Errorf("buffer.%s: the device is nil", fn)
	}
	if width < 1 || capacity < 1 {
		return nil, fmt.Errorf("buffer.%s: width %d and capacity %d must be positive", fn, width, capacity)
	}
	if storage < core.PrecisionF32 || storage > core.PrecisionBF16 {
		return nil, fmt.Errorf("buffer.%s: unknown storage precision %d", fn, int(storage))
	}
	if err := checkFits(fn, dev, width, capacity, storage); err != nil {
		return nil, err
	}
	b := &Buffer{dev: dev, width: width, capacity: capacity, storage: storage}
	var err error
	if storage == core.PrecisionF32 {
		// Zeros allocates at once and zero-fills on the device: no upload.
		b.table, err = dev.Zeros(capacity, width)
	} else {
		b.half, err = dev.NewHalfTable(capacity, width, storage)
		if errors.Is(err, core.ErrUnsupported) {
			return nil, fmt.Errorf("buffer.%s: %w", fn, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("buffer.%s: the device could not allocate %.1f MB: %w", fn, mb(bytesOf(width, capacity, storage)), err)
	}
	return b, nil
}

// Width is the number of values per record.
func (b *Buffer) Width() int { return b.width }

// Capacity is the number of records.
func (b *Buffer) Capacity() int { return b.capacity }

// Storage is how the values are stored on the device: core.PrecisionF32,
// PrecisionF16 or PrecisionBF16.
func (b *Buffer) Storage() core.Precision { return b.storage }

// Bytes is the device memory the records take: 4*Width()*Capacity() for
// f32 storage, 4*ceil(Width()/2)*Capacity() for f16 and bf16.
func (b *Buffer) Bytes() int64 { return int64(bytesOf(b.width, b.capacity, b.storage)) }

// Free releases the device memory now instead of at garbage collection.
// Pending graph nodes that read the buffer run first. Every later use of the
// buffer fails with ErrFreed, Free included.
func (b *Buffer) Free() error {
	if b == nil { // as Write, Read and GetRows do; it was a nil dereference
		return fmt.Errorf("buffer.Free: the buffer is nil")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	switch {
	case b.table != nil:
		err = b.table.Release()
	case b.half != nil:
		err = b.half.Release()
	default:
		return errorf(ErrFreed, "buffer.Free: the buffer has been freed")
	}
	if err != nil {
		return fmt.Errorf("buffer.Free: pending work reading the buffer failed, nothing was freed: %w", err)
	}
	b.tables = tables{}
	return nil
}

// String describes the buffer without syncing, like the seed's print:
// "<buffer> 3 x 10 f32 (device)", with the storage (f32, f16 or bf16)
// and where the value is: device, host (moved there by Device.Close until
// its next use) or freed.
func (b *Buffer) String() string {
	where := "freed"
	if t := b.current(); t != (tables{}) {
		where = "host"
		if onDevice(t) {
			where = "device"
		}
	}
	return fmt.Sprintf("<buffer> %d x %d %v (%s)", b.width, b.capacity, b.storage, where)
}

// live returns the tables, or ErrFreed naming fn.
// A Free racing with another call makes that call's use of the table fail
// with core.ErrReleased, never touch freed memory.
func (b *Buffer) live(fn string) (tables, error) {
	if b == nil {
		return tables{}, fmt.Errorf("buffer.%s: the buffer is nil", fn)
	}
	t := b.current()
	if t == (tables{}) {
		return tables{}, errorf(ErrFreed, "buffer.%s: the buffer has been freed", fn)
	}
	return t, nil
}

// current returns the tables, zero once freed.
func (b *Buffer) current() tables {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tables
}
