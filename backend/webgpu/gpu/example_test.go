package gpu_test

import (
	"fmt"

	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// An Info says what the adapter is, as Caps.Device shows it.
func ExampleInfo_String() {
	info := gpu.Info{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Driver: "Mesa 22.3.6", API: "Vulkan", Kind: "software (CPU)"}
	fmt.Println(info)
	// Output: llvmpipe (LLVM 15.0.6, 256 bits) (Mesa 22.3.6) via Vulkan, software (CPU)
}

// BytesOf views words as the bytes a device buffer is written with.
func ExampleBytesOf() {
	fmt.Println(gpu.BytesOf([]uint32{1, 0x0100}))
	// Output: [1 0 0 0 0 1 0 0]
}
