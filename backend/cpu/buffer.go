package cpu

import (
	"errors"
	"fmt"

	"github.com/ag-go/ag/backend"
)

// Errors callers may branch on.
var (
	// ErrFreed is returned when a freed buffer is used.
	ErrFreed = errors.New("cpu: buffer freed")
	// ErrOutOfMemory is returned by Alloc for more than the free host memory.
	ErrOutOfMemory = errors.New("cpu: out of memory")
)

// largeAlloc is the size (in float32s, 64 MiB) from which Alloc checks the
// host's free memory first.
const largeAlloc = 1 << 24

// Buffer is the CPU backend's device memory: a Go slice of float32.
type Buffer struct {
	data  []float32
	freed bool
}

// Len returns the number of float32s the buffer holds (0 once freed).
func (b *Buffer) Len() int { return len(b.data) }

// Data exposes the buffer's memory without a copy, for tests and for code
// that knows it runs on this backend. The slice is valid until Free.
func (b *Buffer) Data() []float32 { return b.data }

// asBuffer checks that b is a live buffer of this backend.
func asBuffer(fn string, b backend.Buffer) (*Buffer, error) {
	cb, ok := b.(*Buffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("cpu.%s: buffer %T is not a cpu buffer", fn, b)
	}
	if cb.freed {
		return nil, fmt.Errorf("cpu.%s: %w", fn, ErrFreed)
	}
	return cb, nil
}

// Alloc returns a zero-filled buffer of n float32s.
func (c *CPU) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu.Alloc(%d): negative size", n)
	}
	// A Go allocation that cannot be met kills the process; refuse large
	// requests that exceed the memory the host reports instead.
	if n >= largeAlloc {
		if free, _, err := hostMemory(); err == nil && uint64(n) > free/4 {
			return nil, fmt.Errorf("cpu.Alloc(%d): %d float32s exceed the %d bytes of free host memory: %w", n, n, free, ErrOutOfMemory)
		}
	}
	return &Buffer{data: make([]float32, n)}, nil
}

// Free drops the buffer's memory; it is garbage collected.
func (c *CPU) Free(b backend.Buffer) {
	if cb, ok := b.(*Buffer); ok && cb != nil {
		cb.data, cb.freed = nil, true
	}
}

// TakeHost frees b and hands its memory to the caller
// (backend.HostTaker): a Go slice, it needs no copy to live on.
func (c *CPU) TakeHost(b backend.Buffer, n int) ([]float32, bool) {
	cb, ok := b.(*Buffer)
	if !ok || cb == nil || cb.freed || n < 0 || n > len(cb.data) {
		return nil, false
	}
	data := cb.data[:n:n]
	cb.data, cb.freed = nil, true
	return data, true
}

// Write copies src into b starting at element off.
func (c *CPU) Write(b backend.Buffer, off int, src []float32) error {
	cb, err := asBuffer("Write", b)
	if err != nil {
		return err
	}
	if off < 0 || off > len(cb.data) || len(src) > len(cb.data)-off {
		return fmt.Errorf("cpu.Write: %d values at offset %d outside buffer of %d", len(src), off, len(cb.data))
	}
	copy(cb.data[off:], src)
	return nil
}

// Read copies len(dst) elements of b starting at off into dst.
func (c *CPU) Read(b backend.Buffer, off int, dst []float32) error {
	cb, err := asBuffer("Read", b)
	if err != nil {
		return err
	}
	if off < 0 || off > len(cb.data) || len(dst) > len(cb.data)-off {
		return fmt.Errorf("cpu.Read: %d values at offset %d outside buffer of %d", len(dst), off, len(cb.data))
	}
	copy(dst, cb.data[off:])
	return nil
}
