//go:build !js

package webgpu

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/webgpu/gpu"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// The measurements behind the matmul tilings, the split thresholds and the
// executor's choices, run on a real GPU with AG_WEBGPU_SWEEP=1 (they print
// tables and check nothing but that the runs succeed):
//
//	AG_WEBGPU_SWEEP=1 go test -run 'TestSweep' -v ./backend/webgpu/

func sweepOn(t *testing.T) *Backend {
	if os.Getenv("AG_WEBGPU_SWEEP") == "" {
		t.Skip("set AG_WEBGPU_SWEEP=1 to run the GPU sweeps")
	}
	return waitedRuns(t, openTest(t))
}

// devTimes runs p reps times and returns the median device time and the
// median wall time of Run.
func devTimes(t *testing.T, p backend.Program, bufs []backend.Buffer, reps int) (dev, wall time.Duration) {
	var ds, ws []time.Duration
	for range reps {
		t0 := time.Now()
		info, err := p.Run(bufs)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, time.Since(t0))
		ds = append(ds, info.DeviceTime)
	}
	slices.Sort(ds)
	slices.Sort(ws)
	return ds[len(ds)/2], ws[len(ws)/2]
}

func allocFilled(t *testing.T, be *Backend, n int) backend.Buffer {
	b, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(i%13) / 26
	}
	if err := be.Write(b, 0, d); err != nil {
		t.Fatal(err)
	}
	return b
}

func mmGraph(m, k, n int, ta, tb bool) *backend.Graph {
	sa, sb := []int{m, k}, []int{k, n}
	if ta {
		sa = []int{k, m}
	}
	if tb {
		sb = []int{n, k}
	}
	return &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: sa}, {Op: backend.OpArg, Arg: 1, Shape: sb},
		{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{m, n}, TransA: ta, TransB: tb},
	}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
}

// measureTF compiles g and returns its TFLOP/s by the device clock.
func measureTF(t *testing.T, be *Backend, g *backend.Graph, bufs []backend.Buffer, flops float64) string {
	p, err := be.Compile(g)
	if err != nil {
		return "error"
	}
	defer p.Release()
	if _, err := p.Run(bufs); err != nil {
		return "error"
	}
	reps := 15
	if flops > 1e11 {
		reps = 7
	}
	d, _ := devTimes(t, p, bufs, reps)
	return fmt.Sprintf("%.1f", flops/d.Seconds()/1e12)
}

// TestSweepMatmul times tilings on the square benchmark shapes, and tilings
// with K split on the MLP step's shapes (forward, dX = dY W^T,
// dW = X^T dY), by the device clock.
func TestSweepMatmul(t *testing.T) {
	be := sweepOn(t)
	type shape struct {
		m, k, n int
		ta, tb  bool
	}
	big := []shape{{4096, 4096, 4096, false, false}, {4096, 4096, 4096, true, false}, {4096, 4096, 4096, false, true},
		{2048, 2048, 2048, false, false}, {1024, 4096, 1024, true, false}, {1024, 4096, 1024, false, true}, {1024, 1024, 1024, false, false}, {1024, 1024, 1024, false, true}, {1024, 1024, 1024, true, false},
		// the products of a 4096-wide layer at batch 1024
		{1024, 4096, 4096, false, false}, {1024, 4096, 4096, false, true}, {4096, 1024, 4096, true, false}}
	bigCfgs := []mmCfg{mmLarge, mmWide, {BM: 128, BN: 128, BK: 16, TM: 8, TN: 8}, {BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, DB: true}, mmMedium, mmSmall, {BM: 64, BN: 64, BK: 8, TM: 8, TN: 8}}
	bigCfgs = append(bigCfgs, extraTilings(t)...)
	skinny := []shape{{256, 1024, 1024, false, false}, {256, 1024, 1024, false, true}, {1024, 256, 1024, true, false},
		{64, 1024, 1024, false, false}, {64, 1024, 1024, false, true}, {1024, 64, 1024, true, false},
		{1024, 1024, 1024, false, true}, {512, 1024, 1024, false, false},
		// the three products of a 1024-wide layer at batch 1024: one wave
		// of medium tiles on a GPU of 132 multiprocessors
		{1024, 1024, 1024, false, false}, {1024, 1024, 1024, true, false}, {2048, 1024, 1024, false, false}}
	skinnyCfgs := []mmCfg{mmSmall, {BM: 64, BN: 32, BK: 16, TM: 4, TN: 4, DB: true}, mmMedium, mmWide, mmLarge}
	skinnyCfgs = append(skinnyCfgs, extraTilings(t)...)
	splits := []int{1, 2, 4, 8, 16}
	var b strings.Builder
	row := func(s shape, plans []mmPlan) {
		g := mmGraph(s.m, s.k, s.n, s.ta, s.tb)
		bufs := []backend.Buffer{allocFilled(t, be, s.m*s.k), allocFilled(t, be, s.k*s.n), allocFilled(t, be, s.m*s.n)}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		fmt.Fprintf(&b, "%-22s", fmt.Sprintf("%dx%dx%d %t %t", s.m, s.k, s.n, s.ta, s.tb))
		for _, pl := range plans {
			if !pl.cfg.fits(*be.info) {
				fmt.Fprintf(&b, " %9s", "-")
				continue
			}
			be.matmulForce = &pl
			fmt.Fprintf(&b, " %9s", measureTF(t, be, g, bufs, flops))
		}
		be.matmulForce = nil
		auto := pickMatmul(*be.info, be.info.GPU, s.m, s.n, s.k, 1, s.ta, s.tb, be.bindLimit)
		fmt.Fprintf(&b, "  auto %s %s/%d\n", measureTF(t, be, g, bufs, flops), auto.cfg, auto.split)
		for _, x := range bufs {
			be.Free(x)
		}
	}
	var plans []mmPlan
	fmt.Fprintf(&b, "%-22s", "shape (MxKxN ta tb)")
	for _, c := range bigCfgs {
		plans = append(plans, mmPlan{cfg: c, split: 1})
		fmt.Fprintf(&b, " %9s", strings.TrimSuffix(c.String(), "/8x8")+map[bool]string{true: "", false: ""}[c.DB])
	}
	b.WriteString("\n")
	for _, s := range big {
		row(s, plans)
	}
	// B^T as a transpose and a product of B not transposed, the plan's
	// tiling: what an NT product costs when B is transposed first.
	b.WriteString("\nNT as permute + NN (auto tiling):\n")
	for _, s := range big {
		if !s.tb || s.ta {
			continue
		}
		g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{s.m, s.k}}, {Op: backend.OpArg, Arg: 1, Shape: []int{s.n, s.k}},
			{Op: backend.OpPermute, In: []int{1}, Shape: []int{s.k, s.n}, Perm: []int{1, 0}},
			{Op: backend.OpMatMul, In: []int{0, 2}, Shape: []int{s.m, s.n}},
		}, Outputs: []backend.Output{{Node: 3, Arg: 2}}}
		bufs := []backend.Buffer{allocFilled(t, be, s.m*s.k), allocFilled(t, be, s.k*s.n), allocFilled(t, be, s.m*s.n)}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		fmt.Fprintf(&b, "%-22s %9s\n", fmt.Sprintf("%dx%dx%d %t %t", s.m, s.k, s.n, s.ta, s.tb), measureTF(t, be, g, bufs, flops))
		for _, x := range bufs {
			be.Free(x)
		}
	}
	plans = nil
	fmt.Fprintf(&b, "\n%-22s", "skinny: tiling/split")
	for _, c := range skinnyCfgs {
		for _, sp := range splits {
			plans = append(plans, mmPlan{cfg: c, split: sp})
			fmt.Fprintf(&b, " %9s", fmt.Sprintf("%dx%dx%d%s/%d", c.BM, c.BN, c.BK, map[bool]string{true: "d", false: ""}[c.DB], sp))
		}
	}
	b.WriteString("\n")
	for _, s := range skinny {
		row(s, plans)
	}
	t.Logf("matmul TFLOP/s by the device clock:\n%s", b.String())
	t.Logf("device limits: %+v", be.info)
}

// TestSweepReduce times the reductions of the MLP step (the loss over all
// elements, the bias gradients along the batch) by the device clock.
func TestSweepReduce(t *testing.T) {
	be := sweepOn(t)
	for _, c := range []struct{ rows, cols, axis int }{{1, 64 * 1024, 1}, {1, 256 * 1024, 1}, {1, 1024 * 1024, 1},
		{64, 1024, 0}, {256, 1024, 0}, {1024, 1024, 0}, {1024, 1024, 1},
		{1 << 20, 64, 0}} { // the last: a bias gradient over 1M rows
		s := []int{c.rows, c.cols}
		o := []int{c.rows, c.cols}
		o[c.axis] = 1
		g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: s},
			{Op: backend.OpMul, In: []int{0, 0}, Shape: s},
			{Op: backend.OpSum, In: []int{1}, Shape: o, Axis: c.axis}}, Outputs: []backend.Output{{Node: 2, Arg: 1}}}
		bufs := []backend.Buffer{allocFilled(t, be, c.rows*c.cols), allocFilled(t, be, backend.NumElems(o))}
		p, err := be.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		p.Run(bufs)
		d, w := devTimes(t, p, bufs, 20)
		t.Logf("sum of squares %v axis %d: %d dispatches, device %v (wall %v)", s, c.axis, len(p.(*program).steps), d, w)
		p.Release()
		for _, x := range bufs {
			be.Free(x)
		}
	}
}

// TestSweepDispatch measures the cost of a dispatch in a batched run (a
// chain of 200 small adds, unfused) by wall and device clock, with the
// blocking and the spinning wait, and the fixed costs of a run, a write and
// a read of one value.
func TestSweepDispatch(t *testing.T) {
	be := sweepOn(t)
	withFusion(t, be, false)
	const chain = 200
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{256}}}}
	for i := 0; i < chain; i++ {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAdd, In: []int{i, 0}, Shape: []int{256}})
	}
	g.Outputs = []backend.Output{{Node: chain, Arg: 1}}
	one := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{256}},
		{Op: backend.OpNeg, In: []int{0}, Shape: []int{256}}}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	bufs := []backend.Buffer{allocFilled(t, be, 256), allocFilled(t, be, 256)}
	pc, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := be.Compile(one)
	if err != nil {
		t.Fatal(err)
	}
	saved := be.info.Timestamps
	oldSpin := gpu.SetSpin(be.d, false)
	defer func() { be.info.Timestamps = saved; gpu.SetSpin(be.d, oldSpin) }()
	for _, spin := range []bool{false, true} {
		for _, ts := range []bool{false, true} {
			gpu.SetSpin(be.d, spin)
			be.info.Timestamps = ts && saved
			pc.Run(bufs)
			dc, wc := devTimes(t, pc, bufs, 30)
			d1, w1 := devTimes(t, p1, bufs, 50)
			var rw []time.Duration
			x := make([]float32, 1)
			for range 50 {
				t0 := time.Now()
				if err := be.Read(bufs[1], 0, x); err != nil {
					t.Fatal(err)
				}
				rw = append(rw, time.Since(t0))
			}
			slices.Sort(rw)
			var ww []time.Duration
			for range 50 {
				t0 := time.Now()
				if err := be.Write(bufs[0], 0, x); err != nil {
					t.Fatal(err)
				}
				ww = append(ww, time.Since(t0))
			}
			slices.Sort(ww)
			t.Logf("spin %-5t timestamps %-5t: chain of %d: wall %.1f us/dispatch, device %.1f us/dispatch (run wall %v); one dispatch: wall %v device %v; read 1 value %v; write 1 value %v",
				spin, be.info.Timestamps, chain, float64(wc.Microseconds())/chain, float64(dc.Microseconds())/chain, wc, w1, d1, rw[len(rw)/2], ww[len(ww)/2])
		}
	}
	// Host-side cost of recording alone: encode without submitting.
	pp := pc.(*program)
	ds := make([]gpu.Dispatch, 0, len(pp.steps))
	for i := range pp.steps {
		bg, _ := pp.bindGroup(&pp.steps[i], []*buffer{bufs[0].(*buffer), bufs[1].(*buffer)})
		s := &pp.steps[i]
		ds = append(ds, gpu.Dispatch{Pipe: s.pipe, Bind: bg, X: s.x, Y: s.y, Z: s.z})
	}
	t0 := time.Now()
	const encReps = 20
	for range encReps {
		if err := gpu.EncodeOnly(be.d, ds); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("encode only (no submit): %.2f us/dispatch", float64(time.Since(t0).Microseconds())/encReps/chain)
	pc.Release()
	p1.Release()
}

// recDriver wraps the webgpu driver to keep the largest graph core compiles
// and the args of its last run.
type recDriver struct{ rec *recorded }
type recorded struct {
	g    *backend.Graph
	args []backend.Buffer // of the last run of the largest graph
}
type recBackend struct {
	sharedBackend // closing it leaves the shared backend open
	rec           *recorded
}
type recProgram struct {
	backend.Program
	g   *backend.Graph
	rec *recorded
}

func (d recDriver) Open() (backend.Backend, error) {
	b, err := sharedDriver{}.Open()
	if err != nil {
		return nil, err
	}
	return &recBackend{sharedBackend: b.(sharedBackend), rec: d.rec}, nil
}
func (d recDriver) Available() backend.Availability { return sharedDriver{}.Available() }
func (b *recBackend) Compile(g *backend.Graph) (backend.Program, error) {
	p, err := b.Backend.Compile(g)
	if err != nil {
		return nil, err
	}
	return &recProgram{Program: p, g: g, rec: b.rec}, nil
}
func (p *recProgram) Run(args []backend.Buffer) (backend.RunInfo, error) {
	if p.rec.g == nil || len(p.g.Nodes) > len(p.rec.g.Nodes) {
		gc := *p.g
		gc.Nodes = slices.Clone(p.g.Nodes)
		p.rec.g = &gc
	}
	if len(p.g.Nodes) == len(p.rec.g.Nodes) {
		p.rec.args = append(p.rec.args[:0], args...)
	}
	return p.Program.Run(args)
}

var recStore = &recorded{}

func init() { backend.Register("webgpu-rec", 0, recDriver{rec: recStore}) }

// TestSweepStep times core's 4x1024 MLP step (AG_SWEEP_SIZE=DxW for
// another depth and width) at each batch (AG_SWEEP_BATCH, default
// 64,256,1024) in both modes twice, then the recorded captured program with
// its real args: fused and not, under several matmul plans, and each
// kernel's device time.
func TestSweepStep(t *testing.T) {
	be := sweepOn(t)
	batches := []int{64, 256, 1024}
	if v := os.Getenv("AG_SWEEP_BATCH"); v != "" {
		batches = nil
		for _, f := range strings.Split(v, ",") {
			var b int
			fmt.Sscan(f, &b)
			batches = append(batches, b)
		}
	}
	depth, width := 4, 1024
	if v := os.Getenv("AG_SWEEP_SIZE"); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &depth, &width); err != nil {
			t.Fatalf("AG_SWEEP_SIZE=%q: want DEPTHxWIDTH", v)
		}
	}
	// (AG_SWEEP_GPUPLANS=1: a GPU's matmul plans on a software adapter,
	// to see them here)
	be.gpuPlans = os.Getenv("AG_SWEEP_GPUPLANS") != ""
	defer func() { be.gpuPlans = false }()
	for _, batch := range batches {
		sweepStep(t, be, depth, width, batch)
	}
}

func sweepStep(t *testing.T, be *Backend, depth, width, batch int) {
	*recStore = recorded{}
	dev, err := core.Open("webgpu-rec")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := workload.New(dev, workload.Config{Width: width, Depth: depth, Batch: batch, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	med := func(mode workload.Mode) time.Duration {
		if _, _, err := m.Timed(mode, 3); err != nil {
			t.Fatal(err)
		}
		ts, _, err := m.Timed(mode, 20)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ts)
		return ts[len(ts)/2]
	}
	for k := range 2 {
		t.Logf("batch %d round %d: core step lazy %v captured %v", batch, k, med(workload.Lazy), med(workload.Captured))
	}
	g, args := recStore.g, recStore.args
	doneTimes := map[string]bool{}
	type variant struct {
		name   string
		fuse   bool
		force  *mmPlan
		tbRows int
	}
	vs := []variant{{"auto fused", true, nil, 0}, {"auto fused noTB", true, nil, -1}, {"auto fused tB1024", true, nil, 1024},
		{"auto unfused", false, nil, 0}}
	vs = append(vs, vs...) // twice, alternating
	vs = append(vs, variant{"medium/1 fused", true, &mmPlan{cfg: mmMedium, split: 1}, 0}, variant{"wide/1 fused", true, &mmPlan{cfg: mmWide, split: 1}, 0})
	for _, v := range vs {
		be.noFuse, be.matmulForce, be.tbRows = !v.fuse, v.force, v.tbRows
		p, err := be.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		p.Run(args)
		d, w := devTimes(t, p, args, 20)
		t.Logf("batch %d captured program %-15s %d dispatches: device %v wall %v", batch, v.name, len(p.(*program).steps), d, w)
		if strings.HasPrefix(v.name, "auto fused") && !doneTimes[v.name] {
			doneTimes[v.name] = true
			times := backend.NewNodeTimes(len(g.Nodes))
			sum := make([]time.Duration, len(g.Nodes))
			for range 5 {
				if _, err := p.(backend.NodeTimer).RunTimed(args, times); err != nil {
					t.Fatal(err)
				}
				for i := range times.Dur {
					sum[i] += times.Dur[i]
				}
			}
			var bl strings.Builder
			kn := map[int][]string{}
			for _, st := range p.(*program).steps {
				kn[st.node] = append(kn[st.node], st.k.name)
			}
			for i := range sum {
				if sum[i] > 0 {
					n := g.Nodes[i]
					tr := ""
					if n.Op == backend.OpMatMul {
						tr = map[bool]string{false: "N", true: "T"}[n.TransA] + map[bool]string{false: "N", true: "T"}[n.TransB]
					}
					fmt.Fprintf(&bl, "  node %3d %-10s %-2s %-14s %8.1f us  %s\n", i, n.Op, tr, fmt.Sprint(n.Shape), float64(sum[i].Nanoseconds())/5/1e3, strings.Join(kn[i], " "))
				}
			}
			t.Logf("%s: kernels in graph order:\n%s", v.name, bl.String())
		}
		p.Release()
	}
	be.noFuse, be.matmulForce, be.tbRows = false, nil, 0
	// The step again after the program experiments.
	t.Logf("batch %d after: core step lazy %v captured %v", batch, med(workload.Lazy), med(workload.Captured))
}

// attnSweepGraph is attention over [bh, t, d] heads with a keep of ones
// (broadcast) or a causal [t, t] mask, or, with unfused, the same without
// a mask as matmul, scale, softmax, matmul (the [t, t] scores stored).
func attnSweepGraph(bh, t, d int, causal, unfused bool) (*backend.Graph, []int) {
	s := []int{bh, t, d}
	ks := []int{1, 1, 1}
	if causal {
		ks = []int{1, t, t}
	}
	g := &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: s}, {Op: backend.OpArg, Arg: 1, Shape: s}, {Op: backend.OpArg, Arg: 2, Shape: s}, {Op: backend.OpArg, Arg: 3, Shape: ks}}}
	scale := float32(1 / math.Sqrt(float64(d)))
	if unfused {
		st := []int{bh, t, t}
		g.Nodes = append(g.Nodes,
			backend.Node{Op: backend.OpMatMul, In: []int{0, 1}, Shape: st, TransB: true},
			backend.Node{Op: backend.OpAffine, In: []int{4}, Shape: st, A: scale},
			backend.Node{Op: backend.OpSoftmax, In: []int{5}, Shape: st},
			backend.Node{Op: backend.OpMatMul, In: []int{6, 2}, Shape: s})
	} else {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAttention, In: []int{0, 1, 2, 3}, Shape: s, A: scale})
	}
	g.Outputs = []backend.Output{{Node: len(g.Nodes) - 1, Arg: 4}}
	return g, []int{bh * t * d, bh * t * d, bh * t * d, backend.NumElems(ks), bh * t * d}
}

// TestSweepAttention times attention on transformer shapes by the device
// clock (TFLOP/s counting 4*T*T*D per head, a causal mask's skipped half
// included), under tilings other than the default (BK is halved where a
// tiling does not fit in 16 KiB) and against the unfused
// matmul-softmax-matmul.
func TestSweepAttention(t *testing.T) {
	be := sweepOn(t)
	type shape struct{ bh, t, d int }
	shapes := []shape{{32, 128, 64}, {64, 256, 64}, {32, 512, 64}, {32, 1024, 64}, {128, 1024, 64}, {16, 2048, 64},
		{128, 256, 32}, {32, 1024, 32}, {32, 512, 128}, {32, 1024, 128}, {8, 1024, 256}, {1, 64, 64}}
	d := attnDefault
	tunings := []struct {
		name string
		tu   attnTuning
	}{{"default", d}}
	alt := func(name string, f func(*attnTuning)) {
		tu := d
		f(&tu)
		tunings = append(tunings, struct {
			name string
			tu   attnTuning
		}{name, tu})
	}
	alt("BQ64", func(tu *attnTuning) { tu.BQ = 64 })
	alt("BQ64BK16", func(tu *attnTuning) { tu.BQ, tu.BK, tu.BKChunks = 64, 16, 16 })
	alt("BQ32", func(tu *attnTuning) { tu.BQ = 32 })
	alt("nosplit", func(tu *attnTuning) { tu.SplitBelow = 0 })
	alt("split512", func(tu *attnTuning) { tu.SplitBelow = 512 })
	alt("chunk32", func(tu *attnTuning) { tu.Chunk4 = 32 })
	alt("slice32", func(tu *attnTuning) { tu.Slice4 = 32; tu.BKChunks = 8 })
	alt("c32s32", func(tu *attnTuning) { tu.Chunk4, tu.Slice4, tu.BK = 32, 32, 8 })
	// The GPU's clock rises under load (an H200 idles at 345 MHz): half a
	// second of the largest shape first, or the first rows measure the
	// ramp (the same tiling read 6.5 TFLOP/s first in a row, 9.4 later).
	{
		g, sizes := attnSweepGraph(128, 1024, 64, false, false)
		bufs := make([]backend.Buffer, len(sizes))
		for i, n := range sizes {
			bufs[i] = allocFilled(t, be, n)
		}
		p, err := be.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		for start := time.Now(); time.Since(start) < time.Second/2; {
			p.Run(bufs)
		}
		p.Release()
		for _, x := range bufs {
			be.Free(x)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-6s", "bh x t x d", "mask")
	for _, tu := range tunings {
		fmt.Fprintf(&b, " %9s", tu.name)
	}
	fmt.Fprintf(&b, " %9s %s\n", "unfused", "(TFLOP/s; default's ms and dispatches)")
	for _, s := range shapes {
		for _, causal := range []bool{false, true} {
			flops := 4 * float64(s.bh) * float64(s.t) * float64(s.t) * float64(s.d)
			g, sizes := attnSweepGraph(s.bh, s.t, s.d, causal, false)
			bufs := make([]backend.Buffer, len(sizes))
			for i, n := range sizes {
				bufs[i] = allocFilled(t, be, n)
			}
			keep := make([]float32, sizes[3])
			for i := range keep {
				if !causal || i%s.t <= i/s.t {
					keep[i] = 1
				}
			}
			if err := be.Write(bufs[3], 0, keep); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%-16s %-6s", fmt.Sprintf("%dx%dx%d", s.bh, s.t, s.d), map[bool]string{true: "causal", false: "all"}[causal])
			var info string
			for k, tu := range tunings {
				be.attnForce = &tu.tu
				fmt.Fprintf(&b, " %9s", measureTF(t, be, g, bufs, flops))
				if k == 0 {
					p, err := be.Compile(g)
					if err == nil {
						p.Run(bufs)
						dt, wt := devTimes(t, p, bufs, 5)
						var names []string
						for _, st := range p.(*program).steps {
							names = append(names, fmt.Sprintf("%s[%dx%d]", st.k.name, st.x, st.y))
						}
						info = fmt.Sprintf("%.3f ms (wall %.3f) %v", dt.Seconds()*1e3, wt.Seconds()*1e3, names)
						p.Release()
					}
				}
			}
			be.attnForce = nil
			un := "-"
			if !causal && s.bh*s.t*s.t*4 <= int(be.bindLimit) {
				ug, _ := attnSweepGraph(s.bh, s.t, s.d, false, true)
				un = measureTF(t, be, ug, bufs, flops)
			}
			fmt.Fprintf(&b, " %9s %s\n", un, info)
			for _, x := range bufs {
				be.Free(x)
			}
		}
	}
	t.Logf("attention TFLOP/s by the device clock:\n%s", b.String())
}

// fmaKernel is the matmul's inner step without the matmul: each of 128
// invocations updates (4 rm) x (4 rn) accumulators (rm*rn vec4) with
// fma(splat(a[j]), b, c) 16 times per loop trip, P[0] trips. Its operands
// come from registers (src "regs"), from workgroup memory at the matmul's
// thread-dependent indices (which naga clamps: "lds"), or from workgroup
// memory at constant indices (no clamp: "ldsconst"). It tells what the
// WGSL toolchain lets an SGEMM's inner loop reach on a GPU, apart from its
// global memory traffic.
func fmaKernel(src string, rm, rn int) *kernel {
	var w strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }
	// The thread-major layouts ("ldst"): invocation ty's vec4s of all 16
	// steps are one row of At[buf][ty], padded to an odd length so that
	// neighbouring rows start in different banks; the only dynamic index
	// is ty (tx), which the compiler clamps once.
	la, lb := 16*rm+1, 16*rn+1
	if src != "ldst" {
		pr("var<workgroup> As: array<vec4<f32>, 1024>;\nvar<workgroup> Bs: array<vec4<f32>, 512>;\n")
	} else {
		pr("var<workgroup> At: array<array<array<vec4<f32>, %d>, 16>, 2>;\n", la)
		pr("var<workgroup> Bt: array<array<array<vec4<f32>, %d>, 8>, 2>;\n", lb)
	}
	pr("@compute @workgroup_size(128)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n")
	pr("\tlet tx = lid %% 8u; let ty = lid / 8u;\n")
	if src == "ldst" {
		pr("\tfor (var i = lid; i < %du; i = i + 128u) { At[i / %du][(i / %du) %% 16u][i %% %du] = vec4<f32>(Y[i %% 64u]); }\n", 2*16*la, 16*la, la, la)
		pr("\tfor (var i = lid; i < %du; i = i + 128u) { Bt[i / %du][(i / %du) %% 8u][i %% %du] = vec4<f32>(Y[(i + 7u) %% 64u]); }\n", 2*8*lb, 8*lb, lb, lb)
	} else {
		pr("\tfor (var i = lid; i < 1024u; i = i + 128u) { As[i] = vec4<f32>(Y[i %% 64u]); }\n")
		pr("\tfor (var i = lid; i < 512u; i = i + 128u) { Bs[i] = vec4<f32>(Y[(i + 7u) %% 64u]); }\n")
	}
	pr("\tworkgroupBarrier();\n")
	pr("\tlet r0 = vec4<f32>(Y[lid %% 64u]);\n")
	sw := []string{"xyzw", "yzwx", "zwxy", "wxyz"}
	for q := 0; q < rm; q++ {
		pr("\tlet ra%d = r0.%s;\n", q, sw[q%4])
	}
	for q := 0; q < rn; q++ {
		pr("\tlet rb%d = r0.%s;\n", q, sw[(q+1)%4])
	}
	for r := 0; r < 4*rm; r++ {
		for q := 0; q < rn; q++ {
			pr("\tvar c%d_%d = vec4<f32>(0.0);\n", r, q)
		}
	}
	// "ldsb", "ldsu" and "ldst" synchronize after every 16 steps as the
	// matmul does (which also keeps the compiler from hoisting the loads
	// out of the loop); "ldsu" and "ldst" unroll two trips so that the
	// buffer is a constant.
	halves := []string{"(it & 1u) * 512u"}
	step := "1u"
	if src == "ldsu" || src == "ldst" {
		halves = []string{"0u", "512u"}
		step = "2u"
	}
	pr("\tfor (var it = 0u; it < P[0]; it = it + %s) {\n", step)
	for hi, half := range halves {
		pr("\t\tlet o%d = %s;\n", hi, half)
		for kk := 0; kk < 16; kk++ {
			pr("\t\t{\n")
			// operand name, its registers' name, its array, the array's
			// offset and thread index, the row stride per kk and per q
			load := func(n int, v, reg, arr, off, thr string, row, step int) {
				for q := 0; q < n; q++ {
					switch src {
					case "regs":
						pr("\t\tlet %s%d = %s%d;\n", v, q, reg, q)
					case "lds", "ldsb", "ldsu":
						pr("\t\tlet %s%d = %s[%s + %du + %s + %du];\n", v, q, arr, off, kk*row, thr, q*step)
					case "ldsconst":
						pr("\t\tlet %s%d = %s[%du];\n", v, q, arr, kk*row+q*step)
					case "ldst":
						pr("\t\tlet %s%d = %st[%d][%s][%d];\n", v, q, arr[:1], hi, thr, kk*n+q)
					default:
						panic("fmaKernel: unknown source " + src)
					}
				}
			}
			load(rm, "a", "ra", "As", fmt.Sprintf("o%d", hi), "ty", 32, 16)
			load(rn, "b", "rb", "Bs", fmt.Sprintf("(o%d >> 1u)", hi), "tx", 16, 8)
			for qa := 0; qa < rm; qa++ {
				for j := 0; j < 4; j++ {
					for qb := 0; qb < rn; qb++ {
						v := fmt.Sprintf("c%d_%d", qa*4+j, qb)
						pr("\t\t%s = fma(vec4<f32>(a%d[%d]), b%d, %s);\n", v, qa, j, qb, v)
					}
				}
			}
			pr("\t\t}\n")
		}
		if src != "regs" && src != "lds" && src != "ldsconst" {
			pr("\t\tworkgroupBarrier();\n")
		}
	}
	pr("\t}\n\tvar s = vec4<f32>(0.0);\n")
	for r := 0; r < 4*rm; r++ {
		for q := 0; q < rn; q++ {
			pr("\ts = s + c%d_%d;\n", r, q)
		}
	}
	pr("\tY[64u + ((wid.y * nwg.x + wid.x) * 128u + lid) %% 4096u] = s.x + s.y + s.z + s.w;\n}\n")
	return newKernel(fmt.Sprintf("fma_%s_%dx%d", src, rm, rn), []bindDecl{{name: "Y", rw: true}}, w.String())
}

// TestSweepFMA times fmaKernel's three sources by the device clock.
func TestSweepFMA(t *testing.T) {
	be := sweepOn(t)
	be.mu.Lock()
	defer be.mu.Unlock()
	if !be.info.Timestamps {
		t.Skip("TestSweepFMA needs timestamp queries")
	}
	pb, err := be.newBuffer(4)
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(pb)
	yb, err := be.newBuffer(4 * (64 + 4096))
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(yb)
	ones := make([]float32, 64)
	for i := range ones {
		ones[i] = 1e-3 * float32(i%7)
	}
	if err := be.d.Write(yb, 0, gpu.BytesOf(ones)); err != nil {
		t.Fatal(err)
	}
	trips, groups := 256, 132*64 // about 0.3 TFLOP: ~10 ms on an H200
	if !be.info.GPU {
		trips, groups = 8, 16
	}
	if err := be.d.Write(pb, 0, gpu.BytesOf([]uint32{uint32(trips)})); err != nil {
		t.Fatal(err)
	}
	type variant struct {
		src    string
		rm, rn int
	}
	var vs []variant
	for range 2 {
		vs = append(vs, variant{"regs", 2, 2}, variant{"lds", 2, 2}, variant{"ldsconst", 2, 2},
			variant{"ldsb", 2, 2}, variant{"ldsu", 2, 2}, variant{"ldst", 2, 2},
			variant{"ldsb", 2, 4}, variant{"ldst", 2, 4}, variant{"ldst", 4, 2})
	}
	for _, v := range vs {
		src := fmt.Sprintf("%s %dx%d", v.src, 4*v.rm, 4*v.rn)
		pipe, err := be.pipeline(fmaKernel(v.src, v.rm, v.rn))
		if err != nil {
			t.Fatal(err)
		}
		bg, err := be.d.NewBindGroup(pipe, []gpu.BindEntry{{Buf: pb, Size: 4}, {Buf: yb, Size: 4 * (64 + 4096)}})
		if err != nil {
			t.Fatal(err)
		}
		x := min(groups, int(be.info.MaxWGPerDim))
		var ds []time.Duration
		for range 7 {
			ticks, err := be.d.Run([][]gpu.Dispatch{{{Pipe: pipe, Bind: bg, X: uint32(x), Y: uint32(ceilDiv(groups, x)), Z: 1}}}, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Duration(ticks[1]-ticks[0]))
		}
		be.d.ReleaseBindGroup(bg)
		slices.Sort(ds)
		flops := float64(groups) * 128 * float64(trips) * 16 * float64(16*v.rm*v.rn) * 2
		t.Logf("fma %-14s %v: %.1f TFLOP/s", src, ds[3], flops/ds[3].Seconds()/1e12)
	}
}

// TestSweepTN times products in the three layouts (A or B stored
// transposed) by tiling and K split, next to the auto plan
// (AG_SWEEP_LAYOUTS=TN,NN: only those layouts); and the transposes that
// turn one layout into another.
func TestSweepTN(t *testing.T) {
	be := sweepOn(t)
	type shape struct{ m, k, n int }
	shapes := []shape{{4096, 4096, 4096}, {2048, 2048, 2048}, {4096, 1024, 1024}, {1024, 4096, 4096}, {4096, 1024, 4096}, {1024, 4096, 1024}, {1024, 1024, 1024}}
	layouts := map[string]bool{"NN": true, "NT": true, "TN": true}
	if v := os.Getenv("AG_SWEEP_LAYOUTS"); v != "" {
		want := map[string]bool{}
		for _, l := range strings.Split(v, ",") {
			if !layouts[l] {
				t.Fatalf("AG_SWEEP_LAYOUTS=%q: %q is no layout; want a comma-separated list of NN, NT and TN", v, l)
			}
			want[l] = true
		}
		layouts = want
	}
	big := mmCfg{BM: 128, BN: 128, BK: 32, TM: 8, TN: 8}
	cfgs := []mmCfg{mmWide, big, {BM: 128, BN: 128, BK: 16, TM: 8, TN: 8}, {BM: 256, BN: 128, BK: 16, TM: 8, TN: 8}}
	cfgs = append(cfgs, extraTilings(t)...)
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %6s %5s", "MxKxN", "layout", "auto")
	for _, c := range cfgs {
		fmt.Fprintf(&b, " %16s", c)
	}
	b.WriteString("\n")
	for _, s := range shapes {
		bufs := []backend.Buffer{allocFilled(t, be, s.m*s.k), allocFilled(t, be, s.k*s.n), allocFilled(t, be, s.m*s.n)}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		for _, l := range []struct {
			name   string
			ta, tb bool
		}{{"NN", false, false}, {"NT", false, true}, {"TN", true, false}} {
			if !layouts[l.name] {
				continue
			}
			g := mmGraph(s.m, s.k, s.n, l.ta, l.tb)
			fmt.Fprintf(&b, "%-16s %6s %5s", fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n), l.name, measureTF(t, be, g, bufs, flops))
			for _, c := range cfgs {
				if !c.fits(*be.info) {
					fmt.Fprintf(&b, " %16s", "-")
					continue
				}
				var vs []string
				for _, sp := range []int{1, 2, 4} {
					if sp > 1 && ceilDiv(s.m, c.BM)*ceilDiv(s.n, c.BN)*sp > 1024 {
						break
					}
					be.matmulForce = &mmPlan{cfg: c, split: sp}
					vs = append(vs, measureTF(t, be, g, bufs, flops))
				}
				be.matmulForce = nil
				fmt.Fprintf(&b, " %16s", strings.Join(vs, "/"))
			}
			b.WriteString("\n")
		}
		for _, x := range bufs {
			be.Free(x)
		}
	}
	// The transposes: [r, c] -> [c, r].
	for _, rc := range [][2]int{{4096, 4096}, {4096, 1024}, {1024, 4096}, {2048, 2048}, {1024, 1024}} {
		r, c := rc[0], rc[1]
		g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{r, c}},
			{Op: backend.OpPermute, In: []int{0}, Shape: []int{c, r}, Perm: []int{1, 0}}}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
		bufs := []backend.Buffer{allocFilled(t, be, r*c), allocFilled(t, be, r*c)}
		p, err := be.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(bufs); err != nil {
			t.Fatal(err)
		}
		d, _ := devTimes(t, p, bufs, 15)
		fmt.Fprintf(&b, "transpose %dx%d: %v (%.0f GB/s)\n", r, c, d, 8*float64(r*c)/d.Seconds()/1e9)
		p.Release()
		for _, x := range bufs {
			be.Free(x)
		}
	}
	t.Logf("TFLOP/s by the device clock (tiling: split 1/2/4):\n%s", b.String())
}
