package buffer

import "fmt"

// Write writes len(records)/Width() whole records at record offset..offset+k-1
// (0-based); the range must lie inside the buffer, so a ring buffer wraps with
// two writes. Pending graph nodes that read the buffer run first and see the
// old value; the write itself has completed when Write returns. With 16-bit
// storage (NewWithStorage) each value is rounded to the format on the host
// first, and half the bytes cross the bus.
func (b *Buffer) Write(offset int, records []float32) error {
	t, err := b.live("Write")
	if err != nil {
		return err
	}
	if len(records)%b.width != 0 {
		return fmt.Errorf("buffer.Write: %d values are not whole records of width %d", len(records), b.width)
	}
	k := len(records) / b.width
	if err := b.checkRange("Write", offset, k); err != nil {
		return err
	}
	if k == 0 {
		return nil
	}
	// core's WriteAt and WriteRows run the pending nodes that read the
	// table before writing, which is the ordering promised above.
	if t.half != nil {
		err = t.half.WriteRows(offset, records)
	} else {
		err = t.table.WriteAt(offset*b.width, records)
	}
	if err != nil {
		return fmt.Errorf("buffer.Write(%d, %d records): %w", offset, k, err)
	}
	return nil
}

// Read returns records offset..offset+k-1 as k*Width() values: with 16-bit
// storage the stored (rounded) values, converted to f32 on the host. It is
// a sync point: pending work on the device runs first. Reading a large
// buffer in parts bounds the host memory used.
func (b *Buffer) Read(offset, k int) ([]float32, error) {
	t, err := b.live("Read")
	if err != nil {
		return nil, err
	}
	if k < 0 {
		return nil, errorf(ErrOutOfRange, "buffer.Read: k = %d records, must be non-negative", k)
	}
	if err := b.checkRange("Read", offset, k); err != nil {
		return nil, err
	}
	if k == 0 {
		return []float32{}, nil
	}
	var v []float32
	if t.half != nil {
		v, err = t.half.ReadRows(offset, k)
	} else {
		v, err = t.table.ReadAt(offset*b.width, k*b.width)
	}
	if err != nil {
		return nil, fmt.Errorf("buffer.Read(%d, %d): %w", offset, k, err)
	}
	return v, nil
}

// checkRange checks that records offset..offset+k-1 lie inside the buffer,
// with the seed's messages.
func (b *Buffer) checkRange(fn string, offset, k int) error {
	switch {
	case offset < 0:
		return errorf(ErrOutOfRange, "buffer.%s: offset %d must be non-negative", fn, offset)
	case k == 0 && offset > b.capacity:
		return errorf(ErrOutOfRange, "buffer.%s: offset %d is outside the buffer (capacity %d)", fn, offset, b.capacity)
	case offset > b.capacity-k:
		return errorf(ErrOutOfRange, "buffer.%s: records %d..%d are outside the buffer (capacity %d)", fn, offset, offset+k-1, b.capacity)
	}
	return nil
}
