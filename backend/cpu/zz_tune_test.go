package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

func TestZZTune(t *testing.T) {
	defer func(old microKernel) { kern = old }(kern)
	for _, bl := range [][3]int{{256, 144, 2048}, {384, 144, 2048}, {192, 144, 2048}, {256, 96, 2048}, {256, 240, 2048}, {512, 96, 1024}, {256, 144, 1024}} {
		k := kernels()[0]
		k.kc, k.mc, k.nc = bl[0], bl[1], bl[2]
		kern = k
		var res []float64
		for _, sh := range [][3]int{{1024, 1024, 1024}, {512, 512, 512}, {64, 1024, 1024}} {
			c := New()
			g := &gb{}
			g.out(g.op(backend.OpMatMul, []int{sh[0], sh[1]}, g.arg(sh[0], sh[2]), g.arg(sh[2], sh[1])))
			prog, _ := c.Compile(&g.g)
			args := randArgs(rand.New(rand.NewPCG(1, 1)), g.shapes, -1, 1)
			bufs := make([]backend.Buffer, len(args))
			for i, a := range args { bufs[i], _ = c.Alloc(len(a)); _ = c.Write(bufs[i], 0, a) }
			prog.Run(bufs)
			fl := 2 * float64(sh[0]*sh[1]*sh[2])
			reps := int(6e9/fl) + 1
			c0 := processCPUTime()
			for range reps { prog.Run(bufs) }
			res = append(res, fl*float64(reps)/(processCPUTime()-c0).Seconds()/1e9)
		}
		t.Logf("kc %d mc %d nc %d: %.0f %.0f %.0f GFLOP/cpu-s", bl[0], bl[1], bl[2], res[0], res[1], res[2])
	}
}
