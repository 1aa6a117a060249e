//go:build ggml

package native

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan built by build.sh (patch 0012) gelu_back is one node,
// silu_back in its GELU mode, with the composite's values; the 13-node
// form it replaces gives the same numbers (the probe's fallback).
func TestGeluBackOneNode(t *testing.T) {
	onVulkan(t, func(t *testing.T, be backend.Backend, d *device) {
		if !d.geluBack {
			t.Fatalf("probeGeluBack: the device's silu_back has no GELU mode (a ggml built without patch 0012?)")
		}
		g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{64, 48}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{64, 48}},
			{Op: backend.OpGELUBack, In: []int{0, 1}, Shape: []int{64, 48}},
		}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
		if c := loweredOps(t, d, g); !strings.Contains(c, "SILU_BACK=1") || strings.Contains(c, "SIGMOID") {
			t.Errorf("gelu_back lowered to %s, want one SILU_BACK", c)
		}
		args := func() [][]float32 {
			rng := rand.New(rand.NewPCG(8, 8))
			x := randVals(rng, 64*48)
			for i := range x {
				x[i] *= 6 // past where the gate saturates
			}
			return [][]float32{x, randVals(rng, 64*48), make([]float32, 64*48)}
		}
		runAndCompare(t, be, g, args(), 2e-5)
		d.mu.Lock()
		d.geluBack = false
		d.mu.Unlock()
		defer func() { d.mu.Lock(); d.geluBack = true; d.mu.Unlock() }()
		if c := loweredOps(t, d, g); !strings.Contains(c, "SIGMOID=2") {
			t.Errorf("without the mode gelu_back lowered to %s, want the 13-node form", c)
		}
		runAndCompare(t, be, g, args(), 2e-5)
	})
}
