//go:build ggml

package native

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// On ggml-vulkan a one-hot of no more classes than indices (a convnet's
// cross-entropy gradient) is the rows of an identity gathered at the
// indices, two nodes for seven: the reference's numbers at halves, out of
// range and NaN labels (rounded, clamped, NaN as 0).
func TestOneHotIdentityRows(t *testing.T) {
	nan := float32(math.NaN())
	labels := []float32{0, 4, 2.5, 1.49, -3, 9, nan, 3, 1, 2, 0.5, 3.5}
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		arg(0, len(labels)), {Op: backend.OpOneHot, In: []int{0}, Shape: []int{len(labels), 5}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			d := be.(*device)
			if c := loweredOps(t, d, g); !d.isCPU && (!strings.Contains(c, "DIAG=1") || strings.Contains(c, "ARANGE")) {
				t.Errorf("one_hot lowered to %s, want DIAG=1 and no ARANGE", c)
			}
			runAndCompare(t, be, g, [][]float32{labels, make([]float32, 5*len(labels))}, 0)
		})
	}
}
