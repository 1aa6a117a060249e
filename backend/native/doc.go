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
// garbage for unsupported ops instead of failing). An output whose arg no
// node reads and no other output writes is computed straight into the arg's
// buffer (bound at Run like the args read); the rest are copied at the end.
//
// Speed on a GPU (measured on an H200, see tune.go and slab.go): small
// buffers are chunks of shared slabs (a Vulkan allocation per step input
// cost ~0.25 ms each); matmuls whose result has too few 128x128 tiles to
// fill the GPU are split into a batch of row blocks so that ggml-vulkan
// picks smaller tiles, and ggml-vulkan splits K from k >= 512 where the
// tiles fill less than half the SMs (patches/0008; ggml's own rule starts
// at 2048); long sums run in two stages; transposed copies and clamped
// indices are made once per source; a clamp or ReLU is one node where the
// device's clamp keeps NaN (ggml built with patches/0004, checked on the
// device at Open), five otherwise; [y > 0] is one step where the device's
// step is ggml's (patches/0006); and ReLU's gradient mask is one node where
// the device's clamp has the sign step (patches/0007), three otherwise.
// AdamW's 8th hyperparameter, the gradient's scale (gradient clipping), is
// read by ggml's opt_step_adamw itself on both devices (patches/0009).
// A maximum along an axis is pooled in place on ggml-vulkan, its NaN test
// an average pool, never a sum_rows of millions of short rows (a workgroup
// each); ggml-vulkan's f32 get_rows runs one invocation per element, not a
// 512-lane workgroup per row (patches/0011: keep's rows of one element).
// A pool over a long axis (a maximum, a bias gradient's column sums) goes
// in windows of 16 first, not one invocation per result looping over the
// axis. GELU's gradient is one node where the device's silu_back has the
// GELU mode of patches/0012 (checked at Open), 13 otherwise. Layer norm
// is one node where the device's norm takes two passes, and its gradient
// one where its rms_norm_back has the layer-norm mode (patches/0013, both
// checked at Open); else the rows are centred by a mean and a subtraction
// first (one-pass variance cancels far from 0). Under f16
// matmul precision a round's f16 cast is what its products read, and its
// cast back to f32 is made only where another node reads it. On a GPU,
// each f32 product of at least 256^3 multiply-adds (M and N multiples of
// 4) is timed, the first time a Compile meets its shape, on ggml's mul_mat
// and on ag's own matmul (patches/0019, checked at Open, see vkmatmul.go
// and vkmatmul_tune.go; A read as stored and as a transposed copy, K in
// more parts where few tiles run), and runs on the fastest: ag's reads A contiguous
// along M or K and B along N, where ggml's wants both along K (transposed
// copies of a linear layer's weights and activations), and which wins
// depends on the GPU and the shape. AG_GGML_LOG=info prints each timing.
//
// On ggml-cpu, whose mul_mat needs both operands contiguous along K, two
// custom ops (ag_ggml.c) replace ggml's slow paths: A^T B (weight
// gradients) runs a 6x16 register-tiled kernel with no transposed copies,
// and the remaining transposed operands are copied in 8x8 tiles instead of
// ggml's element-wise CONT. Attention is a third custom op there
// (ag_attention: exact to ir.go's special values, which ggml's flash
// attention is not); ggml-vulkan runs ggml's flash attention (attention.go).
// Programs implement backend.NodeTimer through backend.NodeClock (ggml-cpu:
// each kernel clocked inside the real compute; Vulkan: calibration runs of
// one graph compute per ggml node).
//
// Environment: ggml-vulkan skips CPU-type devices (lavapipe) unless
// GGML_VK_VISIBLE_DEVICES=0 selects one; Open sets GGML_VK_DISABLE_F16=1
// so f32 matmuls stay f32 (AG_GGML_VK_F16=1 keeps ggml's f16 tiles: on an
// H200 without matrix cores no faster, ~5e-5 relative error instead of
// ~1e-7), and on lavapipe LP_NUM_THREADS=1 (see driver.go). `make vulkan`
// on a machine whose Vulkan GPU offers VK_KHR_cooperative_matrix builds ggml
// with its tensor-core (cooperative-matrix) shaders (ggml/build.sh,
// AG_GGML_COOPMAT=auto; 1 or 0 forces it either way): f16-precision
// matmuls use them on a
// device that has them, f32 ones and flash attention stay on the fp32
// shaders (which GGML_VK_DISABLE_F16 alone would not ensure:
// ggml/patches/*.coopmat.patch). For experiments: AG_GGML_MM_ROWS (0: never
// split matmuls, a number: that many rows per block), AG_GGML_MATMUL (tune,
// the default on a GPU: timed as above; ag: every f32 product ag's kernel
// takes on it; ggml, the default on a software device: none; another
// value fails Open; ag or ggml also make the pick, and with it the order
// of f32 sums, the same in every process), AG_GGML_MATMUL_A=copy (the kernel reads A stored [M, K]
// as a transposed copy), AG_GGML_MATMUL_SPLIT (T,K: split K until T tiles
// run, parts at least K deep), AG_GGML_ATTN (flash or
// composite: attention's lowering, see attention.go), AG_GGML_SLAB=0 (a ggml
// buffer per Alloc), AG_GGML_DUMP=1 or 2 (print each compiled graph's ggml op
// counts, or every node), AG_GGML_PROFILE=1 (time every ggml node, print
// per-op means), AG_GGML_VK_SUBMIT_NODES and AG_GGML_VK_SUBMIT_MM_DIV
// (ggml-vulkan's submission cadence: nodes per command buffer, default 100,
// and the divisor of the matmul bytes per command buffer, default 40, 0 for
// none; patches/0005), AG_GGML_VK_SPLIT_K_MIN (the least k ggml-vulkan
// splits, default 512; 2048 is ggml's rule; patches/0008), and
// GGML_VK_PERF_LOGGER=1 (ggml's own per-op GPU times).
package native

import "github.com/ag-go/ag/backend"

// Driver names and their "auto" priorities (see backend.Register).
const (
	// VulkanName is the registry name of ggml's Vulkan backend.
	VulkanName = "ggml-vulkan"
	// CPUName is the registry name of ggml's CPU backend.
	CPUName = "ggml-cpu"
	// VulkanPriority ranks ggml-vulkan below webgpu, which trained the
	// 4x1024 MLP 1.6-1.8x faster on an H200 (bench/results/h200-ag.json),
	// and above the CPU backends.
	VulkanPriority = backend.PriorityGGMLVulkan
	// CPUPriority ranks ggml-cpu above the pure-Go cpu backend's portable
	// kernel and below its assembly kernels.
	CPUPriority = backend.PriorityGGMLCPU
)
