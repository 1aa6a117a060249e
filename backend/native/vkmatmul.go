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

// vkMatmulEnv picks ggml-vulkan's f32 product where probeMatmul saw patch
// 0019's numbers: "auto" runs the products of at least vkMatmulWork
// multiply-adds on ag's kernel, "ag" every product it takes; unset or
// "ggml" none (ggml's mul_mat). The kernel is opt-in until it is measured
// beside ggml's mul_mat on a GPU (bench/gpu-models.sh's part vkmatmul):
// its tiling ran at 38-40 TFLOP/s as ag's WGSL kernel on an H200 where
// ggml's f32 mul_mat ran a GPT step's products at about 20 on an H100, but
// this GLSL build of it has run on lavapipe only.
const vkMatmulEnv = "AG_GGML_MATMUL"

// vkMatmulAEnv: "copy" gives patch 0019's kernel an A stored [M, K] as a
// transposed copy, [K, M]; unset or "rows" lets it read A as stored (K a
// multiple of 4), transposing each tile into shared memory. For
// side-by-side measurements.
const vkMatmulAEnv = "AG_GGML_MATMUL_A"

// vkMatmulSplitEnv overrides vkMatmulTarget and vkMatmulMinK as "T,K" (for
// side-by-side measurements).
const vkMatmulSplitEnv = "AG_GGML_MATMUL_SPLIT"

const (
	// vkMatmulWork is the least M*N*K (times the batches) that runs on
	// patch 0019's kernel with AG_GGML_MATMUL=auto: 256^3, below which a
	// product is mostly its launch.
	vkMatmulWork = 1 << 24
	// vkMatmulTile is the kernel's tile edge (ag_matmul.comp's BM, BN).
	vkMatmulTile = 128
	// vkMatmulTarget is how many tiles a split of K aims at (about one
	// wave on a GPU of 132 SMs; the WGSL kernel's tnGroups).
	vkMatmulTarget = 128
	// vkMatmulMinK is the least part of K a split leaves (tnMinK).
	vkMatmulMinK = 512
	// vkMatmulMaxK is the longest part of K one invocation sums: lavapipe
	// ends an invocation's loops after 65535 iterations in all (see
	// maxMatmulK), up to about 200 per step of 32 along K here where its
	// compiler unrolls none of the inner loops.
	vkMatmulMaxK = 1 << 13
	// vkMatmulMaxSplit bounds the parts a split of K makes for occupancy.
	vkMatmulMaxSplit = 16
)

// vkMatmulSplits is how many parts patch 0019's kernel splits K into for
// batches products of M x N outputs: each part at most vkMatmulMaxK deep,
// and, while fewer than vkMatmulTarget tiles run, doubled as long as each
// part stays at least vkMatmulMinK deep.
func vkMatmulSplits(M, N, K, batches int) int {
	tiles := ceilDiv(M, vkMatmulTile) * ceilDiv(N, vkMatmulTile) * batches
	target, minK := vkMatmulTarget, vkMatmulMinK
	if env := os.Getenv(vkMatmulSplitEnv); env != "" {
		if _, err := fmt.Sscanf(env, "%d,%d", &target, &minK); err != nil || minK < 1 {
			target, minK = vkMatmulTarget, vkMatmulMinK
		}
	}
	s := 1
	for tiles*s < target && s*2 <= vkMatmulMaxSplit && K/(s*2) >= minK {
		s *= 2
	}
	return max(s, ceilDiv(K, vkMatmulMaxK))
}

// useVKMatmul reports whether an f32 product of batches M x N x K products
// runs on patch 0019's kernel (see vkMatmulEnv), and if so in how many
// parts of K (vkMatmulSplits).
func (d *device) useVKMatmul(M, N, K, batches int) (parts int, ok bool) {
	if !d.vkMatmul || M%4 != 0 || N%4 != 0 {
		return 0, false
	}
	// the shader indexes each operand and the partial products in uint32
	const most = 1 << 31
	parts = vkMatmulSplits(M, N, K, batches)
	if int64(batches)*int64(K)*int64(max(M, N)) >= most || int64(batches)*int64(parts)*int64(M)*int64(N) >= most {
		return 0, false
	}
	switch os.Getenv(vkMatmulEnv) {
	case "ag":
		return parts, true
	case "auto":
		return parts, int64(M)*int64(N)*int64(K)*int64(batches) >= vkMatmulWork
	}
	return 0, false
}

// vkMatMul is op(a) x op(b) (row-major, equal batches in ggml dims 2 and 3,
// see matMul) on patch 0019's kernel, which takes B stored [K, N] (not
// transB) and A stored [K, M] (transA) or [M, K] (K a multiple of 4) as
// they are, the others as transposed copies. ok is false where the kernel
// does not take the product (useVKMatmul).
func (l *lowering) vkMatMul(a, b tensor, transA, transB bool) (tensor, bool) {
	var M, K, N int
	if transA {
		M, K = int(a.ne[0]), int(a.ne[1])
	} else {
		M, K = int(a.ne[1]), int(a.ne[0])
	}
	if transB {
		N = int(b.ne[1])
	} else {
		N = int(b.ne[0])
	}
	if a.ne[2] != b.ne[2] || a.ne[3] != b.ne[3] {
		return nil, false
	}
	parts, ok := l.d.useVKMatmul(M, N, K, int(a.ne[2]*a.ne[3]))
	if !ok {
		return nil, false
	}
	ak, aRows := l.contiguous(a), 0
	if !transA {
		if K%4 == 0 && os.Getenv(vkMatmulAEnv) != "copy" {
			aRows = 1
		} else {
			ak = l.transposed(a)
		}
	}
	bk := l.contiguous(b)
	if transB {
		bk = l.transposed(b)
	}
	flat := func(t tensor) tensor { // batches in dim 2 alone
		if t.ne[3] == 1 {
			return t
		}
		return C.ggml_reshape_3d(l.ctx, t, t.ne[0], t.ne[1], t.ne[2]*t.ne[3])
	}
	r := C.ag_vk_matmul(l.ctx, flat(ak), flat(bk), C.int(aRows), C.int(parts))
	if a.ne[3] != 1 {
		r = C.ggml_reshape_4d(l.ctx, r, r.ne[0], r.ne[1], a.ne[2], a.ne[3])
	}
	return r, true
}
