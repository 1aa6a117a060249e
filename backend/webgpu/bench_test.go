package webgpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
)

// BenchmarkMatMul reports GFLOP/s of an n x n x n matmul program, by the
// device's clock (dev-GFLOP/s, when it has timestamps) and by the wall clock
// of Run including submit and wait (wall-GFLOP/s). 2048 and 4096 run only on
// a real GPU.
func BenchmarkMatMul(b *testing.B) {
	be := openTest(b)
	sizes := []int{256, 512, 1024}
	if be.info.GPU {
		sizes = append(sizes, 2048, 4096)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
				{Op: backend.OpArg, Arg: 0, Shape: []int{n, n}},
				{Op: backend.OpArg, Arg: 1, Shape: []int{n, n}},
				{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{n, n}},
			}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
			runBench(b, be, g, []int{n * n, n * n, n * n}, 2*float64(n)*float64(n)*float64(n))
		})
	}
}

// BenchmarkDispatch measures the cost of one dispatch inside a batched run:
// a chain of 200 tiny adds, unfused, is one submission of 200 dispatches.
func BenchmarkDispatch(b *testing.B) {
	be := waitedRuns(b, openTest(b))
	be.noFuse = true
	defer func() { be.noFuse = false }()
	const chain = 200
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{64}}}}
	for i := 0; i < chain; i++ {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpAdd, In: []int{i, 0}, Shape: []int{64}})
	}
	g.Outputs = []backend.Output{{Node: chain, Arg: 1}}
	bufs, p := setup(b, be, g, []int{64, 64})
	defer p.Release()
	var dev time.Duration
	start := time.Now()
	for b.Loop() {
		info, err := p.Run(bufs)
		if err != nil {
			b.Fatal(err)
		}
		dev += info.DeviceTime
	}
	wall := time.Since(start)
	b.ReportMetric(float64(wall.Microseconds())/float64(b.N)/chain, "wall-us/dispatch")
	b.ReportMetric(float64(dev.Microseconds())/float64(b.N)/chain, "dev-us/dispatch")
}

func setup(b *testing.B, be *Backend, g *backend.Graph, sizes []int) ([]backend.Buffer, backend.Program) {
	bufs := make([]backend.Buffer, len(sizes))
	for i, n := range sizes {
		buf, err := be.Alloc(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Free(buf) })
		data := make([]float32, n)
		for j := range data {
			data[j] = float32(j%13)/13 - 0.5
		}
		if err := be.Write(buf, 0, data); err != nil {
			b.Fatal(err)
		}
		bufs[i] = buf
	}
	p, err := be.Compile(g)
	if err != nil {
		b.Fatal(err)
	}
	// The first run compiles the pipeline in the driver: keep it out.
	if _, err := p.Run(bufs); err != nil {
		b.Fatal(err)
	}
	return bufs, p
}

func runBench(b *testing.B, be *Backend, g *backend.Graph, sizes []int, flops float64) {
	waitedRuns(b, be)
	bufs, p := setup(b, be, g, sizes)
	defer p.Release()
	var dev time.Duration
	start := time.Now()
	for b.Loop() {
		info, err := p.Run(bufs)
		if err != nil {
			b.Fatal(err)
		}
		dev += info.DeviceTime
	}
	wall := time.Since(start)
	b.ReportMetric(flops*float64(b.N)/wall.Seconds()/1e9, "wall-GFLOP/s")
	if be.Caps().DeviceTimer && dev > 0 {
		b.ReportMetric(flops*float64(b.N)/dev.Seconds()/1e9, "dev-GFLOP/s")
	}
}
