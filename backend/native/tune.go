//go:build ggml

package native

import (
	"os"
	"strconv"
)

// mmRowsEnv overrides how lowerMatMul splits a matmul's rows on a GPU (see
// mmSplitRows): "0" never splits, a number splits into matmuls of that many
// rows, unset or "auto" uses the rule below.
const mmRowsEnv = "AG_GGML_MM_ROWS"

// mmSplitRows returns how many rows of the M x N result each sub-matmul
// should compute, or 0 to leave the matmul whole.
//
// ggml-vulkan (without matrix cores) chooses its tile from the smaller of
// N (src0 rows) and M (src1 rows): 128x128 when both exceed 64. A training
// step's matmuls (M = batch 64..1024, N = K = width 1024) then launch 16 to
// 64 workgroups on a GPU with 132 SMs. Splitting M into a batch of smaller
// matmuls (the same memory, x broadcast) makes ggml pick 64x64 tiles (rows
// 64) or 32x32 tiles (rows 32) and fills the GPU. Measured on an H200
// (f32, median of 20 runs): 256x1024x1024 258 us whole, 100 us at rows 64,
// 90 us at rows 32; 1024^3 279 us whole, 122 us at rows 64, 132 us at rows
// 32; 4096^3 stays whole (1024 large tiles already).
//
// An f16 matmul (half) on matrix cores stays whole: ggml's cooperative-
// matrix shaders tile differently, and split they starved. On an H100
// (GPT 12x768, ctx 512, batch 8, f16, GGML_VK_PERF_LOGGER) the split
// weight gradients (768 x 32 x 4096, 24 a batch) ran at 13.5 TFLOP/s and
// the split forward products (768 x 64 x 768, 64 a batch) at 77, where an
// unsplit 3072 x 4096 x 768 ran at 224 (bench/results/h100-2026-12-06-s27a).
func (d *device) mmSplitRows(M, N int, half bool) int {
	if d.isCPU || half && d.coopmat() {
		return 0
	}
	rows := 0
	switch env := os.Getenv(mmRowsEnv); env {
	case "", "auto":
		if M <= 64 || N <= 64 {
			return 0 // ggml already picks a smaller tile
		}
		switch {
		case ceilDiv(N, 128)*ceilDiv(M, 128) >= 256:
			return 0 // enough large tiles
		case ceilDiv(N, 64)*(M/64) >= 256 && M%64 == 0:
			rows = 64
		case M%32 == 0:
			rows = 32
		}
	default:
		r, err := strconv.Atoi(env)
		if err != nil || r < 0 {
			return 0
		}
		rows = r
	}
	if rows == 0 || M <= rows || M%rows != 0 {
		return 0
	}
	return rows
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
