package cpu

import (
	"math/rand/v2"
	"testing"
	"time"
	"sort"
	"fmt"

	"github.com/ag-go/ag/backend"
)

func TestZZProf(t *testing.T) {
	c := New()
	g := mlpStep(64, []int{1024, 1024, 1024, 1024, 1024})
	prog, _ := c.Compile(&g.g)
	args := mlpArgs(rand.New(rand.NewPCG(40, 1)), g)
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args { bufs[i], _ = c.Alloc(len(a)); _ = c.Write(bufs[i], 0, a) }
	times := make([]time.Duration, len(g.g.Nodes))
	tot := make([]time.Duration, len(g.g.Nodes))
	c0 := cpuTime()
	w0 := time.Now()
	for range 10 { prog.(backend.NodeTimer).RunTimed(bufs, times); for i := range times { tot[i] += times[i] } }
	t.Logf("wall %v/step cpu %v/step", time.Since(w0)/10, (cpuTime()-c0)/10)
	byOp := map[string]time.Duration{}
	for i, d := range tot { n := g.g.Nodes[i]; k := n.Op.String(); if n.Op == backend.OpMatMul { k += fmt.Sprint(n.TransA, n.TransB, g.g.Nodes[n.In[0]].Shape, g.g.Nodes[n.In[1]].Shape) }; byOp[k] += d / 10 }
	type kv struct{ k string; d time.Duration }
	var l []kv
	for k, d := range byOp { l = append(l, kv{k, d}) }
	sort.Slice(l, func(i, j int) bool { return l[i].d > l[j].d })
	for _, e := range l { t.Logf("%-50s %v", e.k, e.d) }
}
