// Package native runs ag's backend IR on ggml through cgo: ggml's CPU
// backend ("ggml-cpu") and its Vulkan backend ("ggml-vulkan").
//
// It needs ggml built as static libraries (backend/native/ggml/build.sh,
// called by `make vulkan`) and the build tag ggml; the Makefile passes
// CGO_CFLAGS/CGO_LDFLAGS pointing at the built prefix. Without the tag the
// package still registers both drivers, as unavailable with a message that
// says how to enable them, so `ag devices` can tell the user.
//
// Import it for its side effect:
//
//	import _ "github.com/ag-go/ag/backend/native"
//
// Each Program is one ggml graph compute per Run: args are leaf tensors that
// Run points at the bound buffers, intermediates are planned once by ggml's
// graph allocator at Compile, and every node is checked with
// ggml_backend_supports_op at Compile (ggml's Vulkan backend computes
// garbage for unsupported ops instead of failing).
//
// Environment: ggml-vulkan skips CPU-type devices (lavapipe) unless
// GGML_VK_VISIBLE_DEVICES=0 selects one; Open sets GGML_VK_DISABLE_F16=1
// so f32 matmuls stay f32 (AG_GGML_VK_F16=1 keeps ggml's f16 tiles: faster,
// ~1e-3 relative error), and on lavapipe LP_NUM_THREADS=1 (see driver.go).
package native

// Driver names and their "auto" priorities (see backend.Register).
const (
	// VulkanName is the registry name of ggml's Vulkan backend.
	VulkanName = "ggml-vulkan"
	// CPUName is the registry name of ggml's CPU backend.
	CPUName = "ggml-cpu"
	// VulkanPriority ranks ggml-vulkan above webgpu (30) and the CPU backends.
	VulkanPriority = 40
	// CPUPriority ranks ggml-cpu above the pure-Go cpu backend (10).
	CPUPriority = 20
)
