package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/core"
)

// rankRef is the float64 reference as a core device: ranks 5 and 6 run on
// it as they are (its kernels take backend.MaxRank, no lowering), the
// values the device under test is checked against.
const rankRef = "nn-rank-ref"

func init() { backend.Register(rankRef, -1, backendtest.ReferenceDriver(rankRef)) }

// rankModel is a computation over tensors of rank 5 and 6 that reaches
// every lowering: a broadcast alternating axis by axis (6 groups), a
// permute that needs a chain, reductions along inner axes, batched
// matmuls with 3 batch dimensions, a rank-5 by rank-2 matmul (Linear's),
// slices and a concatenation along an inner axis, softmax; and core's
// composites at those ranks (norms, attention, cumsum, pads, gathers).
func rankModel(x, y, w *core.Tensor) []*core.Tensor {
	a := core.Tanh(core.Add(core.Mul(x, y), y)) // x [2,3,2,3,2,3] * y [2,1,2,1,2,1]
	p := core.Permute(a, 2, 4, 0, 5, 1, 3)
	a5 := core.Reshape(a, 2, 3, 2, 3, 6)
	return []*core.Tensor{
		a, p,
		core.SumAxis(p, 3, false),
		core.MeanAxis(a, 1, true),
		core.MaxAxis(a5, 2, false),
		core.MatMul(a5, core.Permute(a5, 0, 1, 2, 4, 3)), // [2,3,2,3,3]
		core.MatMul(a5, w),                               // [..., 6] x [6, 4]
		core.Concat(3, core.Narrow(a, 3, 1, 2), core.Slice(a, 3, 0, 3, 2)),
		core.Softmax(core.Reshape(p, 2, 2, 2, 3, 9)),
		// core's composites over them
		core.Cumsum(a, 2),
		core.Flip(a, 1, 4),
		core.Roll(a, 3, 1),
		core.Pad(a5, core.PadConstant, 0.5, 1, 0, 0, 2),
		core.IndexSelect(a, 2, a.Device().Tensor([]float32{1, 0, 1}, 3)),
		core.Repeat(core.Reshape(y, 2, 2, 2), 1, 1, 3, 1, 1, 2),
		core.Var(a, 1, 1, true),
		core.LayerNorm(a5, 1e-5),
		core.RMSNorm(a, 1e-5),
		core.SoftmaxAxis(a, 2),
		core.LogSoftmax(a5),
		core.Attention(a5, a5, a5, &core.AttentionOptions{Causal: true}),
		core.SumTo(a, 2, 1, 2, 1, 2, 1),
		core.Maximum(a, core.Neg(y)),
	}
}

// rankInputs are the model's inputs on dev.
func rankInputs(dev *core.Device) (x, y, w *core.Tensor) {
	r := rand.New(rand.NewPCG(5, 6))
	data := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.Float64()*2 - 1)
		}
		return v
	}
	return dev.Param(data(216), 2, 3, 2, 3, 2, 3), dev.Param(data(8), 2, 1, 2, 1, 2, 1), dev.Param(data(24), 6, 4)
}

// TestRankDevice runs rankModel on the device under test (AG_TEST_DEVICE),
// where ranks 5 and 6 are lowered to rank 4 (plan.Expand), against the
// float64 reference running them as they are, and checks its gradient
// there with Gradcheck (finite differences of the reference).
func TestRankDevice(t *testing.T) {
	dev := openDev(t)
	ref, err := core.Open(rankRef)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	x, y, w := rankInputs(dev)
	rx, ry, rw := rankInputs(ref)
	got, want := rankModel(x, y, w), rankModel(rx, ry, rw)
	for k := range got {
		if !slices.Equal(got[k].Shape(), want[k].Shape()) {
			t.Fatalf("output %d: shape %v, want %v", k, got[k].Shape(), want[k].Shape())
		}
		g, err := got[k].Data()
		if err != nil {
			t.Fatalf("output %d: %v", k, err)
		}
		wv, err := want[k].Data()
		if err != nil {
			t.Fatalf("output %d on the reference: %v", k, err)
		}
		for i := range g {
			if d := math.Abs(float64(g[i] - wv[i])); d > 1e-5+1e-5*math.Abs(float64(wv[i])) {
				t.Fatalf("output %d %v [%d]: %g, want %g", k, got[k].Shape(), i, g[i], wv[i])
			}
		}
	}
	loss := func() *core.Tensor {
		var s *core.Tensor
		for k, o := range rankModel(x, y, w) {
			// weights so that no output's gradient is a constant
			term := core.Sum(core.Mul(o, core.Sin(core.Scale(o, float32(k+1)))))
			if s == nil {
				s = term
			} else {
				s = core.Add(s, term)
			}
		}
		return s
	}
	if err := core.Gradcheck(loss, []*core.Tensor{x, y, w}, &core.GradcheckOptions{Tol: 5e-3}); err != nil {
		t.Errorf("rank 5 and 6 on %s: %v", dev.Name(), err)
	}
}

// TestRank7: a rank beyond backend.MaxRank panics at the op, naming the
// op and the limit.
func TestRank7(t *testing.T) {
	dev := openDev(t)
	r6 := dev.Tensor(make([]float32, 64), 2, 2, 2, 2, 2, 2)
	checkPanics(t, []panicCase{
		{"Reshape", "core.Reshape: [64] cannot become [2 2 2 2 2 2 1]: 7 dimensions, more than backend.MaxRank = 6", func() {
			core.Reshape(dev.Tensor(make([]float32, 64), 64), 2, 2, 2, 2, 2, 2, 1)
		}},
		{"Tensor", "more than backend.MaxRank = 6", func() { dev.Tensor(make([]float32, 64), 1, 2, 2, 2, 2, 2, 2) }},
		{"Stack", "core.Stack: shape [1 2 2 2 2 2 2] has 7 dimensions, more than backend.MaxRank = 6", func() { core.Stack(0, r6, r6) }},
		{"Expand", "core.Expand: shape [1 2 2 2 2 2 2] has 7 dimensions, more than backend.MaxRank = 6", func() { core.Expand(r6, 1, 2, 2, 2, 2, 2, 2) }},
	})
}
