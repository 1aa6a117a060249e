package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// mlpMixedTol bounds the gap between the mean loss of the last 20 steps of
// mixed-precision training and f32's, relative to f32's.
const mlpMixedTol = 0.02

// An MLP (the bench's 8x4096 at test size: 4 layers of width 128, batch
// 64, so every hidden activation is stored) trained mixedSteps steps (cpu;
// mixedCheckSteps elsewhere) with f16 and bf16 matmuls, its activations
// stored in the same format and dynamic loss scaling follows f32.
func TestMLPMixedPrecision(t *testing.T) {
	dev := openDev(t)
	steps := mixedSteps
	if dev.Name() != "cpu" {
		steps = mixedCheckSteps
	}
	const width, depth, batch = 128, 4, 64
	r := rand.New(rand.NewPCG(3, 3))
	x := make([]float32, batch*width)
	y := make([]float32, batch*width)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		y[i] = float32(math.Sin(3 * float64(x[i])))
	}
	train := func(t *testing.T, p core.Precision) []float64 {
		prev, err := dev.SetMatMulPrecision(p)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.SetMatMulPrecision(prev)
		ps, err := dev.SetActivationStorage(p)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.SetActivationStorage(ps)
		sizes := []int{width}
		for range depth {
			sizes = append(sizes, width)
		}
		// Glorot, the init the tolerance and the step count were set with:
		// this test compares precisions. (PyTorch's default, nn.MLP's, makes
		// the first loss smaller, 0.51 against 0.67, and ends a little
		// higher after 200 steps, 0.29 against 0.26: not halved.)
		m := nn.MLPInit(dev, sizes, core.Tanh, nn.GlorotUniform(1), nn.NewRNG(2))
		opt := nn.NewAdam(m.Params(), 1e-4) // slow enough that the loss is still falling at the end
		scaler := nn.NewGradScaler(1024)
		xt, yt := dev.Tensor(x, batch, width), dev.Tensor(y, batch, width)
		var losses []float64
		for range steps {
			opt.ZeroGrad()
			loss := nn.MSELoss(m.Forward(xt), yt).Keep()
			if err := scaler.Backward(loss); err != nil {
				t.Fatal(err)
			}
			if _, _, err := scaler.Step(opt, 0); err != nil {
				t.Fatal(err)
			}
			l, err := loss.Item()
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, float64(l))
		}
		return losses
	}
	tail := func(l []float64) float64 {
		var s float64
		for _, v := range l[len(l)-10:] {
			s += v / 10
		}
		return s
	}
	ref := train(t, core.PrecisionF32)
	if steps == mixedSteps && !(tail(ref) < ref[0]/2) {
		t.Fatalf("f32 training: loss %g at first, %g at the end: want it halved", ref[0], tail(ref))
	}
	for _, p := range []core.Precision{core.PrecisionF16, core.PrecisionBF16} {
		t.Run(p.String(), func(t *testing.T) {
			if p == core.PrecisionBF16 && dev.Name() == "ggml-vulkan" {
				testenv.Skipf(t, "bf16 on ggml-vulkan: ggml-vulkan cannot convert bf16 back to f32 (unpack_bf16 is in its Caps.Unsupported)")
			}
			got := train(t, p)
			t.Logf("%s: mean loss of the last 10 of %d steps: f32 %.5f, %v %.5f (first %.5f)", dev.Name(), steps, tail(ref), p, tail(got), ref[0])
			if d := math.Abs(tail(got)-tail(ref)) / tail(ref); d > mlpMixedTol {
				t.Errorf("%v: mean loss of the last 10 steps %.5f, f32's %.5f: %.3g apart, want within %g", p, tail(got), tail(ref), d, mlpMixedTol)
			}
		})
	}
}
