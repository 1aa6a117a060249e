package buffer

import (
	"fmt"
	"sync"

	"github.com/ag-go/ag/core"
)

// Buffer is a table of Capacity() records of Width() float32s kept on a
// device without a gradient: written in place with Write, read back with
// Read, and read by record index inside graphs with GetRows and GetRowsOf.
// Typical use is a replay buffer, one record per transition.
//
// Writes are synchronous: when Write returns, the data is on the device and
// every graph run afterwards reads it. Pending graph nodes that read the
// buffer and were recorded before the write run first, so they see the old
// value.
type Buffer struct {
	dev      *core.Device
	width    int
	capacity int
	mu       sync.Mutex   // guards table: a Buffer is safe for concurrent use
	table    *core.Tensor // [capacity, width]; nil once freed
}

// New allocates a zero-filled buffer of capacity records of width floats on
// dev. It fails with ErrTooLarge when the buffer needs more than 85% of the
// free memory the device reports (drivers' estimates are approximate, so a
// margin is kept) or more than the device's largest allocation.
func New(dev *core.Device, width, capacity int) (*Buffer, error) {
	if dev == nil {
		return nil, fmt.Errorf("buffer.New: the device is nil")
	}
	if width < 1 || capacity < 1 {
		return nil, fmt.Errorf("buffer.New: width %d and capacity %d must be positive", width, capacity)
	}
	if err := checkFits(dev, width, capacity); err != nil {
		return nil, err
	}
	// Zeros allocates at once and zero-fills on the device: no upload.
	t, err := dev.Zeros(capacity, width)
	if err != nil {
		return nil, fmt.Errorf("buffer.New: the device could not allocate %.1f MB: %w", mb(bytesOf(width, capacity)), err)
	}
	return &Buffer{dev: dev, width: width, capacity: capacity, table: t}, nil
}

// Width is the number of floats per record.
func (b *Buffer) Width() int { return b.width }

// Capacity is the number of records.
func (b *Buffer) Capacity() int { return b.capacity }

// Free releases the device memory now instead of at garbage collection.
// Pending graph nodes that read the buffer run first. Every later use of the
// buffer fails with ErrFreed, Free included.
func (b *Buffer) Free() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.table == nil {
		return errorf(ErrFreed, "buffer.Free: the buffer has been freed")
	}
	if err := b.table.Release(); err != nil {
		return fmt.Errorf("buffer.Free: pending work reading the buffer failed, nothing was freed: %w", err)
	}
	b.table = nil
	return nil
}

// String describes the buffer without syncing, like the seed's print:
// "<buffer> 3 x 10 f32 (device)", where the value is device, host (moved
// there by Device.Close until its next use) or freed.
func (b *Buffer) String() string {
	where := "freed"
	if t := b.current(); t != nil {
		where = "host"
		if onDevice(t) {
			where = "device"
		}
	}
	return fmt.Sprintf("<buffer> %d x %d f32 (%s)", b.width, b.capacity, where)
}

// live returns the table, or ErrFreed naming fn.
// A Free racing with another call makes that call's use of the table fail
// with core.ErrReleased, never touch freed memory.
func (b *Buffer) live(fn string) (*core.Tensor, error) {
	if b == nil {
		return nil, fmt.Errorf("buffer.%s: the buffer is nil", fn)
	}
	t := b.current()
	if t == nil {
		return nil, errorf(ErrFreed, "buffer.%s: the buffer has been freed", fn)
	}
	return t, nil
}

// current returns the table, nil once freed.
func (b *Buffer) current() *core.Tensor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.table
}
