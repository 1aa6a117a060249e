//go:build !js

package gpu

/*
#include <stdint.h>
#include <string.h>

// The part of wgpu-native's wgpu.h (as github.com/cogentcore/webgpu v0.23.0
// ships it, lib/wgpu.h and lib/webgpu.h) that creates an instance with
// chosen backends: WGPUChainedStruct, WGPUInstanceDescriptor and
// WGPUInstanceExtras, whose enums and flags are all 32 bits.
typedef struct ag_wgpu_chain {
	const struct ag_wgpu_chain *next;
	uint32_t sType;
} ag_wgpu_chain;
typedef struct {
	const ag_wgpu_chain *nextInChain;
} ag_wgpu_instance_desc;
typedef struct {
	ag_wgpu_chain chain;
	uint32_t backends, flags, dx12ShaderCompiler, gles3MinorVersion;
	const char *dxilPath, *dxcPath;
} ag_wgpu_instance_extras;
enum { AG_WGPU_STYPE_INSTANCE_EXTRAS = 0x00030006 };
void *wgpuCreateInstance(const ag_wgpu_instance_desc *descriptor);

// ag_wgpu_create_instance creates an instance on the given backends, every
// other field zero (the defaults).
static void *ag_wgpu_create_instance(uint32_t backends) {
	ag_wgpu_instance_extras extras;
	memset(&extras, 0, sizeof extras);
	extras.chain.sType = AG_WGPU_STYPE_INSTANCE_EXTRAS;
	extras.backends = backends;
	ag_wgpu_instance_desc desc = {&extras.chain};
	return wgpuCreateInstance(&desc);
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// wgpu.Instance is struct{ ref C.WGPUInstance } in v0.23.0: one pointer.
// These fail to compile if its size ever differs.
var (
	_ [unsafe.Sizeof(wgpu.Instance{}) - unsafe.Sizeof(uintptr(0))]struct{}
	_ [unsafe.Sizeof(uintptr(0)) - unsafe.Sizeof(wgpu.Instance{})]struct{}
)

// createInstance is wgpu.CreateInstance with the backends set. The binding's
// own CreateInstance(&InstanceDescriptor{...}) cannot be used: it fills its
// WGPUInstanceExtras from C.malloc without zeroing it, so flags and
// gles3MinorVersion are garbage (measured: wgpu-native panicked "Unknown
// gles3 minor version: 1819637346" and aborted the process). Here the
// struct is zeroed in C, and the instance is wrapped the way the binding
// wraps its own.
func createInstance(backends wgpu.InstanceBackend) (*wgpu.Instance, error) {
	ref := C.ag_wgpu_create_instance(C.uint32_t(backends))
	if ref == nil {
		return nil, errors.New("webgpu: wgpuCreateInstance returned no instance")
	}
	type layout struct{ ref unsafe.Pointer }
	return (*wgpu.Instance)(unsafe.Pointer(&layout{ref})), nil
}
