//go:build ggml

package native

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan f32 products run on patch 0019's kernel, which takes B
// stored [K, N] and A stored [K, M] or [M, K]: every layout (the others
// through transposed copies; A stored [M, K] read as stored and copied),
// batches, edges of its 128x128 tiles along M and N,
// K not a multiple of its steps, K split into parts for occupancy (a
// node summing them) and for lavapipe's loop limit.
func TestMatmulKernel(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		t.Setenv(vkMatmulEnv, "ag")
		cases := []struct {
			batch, m, n, k int
			ta, tb         bool
			parts          int
		}{
			{1, 132, 136, 100, false, false, 1},
			{1, 64, 8, 2100, true, false, 4},
			{3, 20, 260, 36, false, true, 1},
			{2, 128, 128, 64, true, true, 1},
			{128, 4, 4, vkMatmulMaxK + 40, false, false, 2},
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for _, c := range cases {
			for _, aMode := range []string{"rows", "copy"} {
				if aMode == "copy" && (c.ta || c.k%4 != 0) {
					continue // A is read as stored either way
				}
				t.Run(fmt.Sprintf("%dx%dx%dx%d_%t_%t_%s", c.batch, c.m, c.n, c.k, c.ta, c.tb, aMode), func(t *testing.T) {
					t.Setenv(vkMatmulAEnv, aMode)
					if got := vkMatmulSplits(c.m, c.n, c.k, c.batch); got != c.parts {
						t.Errorf("vkMatmulSplits(%d, %d, %d, %d) = %d, want %d", c.m, c.n, c.k, c.batch, got, c.parts)
					}
					as, bs := []int{c.batch, c.m, c.k}, []int{c.batch, c.k, c.n}
					if c.ta {
						as = []int{c.batch, c.k, c.m}
					}
					if c.tb {
						bs = []int{c.batch, c.n, c.k}
					}
					g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, as...), arg(1, bs...),
						{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{c.batch, c.m, c.n}, TransA: c.ta, TransB: c.tb}},
						Outputs: []backend.Output{{Node: 2, Arg: 2}}}
					want := "CUSTOM(vulkan_kernel)=1"
					if c.parts > 1 {
						want = "CUSTOM(vulkan_kernel)=2"
					}
					wantKernels(t, d, d.vkMatmul, "probeMatmul", "0019", loweredOps(t, d, g), want, "MUL_MAT")
					args := [][]float32{eighths(rng, backend.NumElems(as)), eighths(rng, backend.NumElems(bs)), make([]float32, c.batch*c.m*c.n)}
					runAndCompare(t, be, g, args, 0)
				})
			}
		}
	})
}

// Products whose operands or partial products index past 2^31 elements
// stay on ggml's mul_mat (the shader indexes in uint32), as do M or N not
// multiples of 4; AG_GGML_MATMUL picks among the rest, and a value it
// does not know fails Open.
func TestMatmulKernelSizes(t *testing.T) {
	d := &device{vkMatmul: true}
	for _, c := range []struct {
		m, n, k, batches int
		want             bool
	}{
		{4096, 768, 3072, 1, true},
		{64, 64, 64, 1, true},
		{130, 768, 768, 1, false},       // M not a multiple of 4
		{1 << 16, 1 << 15, 8, 1, false}, // M*N = 2^31 outputs
		{8, 8, 1 << 28, 1, false},       // K*M = 2^31
		{512, 512, 64, 96, true},        // attention's batched products
	} {
		if _, got := d.vkMatmulFits(c.m, c.n, c.k, c.batches); got != c.want {
			t.Errorf("vkMatmulFits(%d, %d, %d, %d) = %t, want %t", c.m, c.n, c.k, c.batches, got, c.want)
		}
	}
	big, small := mmKey{M: 4096, N: 768, K: 3072, b2: 1, b3: 1}, mmKey{M: 64, N: 64, K: 64, b2: 1, b3: 1}
	for _, c := range []struct {
		env, envA string
		software  bool
		key       mmKey
		want      mmKernel
	}{
		{"ag", "", true, small, mmAG},
		{"ag", "copy", false, big, mmAGCopy},
		{"ggml", "", false, big, mmGGML},
		{"", "", true, big, mmGGML},        // a software device's default: its timings say nothing of a GPU's
		{"tune", "", false, small, mmGGML}, // below vkMatmulWork: not timed
	} {
		t.Setenv(vkMatmulEnv, c.env)
		t.Setenv(vkMatmulAEnv, c.envA)
		l := &lowering{d: &device{vkMatmul: true, software: c.software}}
		if got := l.pickVKMatmul(c.key); got != (mmPlan{kern: c.want}) {
			t.Errorf("%s=%q %s=%q, software %t: pickVKMatmul(%v) = %v, want %v", vkMatmulEnv, c.env, vkMatmulAEnv, c.envA, c.software, c.key, got, c.want)
		}
	}
	t.Setenv(vkMatmulEnv, "auto")
	if err := checkVKMatmulEnv(); err == nil || !strings.Contains(err.Error(), `AG_GGML_MATMUL="auto"`) {
		t.Errorf("checkVKMatmulEnv with %s=auto: %v, want an error naming it", vkMatmulEnv, err)
	}
	if _, err := backend.Open(VulkanName); err == nil || !strings.Contains(err.Error(), `AG_GGML_MATMUL="auto"`) {
		t.Errorf("Open(%s) with %s=auto: %v, want an error naming it", VulkanName, vkMatmulEnv, err)
	}
}

// With AG_GGML_MATMUL=tune a product is timed on each candidate plan the
// first time it is lowered (each the fastest of tuneRuns runs) and runs on
// the one picked, the pick kept for the next Compile; each gives the exact
// product. Which wins on lavapipe says nothing (tuning is off there by
// default): the test checks the mechanism, not the pick.
func TestMatmulTune(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		if !d.vkMatmul {
			t.Fatal("probeMatmul refused patch 0019's kernel (a ggml built without it? AG_GGML_LOG=info says why)")
		}
		t.Setenv(vkMatmulEnv, "tune")
		rng := rand.New(rand.NewPCG(7, 7))
		for _, c := range []struct {
			b3, b2, m, n, k int
			transA, transB  bool
			plans           int
		}{
			{1, 1, 256, 256, 256, true, false, 2},   // ggml; ag (vkMatmulWork: the least product timed)
			{1, 1, 256, 256, 256, false, false, 3},  // and ag on a copy of A
			{1, 1, 128, 128, 1024, true, false, 3},  // ggml; ag in 2 and 4 parts of K (one tile)
			{1, 1, 128, 128, 1024, false, false, 5}, // the same on a copy of A
			{2, 3, 128, 64, 384, false, true, 3},    // batches in ggml dims 2 and 3, B transposed
		} {
			batches := c.b3 * c.b2
			key := mmKey{M: c.m, N: c.n, K: c.k, b2: c.b2, b3: c.b3, transA: c.transA, transB: c.transB}
			lead := []int{c.b3, c.b2}
			if batches == 1 {
				lead = nil
			}
			shape := func(r, c int) []int { return append(append([]int{}, lead...), r, c) }
			as, bs := shape(c.m, c.k), shape(c.k, c.n)
			if c.transA {
				as = shape(c.k, c.m)
			}
			if c.transB {
				bs = shape(c.n, c.k)
			}
			g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, as...), arg(1, bs...),
				{Op: backend.OpMatMul, In: []int{0, 1}, Shape: shape(c.m, c.n), TransA: c.transA, TransB: c.transB}},
				Outputs: []backend.Output{{Node: 2, Arg: 2}}}
			delete(d.mmTuned, key)
			ops := loweredOps(t, d, g)
			ch, ok := d.mmTuned[key]
			if !ok {
				t.Fatalf("lowering a %v product tuned nothing: %v", key, d.mmTuned)
			}
			cands := tuneCandidates(key)
			if len(cands) != c.plans || ch.why != "" || len(ch.t) != len(cands) {
				t.Fatalf("%v: the tuner timed %v of %v, want %d plans: %s", key, ch.t, cands, c.plans, ch.why)
			}
			ggml := mmPlan{kern: mmGGML}
			best := ggml
			for _, p := range cands {
				if ch.t[p] <= 0 {
					t.Errorf("%v: %v timed at %v", key, p, ch.t[p])
				}
				if p != ggml && float64(ch.t[p]) <= tuneMargin*float64(ch.t[ggml]) && ch.t[p] < ch.t[best] {
					best = p
				}
			}
			if ch.pick != best {
				t.Errorf("%v: picked %v, timed %v", key, ch.pick, ch.t)
			}
			want := "MUL_MAT"
			switch {
			case ch.pick.kern == mmGGML:
			case ch.pick.split > 1 || ch.pick.split == 0 && vkMatmulSplits(c.m, c.n, c.k, batches) > 1:
				want = "CUSTOM(vulkan_kernel)=2" // the parts, then their sum
			default:
				want = "CUSTOM(vulkan_kernel)=1"
			}
			if !strings.Contains(ops, want) || (ch.pick.kern == mmGGML) == strings.Contains(ops, "CUSTOM(vulkan_kernel)") {
				t.Errorf("%v: picked %v, lowered to %s, want %s", key, ch.pick, ops, want)
			}
			t.Logf("%v: %v: %v", key, ch.t, ch.pick)
			args := func() [][]float32 {
				return [][]float32{eighths(rng, batches*c.m*c.k), eighths(rng, batches*c.k*c.n), make([]float32, batches*c.m*c.n)}
			}
			runAndCompare(t, be, g, args(), 0)
			if again := d.mmTuned[key]; again.pick != ch.pick || fmt.Sprint(again.t) != fmt.Sprint(ch.t) {
				t.Errorf("%v: Compile timed the product again: %+v, then %+v", key, ch, again)
			}
			// every candidate plan computes the exact product
			for _, p := range cands {
				d.mmTuned[key] = mmChoice{pick: p, t: ch.t}
				runAndCompare(t, be, g, args(), 0)
			}
		}
		// a product whose candidates would take more than tuneMaxBytes
		// is not timed and stays on ggml's mul_mat
		huge := mmKey{M: 16384, N: 16384, K: 4096, b2: 1, b3: 1}
		if c := d.tuneMatmul(huge); c.pick != (mmPlan{kern: mmGGML}) || !strings.Contains(c.why, "not timed") || len(c.t) != 0 {
			t.Errorf("tuneMatmul(%v) = %+v, want ggml's mul_mat, not timed", huge, c)
		}
	})
}

// eighths draws n multiples of 1/8 in [-1, 1]: every product and sum of
// the matmul tests is exact in f32, whatever its order, so each kernel's
// result is compared exactly.
func eighths(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.IntN(17)-8) / 8
	}
	return v
}
