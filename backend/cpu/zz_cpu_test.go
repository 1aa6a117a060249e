package cpu

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPUEff(t *testing.T) {
	for _, tc := range []struct{ m, n, k int; ta, tb bool }{{1024,1024,1024,false,false},{1024,1024,1024,false,true},{1024,1024,1024,true,false},{512,512,512,false,false},{64,1024,1024,false,false},{1024,1024,64,true,false},{64,1024,1024,false,true}} {
		c := New()
		g := &gb{}
		as, bs := []int{tc.m, tc.k}, []int{tc.k, tc.n}
		if tc.ta { as = []int{tc.k, tc.m} }
		if tc.tb { bs = []int{tc.n, tc.k} }
		g.out(g.node(backend.Node{Op: backend.OpMatMul, In: []int{g.arg(as...), g.arg(bs...)}, Shape: []int{tc.m, tc.n}, TransA: tc.ta, TransB: tc.tb}))
		prog, _ := c.Compile(&g.g)
		args := randArgs(rand.New(rand.NewPCG(40, 1)), g.shapes, -1, 1)
		bufs := make([]backend.Buffer, len(args))
		for i, a := range args { bufs[i], _ = c.Alloc(len(a)); _ = c.Write(bufs[i], 0, a) }
		prog.Run(bufs)
		reps := int(4e9 / float64(2*tc.m*tc.n*tc.k)) + 1
		c0, w0 := cpuTime(), time.Now()
		for range reps { prog.Run(bufs) }
		cpu, wall := cpuTime()-c0, time.Since(w0)
		fl := 2 * float64(tc.m*tc.n*tc.k) * float64(reps)
		t.Logf("%+v: %.0f GFLOP/cpu-s (x2 = %.0f ideal-2core), wall %.0f GFLOP/s", tc, fl/cpu.Seconds()/1e9, 2*fl/cpu.Seconds()/1e9, fl/wall.Seconds()/1e9)
	}
}
