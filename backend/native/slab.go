//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
)

// Small buffers (step inputs such as batch indices and hyperparameters, the
// loss) come and go every training step, and core frees them only when the
// Go garbage collector finds them. A ggml-vulkan buffer of its own costs a
// Vulkan allocation plus a clearing submit and wait; carving small buffers
// out of a few larger ggml buffers ("slabs") makes Alloc a list operation.
const (
	slabBytes    = 1 << 20 // one slab
	smallMax     = 16384   // floats: larger buffers get a ggml buffer of their own
	minChunk     = 256     // bytes: chunk sizes are powers of two from here
	slabEnv      = "AG_GGML_SLAB"
	numChunkSize = 17 // 256 B .. 16 MB classes (only up to 64 KB used)
)

// slabPool hands out chunks of slabs by size class. Chunk offsets are
// multiples of the chunk size (>= 256 B), so they meet ggml-vulkan's
// storage-buffer offset alignment.
type slabPool struct {
	slabs []C.ggml_backend_buffer_t
	cur   C.ggml_backend_buffer_t // slab being carved
	used  uintptr                 // bytes of cur handed out
	free  [numChunkSize][]chunk
}

type chunk struct {
	buf C.ggml_backend_buffer_t
	off uintptr // bytes from the slab's base
}

// chunkClass returns the size class of n floats and its byte size.
func chunkClass(n int) (int, uintptr) {
	class, size := 0, uintptr(minChunk)
	for size < uintptr(4*n) {
		class++
		size *= 2
	}
	return class, size
}

// useSlabs reports whether n floats come from a slab on this device.
func (d *device) useSlabs(n int) bool {
	return !d.isCPU && n <= smallMax && os.Getenv(slabEnv) != "0"
}

// get returns a chunk for n floats and whether its memory may hold old
// values (a reused chunk) rather than zeros (fresh slab memory).
func (s *slabPool) get(d *device, n int) (chunk, bool, error) {
	class, size := chunkClass(n)
	if l := s.free[class]; len(l) > 0 {
		c := l[len(l)-1]
		s.free[class] = l[:len(l)-1]
		return c, true, nil
	}
	if s.cur == nil || s.used+size > slabBytes {
		buf := C.ggml_backend_alloc_buffer(d.be, slabBytes)
		if buf == nil {
			return chunk{}, false, fmt.Errorf("out of device memory (%d-byte slab)", slabBytes)
		}
		C.ggml_backend_buffer_clear(buf, 0)
		s.slabs = append(s.slabs, buf)
		s.cur, s.used = buf, 0
	}
	c := chunk{buf: s.cur, off: s.used}
	s.used += size
	return c, false, nil
}

func (s *slabPool) put(n int, c chunk) {
	class, _ := chunkClass(n)
	s.free[class] = append(s.free[class], c)
}

func (s *slabPool) release() {
	for _, b := range s.slabs {
		C.ggml_backend_buffer_free(b)
	}
	*s = slabPool{}
}

// allocSmall makes a buffer of n floats in a slab chunk. Its contents must
// read as zeros: a reused chunk is marked dirty and zeroed lazily (see
// buffer.dirty).
func (d *device) allocSmall(n int) (*buffer, error) {
	c, dirty, err := d.slabs.get(d, n)
	if err != nil {
		return nil, err
	}
	ctx := C.ggml_init(C.struct_ggml_init_params{mem_size: C.size_t(C.ggml_tensor_overhead() + 256), no_alloc: true})
	if ctx == nil {
		d.slabs.put(n, c)
		return nil, fmt.Errorf("ggml_init failed")
	}
	t := C.ggml_new_tensor_1d(ctx, C.GGML_TYPE_F32, C.int64_t(n))
	if st := C.ag_tensor_alloc_at(c.buf, t, C.size_t(c.off)); st != C.GGML_STATUS_SUCCESS {
		C.ggml_free(ctx)
		d.slabs.put(n, c)
		return nil, fmt.Errorf("ggml_backend_tensor_alloc failed with status %d", int(st))
	}
	return &buffer{d: d, ctx: ctx, t: t, n: n, chunk: c, small: true, dirty: dirty}, nil
}

// clean zeroes b's device memory if it is dirty. Called with d.mu held.
func (b *buffer) clean() {
	if b.dirty {
		C.ggml_backend_tensor_memset(b.t, 0, 0, C.size_t(4*b.n))
		b.dirty = false
	}
}
