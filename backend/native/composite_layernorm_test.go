//go:build ggml

package native

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// With build.sh's patch 0013 layer norm is one ggml-vulkan node (NORM, no
// centring MEAN and SUB before it) and its gradient one (RMS_NORM_BACK in
// the layer-norm mode, no MEAN and SUB around it): an H100's GPT 12x768
// step spent 2.1 ms in those 150 nodes. Both give the reference's numbers
// on rows far from 0 for their spread, where a one-pass variance cancels,
// and so do the composed forms a device without the patch keeps.
func TestLayerNormOneNode(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		if !d.twoPassNorm || !d.layerNormBack {
			t.Fatalf("probeNorm %t, probeLayerNormBack %t: the device's norm is one-pass or its rms_norm_back has no layer-norm mode (a ggml built without patch 0013?)", d.twoPassNorm, d.layerNormBack)
		}
		const rows, cols = 24, 700
		shape := []int{rows, cols}
		g := &backend.Graph{NumArgs: 4, Nodes: []backend.Node{
			arg(0, shape...), arg(1, shape...),
			{Op: backend.OpLayerNorm, In: []int{0}, Shape: shape, A: 1e-5},
			{Op: backend.OpLayerNormBack, In: []int{0, 1}, Shape: shape, A: 1e-5},
		}, Outputs: []backend.Output{{Node: 2, Arg: 2}, {Node: 3, Arg: 3}}}
		args := func() [][]float32 {
			rng := rand.New(rand.NewPCG(9, 9))
			x := randVals(rng, rows*cols)
			for i := range x {
				x[i] = 20 + x[i]*0.5 // mean 20, spread 0.3
			}
			return [][]float32{x, randVals(rng, rows*cols), make([]float32, rows*cols), make([]float32, rows*cols)}
		}
		if c := loweredOps(t, d, g); !strings.Contains(c, "NORM=1") || !strings.Contains(c, "RMS_NORM_BACK=1") || strings.Contains(c, "MEAN") || strings.Contains(c, "SUB") {
			t.Errorf("layer norm and its gradient lowered to %s, want one NORM and one RMS_NORM_BACK", c)
		}
		runAndCompare(t, be, g, args(), 2e-4)
		d.mu.Lock()
		d.twoPassNorm, d.layerNormBack = false, false
		d.mu.Unlock()
		defer func() { d.mu.Lock(); d.twoPassNorm, d.layerNormBack = true, true; d.mu.Unlock() }()
		if c := loweredOps(t, d, g); !strings.Contains(c, "MEAN=3") || !strings.Contains(c, "SUB=3") {
			t.Errorf("without the patch's modes they lowered to %s, want the centred forms (3 MEAN, 3 SUB)", c)
		}
		runAndCompare(t, be, g, args(), 2e-4)
	})
}
