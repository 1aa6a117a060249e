package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// A checkpointed block with batch norm updates the running statistics
// once per step (the recomputation must not update them again) and gives
// the gradients of the plain block.
func TestCheckpointedBatchNorm(t *testing.T) {
	dev := openDev(t)
	x := dev.Tensor(randVals(NewRNG(2), 4*3*2*2), 4, 3, 2, 2)
	var grads [2][]float32
	var stats [2][]float32
	for i, ck := range []bool{false, true} {
		r := NewRNG(9)
		conv := NewConv2d(dev, 3, 2, [2]int{1, 1}, ConvOptions{}, r)
		bn := NewBatchNorm2d(dev, 2, 1e-5, 0.1, true)
		var m Module = Sequential{conv, bn, Func(core.Tanh)}
		if ck {
			m = Checkpointed{Module: m}
		}
		if err := core.Sum(core.Mul(m.Forward(x), m.Forward(x))).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := conv.W.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		grads[i] = g
		if stats[i], err = bn.RunningMean.Data(); err != nil {
			t.Fatal(err)
		}
	}
	for j := range grads[0] {
		if math.Abs(float64(grads[0][j]-grads[1][j])) > 1e-5 {
			t.Fatalf("gradient %d: %g checkpointed, %g plain", j, grads[1][j], grads[0][j])
		}
	}
	for j := range stats[0] {
		if stats[0][j] != stats[1][j] {
			t.Fatalf("running mean %v checkpointed, %v plain: the recomputation updated it again", stats[1], stats[0])
		}
	}
}
