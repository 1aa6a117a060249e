//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
	"slices"
)

// vkMatmulEnv picks the kernel of ggml-vulkan's f32 products where
// probeMatmul saw patch 0019's numbers: "tune" (the default on a GPU)
// times each product of at least vkMatmulWork multiply-adds on both
// kernels the first time a Compile meets it and keeps the faster
// (tunedMatmul); "ag" runs every product the kernel takes on it; "ggml"
// none (ggml's mul_mat, the default on a software device such as
// lavapipe, whose timings say nothing of a GPU's). Another value fails
// Open, naming it.
const vkMatmulEnv = "AG_GGML_MATMUL"

// vkMatmulModes are vkMatmulEnv's values ("" is the default).
var vkMatmulModes = []string{"", "tune", "ag", "ggml"}

// vkMatmulAEnv: with AG_GGML_MATMUL=ag, "copy" gives patch 0019's kernel
// an A stored [M, K] as a transposed copy, [K, M]; unset or "rows" lets it
// read A as stored (K a multiple of 4), transposing each tile into shared
// memory. The tuner times both.
const vkMatmulAEnv = "AG_GGML_MATMUL_A"

// vkMatmulSplitEnv overrides vkMatmulTarget and vkMatmulMinK as "T,K" (for
// side-by-side measurements).
const vkMatmulSplitEnv = "AG_GGML_MATMUL_SPLIT"

const (
	// vkMatmulWork is the least M*N*K (times the batches) that is tuned
	// (vkMatmulEnv): 256^3, below which a product is mostly its launch
	// and stays on ggml's mul_mat.
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

// vkMatmulFits reports whether patch 0019's kernel takes an f32 product of
// batches M x N x K products on d, and if so in how many parts of K
// (vkMatmulSplits).
func (d *device) vkMatmulFits(M, N, K, batches int) (parts int, ok bool) {
	if !d.vkMatmul || M%4 != 0 || N%4 != 0 {
		return 0, false
	}
	// the shader indexes each operand and the partial products in uint32
	const most = 1 << 31
	parts = vkMatmulSplits(M, N, K, batches)
	if int64(batches)*int64(K)*int64(max(M, N)) >= most || int64(batches)*int64(parts)*int64(M)*int64(N) >= most {
		return 0, false
	}
	return parts, true
}

// mmKernel is the kernel of an f32 product on ggml-vulkan.
type mmKernel int8

const (
	mmFree   mmKernel = iota // lowering.mm: as vkMatmulEnv picks
	mmGGML                   // ggml's mul_mat
	mmAG                     // patch 0019's kernel, A stored [M, K] read as stored (K a multiple of 4)
	mmAGCopy                 // patch 0019's kernel, A stored [M, K] read as a transposed copy
)

func (k mmKernel) String() string {
	switch k {
	case mmFree:
		return "free"
	case mmGGML:
		return "ggml's mul_mat"
	case mmAG:
		return "ag's kernel (patch 0019)"
	case mmAGCopy:
		return "ag's kernel (patch 0019) on a transposed copy of A"
	}
	panic(fmt.Sprintf("native: unknown mmKernel %d", int8(k)))
}

// mmPlan is how an f32 product runs on ggml-vulkan: its kernel and, for
// patch 0019's, the parts K is split into (0: vkMatmulSplits').
type mmPlan struct {
	kern  mmKernel
	split int
}

func (p mmPlan) String() string {
	if p.split > 0 {
		return fmt.Sprintf("%v, K in %d parts", p.kern, p.split)
	}
	return p.kern.String()
}

// pickVKMatmul is the plan of product k, which patch 0019's kernel takes
// (vkMatmulFits): the lowering's forced one (the tuner's candidates), else
// as vkMatmulEnv says.
func (l *lowering) pickVKMatmul(k mmKey) mmPlan {
	switch l.mm.kern {
	case mmGGML, mmAG, mmAGCopy:
		return l.mm
	case mmFree:
	default:
		panic(fmt.Sprintf("native: unknown mmKernel %d", int8(l.mm.kern)))
	}
	switch os.Getenv(vkMatmulEnv) {
	case "ag":
		if os.Getenv(vkMatmulAEnv) == "copy" {
			return mmPlan{kern: mmAGCopy}
		}
		return mmPlan{kern: mmAG}
	case "ggml":
		return mmPlan{kern: mmGGML}
	case "":
		if l.d.software {
			return mmPlan{kern: mmGGML}
		}
	case "tune":
	default:
		return mmPlan{kern: mmGGML} // Open refused it (checkVKMatmulEnv); set since
	}
	if k.work() < vkMatmulWork {
		return mmPlan{kern: mmGGML}
	}
	return l.d.tunedMatmul(k)
}

// checkVKMatmulEnv is Open's check of vkMatmulEnv's value.
func checkVKMatmulEnv() error {
	if v := os.Getenv(vkMatmulEnv); !slices.Contains(vkMatmulModes, v) {
		return fmt.Errorf("%s=%q: want tune, ag or ggml (or unset)", vkMatmulEnv, v)
	}
	return nil
}

// vkMatMul is op(a) x op(b) (row-major, equal batches in ggml dims 2 and 3,
// see matMul) on patch 0019's kernel, which takes B stored [K, N] (not
// transB) and A stored [K, M] (transA) or [M, K] (K a multiple of 4) as
// they are, the others as transposed copies. ok is false where the kernel
// does not take the product (vkMatmulFits) or is not picked for it
// (pickVKMatmul).
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
	parts, ok := l.d.vkMatmulFits(M, N, K, int(a.ne[2]*a.ne[3]))
	if !ok {
		return nil, false
	}
	plan := l.pickVKMatmul(mmKey{M: M, N: N, K: K, b2: int(a.ne[2]), b3: int(a.ne[3]), transA: transA, transB: transB})
	if plan.kern == mmGGML {
		return nil, false
	}
	if plan.split > 0 {
		parts = plan.split // a split the tuner timed (tuneCandidates checked its bounds)
	}
	ak, aRows := l.contiguous(a), 0
	if !transA {
		if K%4 == 0 && plan.kern == mmAG {
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
