//go:build ggml

package native

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// With build.sh's patch 0014 a max pool's gradient is one ggml-vulkan node
// (POOL_2D_BACK) where core composed it from about a hundred (a convnet
// step's two pools were half of its nodes), with the reference's numbers
// over overlapping, padded windows; on ggml-cpu it is one custom op.
func TestMaxPoolBackOneNode(t *testing.T) {
	w := backend.Window{KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1}
	xs := []int{3, 5, 13, 11}
	oh, ow := w.Out(xs[2], xs[3])
	gs := []int{xs[0], xs[1], oh, ow}
	table := w.Rows(xs[0], xs[2], xs[3])
	g := &backend.Graph{NumArgs: 4, Nodes: []backend.Node{
		arg(0, xs...), arg(1, gs...), arg(2, len(table)),
		{Op: backend.OpMaxPool2dBack, In: []int{0, 1, 2}, Shape: xs, Perm: w.Attr()},
	}, Outputs: []backend.Output{{Node: 3, Arg: 3}}}
	rng := rand.New(rand.NewPCG(14, 14))
	x := randVals(rng, backend.NumElems(xs))
	for i := range x {
		x[i] = float32(int(x[i]*3)) / 2 // ties
	}
	args := [][]float32{x, randVals(rng, backend.NumElems(gs)), table, make([]float32, len(x))}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			d := be.(*device)
			if !be.Caps().Native(backend.OpMaxPool2dBack) {
				t.Fatalf("max_pool2d_back is not native (probeMaxPoolBack %t: a ggml built without patch 0014?)", d.maxPoolBack)
			}
			want := "POOL_2D_BACK=1"
			if d.isCPU {
				want = "CUSTOM(max_pool_back)=1"
			}
			if c := loweredOps(t, d, g); !strings.Contains(c, want) || strings.Contains(c, "GET_ROWS") {
				t.Errorf("max_pool2d_back lowered to %s, want %s alone", c, want)
			}
			runAndCompare(t, be, g, args, 1e-6)
		})
	}
}
