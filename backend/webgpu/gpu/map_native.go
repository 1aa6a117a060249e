//go:build !js

package gpu

/*
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>

// The part of wgpu-native's webgpu.h (as github.com/cogentcore/webgpu v0.23.0
// ships it) that maps a buffer and scopes its validation errors; the
// enums and flags are 32 bits.
typedef void (*ag_wgpu_map_cb)(uint32_t status, void *userdata);
typedef void (*ag_wgpu_error_cb)(uint32_t type, const char *message, void *userdata);
void wgpuBufferMapAsync(void *buffer, uint32_t mode, size_t offset, size_t size, ag_wgpu_map_cb callback, void *userdata);
void wgpuDevicePushErrorScope(void *device, uint32_t filter);
void wgpuDevicePopErrorScope(void *device, ag_wgpu_error_cb callback, void *userdata);

// ag_map is one mapping's state in C memory: status is -1 until wgpu's
// callback writes it; error holds a validation error's message.
typedef struct {
	volatile int32_t status;
	char error[256];
} ag_map;

static void ag_map_done(uint32_t status, void *userdata) {
	((ag_map *)userdata)->status = (int32_t)status;
}

static void ag_map_error(uint32_t type, const char *message, void *userdata) {
	ag_map *m = userdata;
	if (type == 0) { // WGPUErrorType_NoError
		return;
	}
	snprintf(m->error, sizeof m->error, "%s", message ? message : "validation error");
}

// ag_map_async asks for a read mapping of [offset, offset+size) of buffer
// with the state m, and says in m->error when the request itself failed
// validation (wgpu's error scope calls back before it returns).
static void ag_map_async(void *device, void *buffer, size_t offset, size_t size, ag_map *m) {
	m->status = -1;
	m->error[0] = 0;
	wgpuDevicePushErrorScope(device, 0); // WGPUErrorFilter_Validation
	wgpuBufferMapAsync(buffer, 1, offset, size, ag_map_done, m); // WGPUMapMode_Read
	wgpuDevicePopErrorScope(device, ag_map_error, m);
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// wgpu.Buffer is struct{ deviceRef C.WGPUDevice; ref C.WGPUBuffer } in
// v0.23.0: two pointers. These fail to compile if its size ever differs.
var (
	_ [unsafe.Sizeof(wgpu.Buffer{}) - 2*unsafe.Sizeof(uintptr(0))]struct{}
	_ [2*unsafe.Sizeof(uintptr(0)) - unsafe.Sizeof(wgpu.Buffer{})]struct{}
)

// mapping is a read mapping in flight (startMap), its state in C memory.
//
// It replaces the binding's Buffer.MapAsync, which hands wgpu the address
// of a Go variable holding the callback's cgo.Handle: nothing in Go keeps
// that variable alive once MapAsync returns, so a collection during the
// wait for the mapping can free it and the callback then reads whatever
// was allocated there. Under dp's TestDeviceClosed (devices closed from
// another goroutine mid-step, the collector busy) that crashed the test
// process about once in 40 runs: "runtime/cgo: misuse of an invalid
// Handle" inside Device.Poll, and once "Buffer ... is still mapped" at the
// next submit (a callback that ran someone else's handle). Here wgpu's
// callback writes a status into C memory that Go polls; no Go pointer is
// held by C.
type mapping struct {
	m *C.ag_map
}

// startMap asks for a read mapping of the first n bytes of b.
func startMap(b *wgpu.Buffer, n uint64) (mapping, error) {
	refs := (*[2]unsafe.Pointer)(unsafe.Pointer(b)) // deviceRef, ref
	m := (*C.ag_map)(C.malloc(C.size_t(unsafe.Sizeof(C.ag_map{}))))
	C.ag_map_async(refs[0], refs[1], 0, C.size_t(n), m)
	if m.error[0] != 0 {
		err := errors.New("MapAsync: " + C.GoString(&m.error[0]))
		// wgpu still calls back for a refused request (with an error
		// status), so the state stays allocated unless it already has.
		if m.status >= 0 {
			C.free(unsafe.Pointer(m))
		}
		return mapping{}, err
	}
	return mapping{m}, nil
}

// done reports whether wgpu has called back (Device.Poll runs callbacks).
func (p mapping) done() bool { return p.m.status >= 0 }

// status is the callback's status and frees the state; call it once, after
// done.
func (p mapping) status() wgpu.BufferMapAsyncStatus {
	s := wgpu.BufferMapAsyncStatus(p.m.status)
	C.free(unsafe.Pointer(p.m))
	return s
}
