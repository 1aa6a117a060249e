package webgpu

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

func TestAvailable(t *testing.T) {
	a := driver{}.Available()
	if !a.OK {
		testenv.SkipDevice(t, "webgpu", a.Why)
	}
	info, _ := probed()
	if !strings.Contains(a.Why, info.Name) || info.Name == "" {
		t.Errorf("Why %q does not name the adapter %q", a.Why, info.Name)
	}
	if a.Auto != info.GPU {
		t.Errorf("Auto = %t on a %s adapter", a.Auto, info.Kind)
	}
	t.Logf("%+v", a)
}

// withBindLimit lowers the binding limit so that small tensors take the
// split paths that large ones take on a real device.
func withBindLimit(t *testing.T, be *Backend, limit uint64) {
	old := be.bindLimit
	be.bindLimit = limit
	t.Cleanup(func() { be.bindLimit = old })
}

func TestSplitLargeBindings(t *testing.T) {
	be := openTest(t)
	withBindLimit(t, be, 1024) // 256 floats per binding
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int, lo, hi float64) []float32 {
		a := make([]float32, n)
		for i := range a {
			a[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return a
	}
	t.Run("unary+binary+fill", func(t *testing.T) {
		s := []int{7, 301} // 2107 floats: 9 ranges
		g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: s},
			{Op: backend.OpArg, Arg: 1, Shape: s},
			{Op: backend.OpExp, In: []int{0}, Shape: s},
			{Op: backend.OpMul, In: []int{2, 1}, Shape: s},
			{Op: backend.OpFill, Shape: s, A: 0.5},
			{Op: backend.OpSub, In: []int{3, 4}, Shape: s},
		}, Outputs: []backend.Output{{Node: 5, Arg: 2}}}
		checkGraph(t, be, g, [][]float32{fill(2107, -2, 2), fill(2107, -2, 2), make([]float32, 2107)}, 2e-6)
	})
	t.Run("pack+unpack", func(t *testing.T) {
		// 2107 values (9 ranges of them), 1054 words (an odd last word):
		// each range of words binds the values from twice its start
		for _, ops := range [][2]backend.Op{{backend.OpPackF16, backend.OpUnpackF16}, {backend.OpPackBF16, backend.OpUnpackBF16}} {
			g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
				{Op: backend.OpArg, Arg: 0, Shape: []int{7, 301}},
				{Op: ops[0], In: []int{0}, Shape: []int{1054}},
				{Op: ops[1], In: []int{1}, Shape: []int{7, 301}},
			}, Outputs: []backend.Output{{Node: 1, Arg: 1}, {Node: 2, Arg: 2}}}
			checkGraph(t, be, g, [][]float32{fill(2107, 1, 1000), make([]float32, 1054), make([]float32, 2107)}, 0)
		}
	})
	t.Run("get_rows", func(t *testing.T) {
		// 500 rows of 3: the table splits into ranges of rows.
		idx := fill(40, -3, 505)
		for i := range idx {
			idx[i] = float32(int(idx[i]))
		}
		g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{500, 3}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{40}},
			{Op: backend.OpGetRows, In: []int{0, 1}, Shape: []int{40, 3}},
		}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
		checkGraph(t, be, g, [][]float32{fill(1500, -1, 1), idx, make([]float32, 120)}, 0)
	})
	t.Run("adamw", func(t *testing.T) {
		n := 1000
		g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{n}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{n}},
			{Op: backend.OpArg, Arg: 2, Shape: []int{n}},
			{Op: backend.OpArg, Arg: 3, Shape: []int{n}},
			{Op: backend.OpArg, Arg: 4, Shape: []int{7}},
			{Op: backend.OpAdamW, In: []int{0, 1, 2, 3, 4}, Shape: []int{n}},
		}, Outputs: []backend.Output{{Node: 5, Arg: 0}}}
		hp := []float32{0.01, 0.9, 0.999, 1e-8, 0.01, 1 / (1 - 0.9), 1 / (1 - 0.999)}
		checkGraph(t, be, g, [][]float32{fill(n, -1, 1), fill(n, -1, 1), fill(n, -0.1, 0.1), fill(n, 0, 0.1), hp}, 1e-5)
	})
	t.Run("rand_uniform", func(t *testing.T) {
		// 2107 values in ranges of whole blocks; the counters stay global,
		// and a counter offset past 2^32 blocks carries into the high word.
		s := []int{7, 301}
		g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{backend.RandStateLen}},
			{Op: backend.OpRandUniform, In: []int{0}, Shape: s, Start: 1<<32 + 3},
		}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
		checkGraph(t, be, g, [][]float32{backend.RandState(42, 1<<32-100), make([]float32, 2107)}, 0)
	})
	t.Run("unsplittable", func(t *testing.T) {
		g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{30, 30}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{30}},
			{Op: backend.OpAdd, In: []int{0, 1}, Shape: []int{30, 30}},
		}, Outputs: []backend.Output{{Node: 2, Arg: 0}}}
		_, err := be.Compile(g)
		if err == nil || !strings.Contains(err.Error(), "maxStorageBufferBindingSize") {
			t.Fatalf("Compile of a broadcast add over the binding limit: err = %v, want the limit named", err)
		}
	})
}

// TestMemoryPlan checks that a chain of ops reuses intermediates: without
// fusion ten unary ops need two pooled buffers, not ten; fused they are one
// kernel with none.
func TestMemoryPlan(t *testing.T) {
	be := openTest(t)
	s := []int{64, 33}
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: s}}}
	for i := 0; i < 10; i++ {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAffine, In: []int{i}, Shape: s, A: 1.01, B: 0.01})
	}
	g.Outputs = []backend.Output{{Node: 10, Arg: 1}}
	x := make([]float32, 64*33)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for _, c := range []struct {
		fuse         bool
		slots, steps int
	}{{false, 2, 10}, {true, 0, 1}} {
		withFusion(t, be, c.fuse)
		p, err := be.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		pp := p.(*program)
		if len(pp.slots) != c.slots || len(pp.steps) != c.steps {
			t.Errorf("fusion %t: chain of 10 ops uses %d intermediate buffers and %d dispatches, want %d and %d", c.fuse, len(pp.slots), len(pp.steps), c.slots, c.steps)
		}
		p.Release()
		checkGraph(t, be, g, [][]float32{x, make([]float32, len(x))}, 1e-5)
	}
}

// withFusion turns fusion on or off for the rest of the test.
func withFusion(t *testing.T, be *Backend, on bool) {
	old := be.noFuse
	be.noFuse = !on
	t.Cleanup(func() { be.noFuse = old })
}

// TestRebind runs one program over two sets of buffers, so bind groups are
// rebuilt for the second and reused for the first again.
func TestRebind(t *testing.T) {
	be := openTest(t)
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{5}},
		{Op: backend.OpAffine, In: []int{0}, Shape: []int{5}, A: 2, B: 1},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	sets := [2][2]backend.Buffer{}
	for k := range sets {
		for j := range sets[k] {
			b, err := be.Alloc(5)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Free(b)
			sets[k][j] = b
		}
		be.Write(sets[k][0], 0, []float32{float32(k), 1, 2, 3, 4})
	}
	for _, k := range []int{0, 1, 0, 1} {
		if _, err := p.Run(sets[k][:]); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 5)
		if err := be.Read(sets[k][1], 0, got); err != nil {
			t.Fatal(err)
		}
		want := []float32{2*float32(k) + 1, 3, 5, 7, 9}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("set %d: got %v, want %v", k, got, want)
			}
		}
	}
}

func TestMemoryEstimate(t *testing.T) {
	be := openTest(t)
	free0, total, err := be.Memory()
	if errors.Is(err, backend.ErrMemoryUnknown) {
		// A hardware GPU without AG_WEBGPU_MEMORY_MB: no budget to count
		// against (TestMemoryBudget); the bytes allocated are still kept.
		before := be.allocated
		b, err := be.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		if got := be.allocated - before; got != 4<<20 {
			t.Errorf("a 4 MiB Alloc counted %d bytes", got)
		}
		be.Free(b)
		return
	}
	if err != nil || total == 0 || free0 > total {
		t.Fatalf("Memory() = %d, %d, %v", free0, total, err)
	}
	b, err := be.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	free1, _, _ := be.Memory()
	be.Free(b)
	free2, _, _ := be.Memory()
	if free0-free1 != 4<<20 || free2 != free0 {
		t.Errorf("free %d -> %d after a 4 MiB Alloc -> %d after Free", free0, free1, free2)
	}
}

// TestDeviceTime checks the run's device time and RunTimed's per-node
// times against the host clock.
func TestDeviceTime(t *testing.T) {
	be := openTest(t)
	n := 128
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{n, n}},
		{Op: backend.OpArg, Arg: 1, Shape: []int{n, n}},
		{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{n, n}},
		{Op: backend.OpReLU, In: []int{2}, Shape: []int{n, n}},
	}, Outputs: []backend.Output{{Node: 3, Arg: 2}}}
	bufs := make([]backend.Buffer, 3)
	for i := range bufs {
		b, err := be.Alloc(n * n)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free(b)
		bufs[i] = b
	}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	start := time.Now()
	info, err := p.Run(bufs)
	host := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case info.Pending: // the browser: submitted, not waited for nor timed; a read waits
		if info.DeviceTime != 0 || info.Launches != 1 {
			t.Errorf("RunInfo %+v of a pending run: want no time, one launch", info)
		}
		if err := be.Read(bufs[2], 0, make([]float32, 1)); err != nil {
			t.Fatalf("reading a pending run's result: %v", err)
		}
	case info.DeviceTime <= 0 || info.DeviceTime > host || info.Launches != 1:
		t.Errorf("RunInfo %+v for a run of %v host time", info, host)
	}
	times := backend.NewNodeTimes(len(g.Nodes))
	if _, err := p.(backend.NodeTimer).RunTimed(bufs, times); err != nil {
		t.Fatal(err)
	}
	// The ReLU is the matmul's epilogue: one kernel, whose time is split
	// by cost, the product taking nearly all of it (2n^3 flops against a
	// pass over n^2 values).
	d, h := times.Dur, times.How
	if h[2] != backend.TimeSplit || h[3] != backend.TimeSplit || h[0] != backend.TimeNone || d[0] != 0 || !(d[2] > 5*d[3]) || d[3] <= 0 {
		t.Errorf("node times %v (%v): want the matmul's share of the fused kernel far above the ReLU's, args none", d, h)
	}
	t.Logf("device timer %t: run %v (host %v), per node %v", be.Caps().DeviceTimer, info.DeviceTime, host, d)
}
