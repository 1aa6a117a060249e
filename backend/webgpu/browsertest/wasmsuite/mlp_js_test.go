//go:build js

package wasmsuite

import (
	"math"
	"testing"

	_ "github.com/ag-go/ag/backend/cpu" // the reference device, compiled to wasm
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// mlpTol is the relative tolerance between the WebGPU and CPU losses: both
// are float32 with sums of at most 32 terms in other orders, over 12 Adam
// steps that compound the differences.
const mlpTol = 2e-4

// TestMLPTrains trains the workload MLP through core and nn on "webgpu" in
// every execution mode and checks each step's loss against the same
// training on the pure-Go "cpu" backend, and that the loss falls. One device
// of each kind serves all modes, so that the kernels compile once (a tiled
// matmul pipeline takes seconds to compile on SwiftShader).
func TestMLPTrains(t *testing.T) {
	cfg := workload.Config{Width: 32, Depth: 3, Batch: 8, Seed: 3, LR: 0.01}
	const steps = 12
	cpu, gpu := open(t, "cpu"), open(t, "webgpu")
	for _, mode := range []workload.Mode{workload.Eager, workload.Lazy, workload.Captured} {
		t.Run(string(mode), func(t *testing.T) {
			want := train(t, cpu, cfg, mode, steps)
			got := train(t, gpu, cfg, mode, steps)
			for k := range want {
				if d := math.Abs(float64(got[k] - want[k])); d > mlpTol*(1+math.Abs(float64(want[k]))) {
					t.Errorf("step %d: webgpu loss %g, cpu %g (|diff| %.3g, tolerance %g relative)", k, got[k], want[k], d, mlpTol)
				}
			}
			if !(got[steps-1] < got[0]) {
				t.Errorf("webgpu loss did not fall: %v", got)
			}
			t.Logf("webgpu losses %v", got)
		})
	}
}

// open opens the named device until the test ends.
func open(t *testing.T, name string) *core.Device {
	t.Helper()
	dev, err := core.Open(name)
	if err != nil {
		t.Fatalf("core.Open(%q): %v", name, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// train builds a fresh model on dev, runs steps training steps in mode and
// returns the losses.
func train(t *testing.T, dev *core.Device, cfg workload.Config, mode workload.Mode, steps int) []float32 {
	t.Helper()
	m, err := workload.New(dev, cfg)
	if err != nil {
		t.Fatalf("%s: workload.New: %v", dev.Name(), err)
	}
	losses := make([]float32, steps)
	for k := range losses {
		if losses[k], err = m.StepMode(mode); err != nil {
			t.Fatalf("%s %s step %d: %v", dev.Name(), mode, k, err)
		}
	}
	return losses
}
