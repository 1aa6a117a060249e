package webgpu

import (
	"fmt"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// withMaxTrips lowers the loop bound so that small tensors take the split
// paths (parts, combines, several scatter dispatches, split K) that long
// reductions, rows and products take at full size.
func withMaxTrips(t *testing.T, be *Backend, trips int) {
	old := be.maxTrips
	be.maxTrips = trips
	t.Cleanup(func() { be.maxTrips = old })
}

// withMaxWorkgroups lowers the workgroups per dispatch dimension the
// lowering plans with, so that small tensors fold their grids (and matmul
// tiles) into two dimensions as ones past 65535 workgroups do.
func withMaxWorkgroups(t *testing.T, be *Backend, n uint32) {
	old := be.info.MaxWGPerDim
	be.info.MaxWGPerDim = n
	t.Cleanup(func() { be.info.MaxWGPerDim = old })
}

// loopKernel counts, in one invocation, the iterations of loops of
// P[0], P[1] and P[2] trips in a row, the last holding a workgroup barrier
// as a reduction tree does.
func loopKernel() *kernel {
	return newKernel("loop_probe", []bindDecl{{name: "Y", rw: true}}, `
@compute @workgroup_size(1)
fn main() {
	var n = 0u;
	for (var k = 0u; k < P[0]; k = k + 1u) { n = n + 1u; }
	for (var k = 0u; k < P[1]; k = k + 1u) { n = n + 1u; }
	for (var k = 0u; k < P[2]; k = k + 1u) { n = n + 1u; workgroupBarrier(); }
	Y[0] = f32(n);
}
`)
}

// runLoops runs loopKernel with the three trip counts and returns the count.
func runLoops(t *testing.T, be *Backend, trips [3]uint32) uint32 {
	t.Helper()
	be.mu.Lock()
	defer be.mu.Unlock()
	pipe, err := be.pipeline(loopKernel())
	if err != nil {
		t.Fatal(err)
	}
	pb, err := be.newBuffer(12)
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(pb)
	yb, err := be.newBuffer(4)
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(yb)
	if err := be.d.Write(pb, 0, gpu.BytesOf(trips[:])); err != nil {
		t.Fatal(err)
	}
	bg, err := be.d.NewBindGroup(pipe, []gpu.BindEntry{{Buf: pb, Size: 12}, {Buf: yb, Size: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.d.ReleaseBindGroup(bg)
	if _, err := be.d.Run([][]gpu.Dispatch{{{Pipe: pipe, Bind: bg, X: 1, Y: 1, Z: 1}}}, nil, false); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 1)
	if err := be.d.Read(yb, 0, gpu.BytesOf(out)); err != nil {
		t.Fatal(err)
	}
	return uint32(out[0])
}

// TestLoopBudget checks on this device that a kernel's loops may run
// 3*maxTrips iterations plus a tree's in one invocation (what the kernels
// assume), and reports whether the device cuts longer loops short, as
// lavapipe does after 65535 iterations in all.
func TestLoopBudget(t *testing.T) {
	be := openTest(t)
	if got, want := runLoops(t, be, [3]uint32{maxTrips, maxTrips, maxTrips + 18}), uint32(3*maxTrips+18); got != want {
		t.Fatalf("%s: loops of 3*maxTrips+18 iterations in one invocation ran %d: maxTrips %d is too large for this device", be.info, got, maxTrips)
	}
	long := [3]uint32{40000, 40000, 8}
	if got := runLoops(t, be, long); got != 80008 {
		t.Logf("%s cuts loops short: 80008 iterations in one invocation ran %d (the kernels stay below %d)", be.info, got, 3*maxTrips+18)
	} else {
		t.Logf("%s ran 80008 loop iterations in one invocation", be.info)
	}
}

// TestLoopSplits runs the op cases and fused patterns with the loop bound
// lowered to a few iterations, so every reduction, softmax, scatter-add,
// matmul and attention takes its split path, and with 16 workgroups per dimension,
// so every grid folds, against the float64 reference.
func TestLoopSplits(t *testing.T) {
	be := openTest(t)
	// Twice on a software adapter: with its own matmul plans (mmSoft) and
	// with a GPU's (dot products, K splits).
	for _, gp := range []bool{false, true} {
		if !gp && be.info.GPU {
			continue
		}
		t.Run(fmt.Sprintf("gpuPlans=%v", gp), func(t *testing.T) {
			be.gpuPlans = gp
			defer func() { be.gpuPlans = false }()
			testLoopSplits(t, be)
		})
	}
}

func testLoopSplits(t *testing.T, be *Backend) {
	for _, trips := range []int{1, 3} {
		t.Run(fmt.Sprintf("maxTrips=%d", trips), func(t *testing.T) {
			withMaxTrips(t, be, trips)
			testOps(t, be, false)
			testAttention(t, be)
		})
	}
	t.Run("maxWorkgroups=16", func(t *testing.T) {
		withMaxWorkgroups(t, be, 16)
		testOps(t, be, false)
		testAttention(t, be)
	})
	withMaxTrips(t, be, 2)
	t.Run("fused-step", func(t *testing.T) {
		b := mlpStep(99, 37, 20, 3, 60)
		want := reference(t, &b.g, b.args, 2)
		got, _ := runGraph(t, be, &b.g, b.args, 2, true)
		compare(t, "fused, maxTrips=2", got, want, 1e-4)
	})
	// Products of few outputs as dot products, in one part and in several,
	// with an epilogue (bias, ReLU) and transposed operands.
	for _, k := range []int{40, 2000} {
		t.Run(fmt.Sprintf("fused-dot-K%d", k), func(t *testing.T) {
			b := newGB(uint64(k))
			x, w := b.rand(-1, 1, 2, k), b.rand(-1, 1, 3, k)
			z := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, w}, Shape: []int{2, 3}, TransB: true})
			bias := b.rand(-1, 1, 3)
			b.out(b.op(backend.OpReLU, []int{2, 3}, b.op(backend.OpAdd, []int{2, 3}, z, bias)))
			want := reference(t, &b.g, b.args, 1)
			got, n := runGraph(t, be, &b.g, b.args, 1, true)
			compare(t, "fused dot, maxTrips=2", got, want, 1e-5)
			if parts := ceilDiv(k, 2*wg); (be.info.GPU || be.gpuPlans) && (parts == 1) != (n == 1) {
				t.Errorf("%d parts of K ran %d dispatches", parts, n)
			}
		})
	}
	// The column reduction's parts, each with a prologue and epilogue.
	t.Run("fused-col-sum", func(t *testing.T) {
		b := newGB(5)
		x := b.rand(-1, 1, 3, 50, 7)
		sq := b.op(backend.OpMul, []int{3, 50, 7}, x, x)
		s := b.node(backend.Node{Op: backend.OpSum, In: []int{sq}, Shape: []int{3, 1, 7}, Axis: 1})
		b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{s}, Shape: []int{3, 1, 7}, A: 0.5, B: 1}))
		want := reference(t, &b.g, b.args, 1)
		got, n := runGraph(t, be, &b.g, b.args, 1, true)
		compare(t, "fused col sum, maxTrips=2", got, want, 1e-5)
		if n != 2 {
			t.Errorf("the fused column sum ran %d dispatches, want 2 (parts, combine)", n)
		}
	})
}
