package backendtest

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
)

// Profile shares: a program whose costs are known by construction - one
// large matmul and many small adds - timed through the backend's NodeTimer.
//
// The conformance case (graph/profile-shares) checks what a NodeTimer's
// times must satisfy whatever else the machine runs: every node that runs
// a kernel has a time and says how it was had, a node that runs none has
// none, a fused kernel's time is shared among its nodes exactly by
// backend.CostShares, and times estimated from a run timed whole share out
// that run's time, no more and no less. These are sums and counts, which load
// cannot change.
//
// Whether the matmul's share of a timed run is its share of an untimed one
// is a comparison of host-clock times: on a loaded 2-core machine it was
// 0.78 against 1.00 three times in a row, with the profiler right. It is
// measured by BenchProfileShares (go test -bench ProfileShares), which
// reports the two shares and never fails on them.

// shareTol is the largest difference allowed between the matmul's share of
// a timed run and its share by kernels timed alone (0.1 = 10 points).
const shareTol = 0.1

// profileGraph is relu(x @ w) [n, n] and a chain of adds of small vectors
// [m], each add an output of its own (so no backend fuses the chain into
// one kernel). WebGPU fuses the ReLU into the product's kernel: the
// product must still get that kernel's time, not the ReLU.
func profileGraph(n, m, adds int) *builder {
	b := &builder{}
	x := b.arg(make([]float32, n*n), n, n)
	w := b.arg(make([]float32, n*n), n, n)
	b.out(b.op(backend.OpReLU, []int{n, n}, b.op(backend.OpMatMul, []int{n, n}, x, w)))
	prev := b.arg(make([]float32, m), m)
	for k := 0; k < adds; k++ {
		c := b.arg(make([]float32, m), m)
		prev = b.op(backend.OpAdd, []int{m}, prev, c)
		b.out(prev)
	}
	return b
}

// runTime runs p and returns its compute time: the device's where
// Caps.DeviceTimer and the run waited, else the host's around the run. A
// run that did not wait (RunInfo.Pending: the browser) is timed with a
// one-value read of its last arg, which waits for it; when that takes less
// than pendingLong, pendingBatch more runs are timed together, ended by
// one read: the host clock there is coarse (100 us) and the read is a
// round trip of about a millisecond, which one short run would mostly
// measure (a 1024^3 product "took" 2.2 ms on an H200 whose device clock
// says 0.09). Long runs (SwiftShader's) are timed one at a time.
func (s *suite) runTime(t testing.TB, p backend.Program, bufs []backend.Buffer) time.Duration {
	t.Helper()
	run := func(n int) (time.Duration, bool) {
		start := time.Now()
		var info backend.RunInfo
		for range n {
			var err error
			if info, err = p.Run(bufs); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		if info.Pending {
			if err := s.be.Read(bufs[len(bufs)-1], 0, make([]float32, 1)); err != nil {
				t.Fatalf("Read after a pending run: %v", err)
			}
			return time.Since(start) / time.Duration(n), true
		}
		if s.caps.DeviceTimer {
			return info.DeviceTime, false
		}
		return time.Since(start), false
	}
	d, pending := run(1)
	if pending && d < pendingLong {
		d, _ = run(pendingBatch)
	}
	return d
}

// pendingBatch is how many short runs that do not wait runTime times
// together; pendingLong is the time from which one run is timed alone.
const (
	pendingBatch = 10
	pendingLong  = 20 * time.Millisecond
)

// minProductTime is the least time the product must take alone: on a fast
// device a 512^3 product takes 15 us, no more than a launch, and its share
// would measure launch costs, not the profiler.
const minProductTime = time.Millisecond

// productSize returns the side of the square product of profile-shares:
// 512, doubled (up to 4096) until the product alone takes minProductTime.
func productSize(t testing.TB, s *suite) int {
	n := 512
	for ; n < 4096; n *= 2 {
		var b builder
		x, w := b.arg(make([]float32, n*n), n, n), b.arg(make([]float32, n*n), n, n)
		b.out(b.op(backend.OpMatMul, []int{n, n}, x, w))
		p, err := s.compile(&b.g)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		bufs := s.upload(t, b.args)
		best := time.Duration(math.MaxInt64)
		for range 3 {
			best = min(best, s.runTime(t, p, bufs))
		}
		p.Release()
		if best >= minProductTime {
			break
		}
	}
	return n
}

// BenchProfileShares measures, on the backend registered as name, the
// matmul's share of a run timed through its NodeTimer against its share of
// untimed runs (the whole program, the matmul alone, one tiny kernel), and
// reports both and their difference as the benchmark's metrics: share,
// untimed-share, share-diff (0.1 is 10 points). A backend's benchmark file
// calls it:
//
//	func BenchmarkProfileShares(b *testing.B) { backendtest.BenchProfileShares(b, "cpu") }
//
// A share that differs by more than 0.1 is logged; it does not fail the
// benchmark, since the machine's load moves it (see the file's comment).
func BenchProfileShares(b *testing.B, name string) {
	be := open(b, name)
	s := &suite{be: be, caps: be.Caps()}
	for range b.N {
		got, want := profileShares(b, s)
		b.ReportMetric(got, "share")
		b.ReportMetric(want, "untimed-share")
		b.ReportMetric(math.Abs(got-want), "share-diff")
		if math.Abs(got-want) > shareTol {
			b.Logf("the matmul's share of a profiled run is %.3f, untimed runs give it %.3f: more than %.2f apart", got, want, shareTol)
		}
	}
}

// profileShares returns the matmul's share of a timed run and of untimed
// runs (medians over reps rounds, timed runs and untimed ones taking turns
// so that the machine's state falls on both alike), logging the times.
func profileShares(t testing.TB, s *suite) (got, want float64) {
	t.Helper()
	const m, adds, reps = 64, 24, 11
	n := productSize(t, s)
	b := profileGraph(n, m, adds)
	nt := s.nodeTimer(t, &b.g, "per-op shares")
	bufs := s.upload(t, b.args)

	// The reference: the untimed run of the whole program against a run of
	// the matmul alone, each less a run of one tiny kernel (the fixed cost
	// of a run is nobody's): the matmul's true part of a real run, with
	// whatever the adds cost there (on lavapipe, a launch each).
	type ref struct {
		p    backend.Program
		bufs []backend.Buffer
		ds   []float64
	}
	mk := func(g *backend.Graph, args [][]float32) *ref {
		p, err := s.compile(g)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		t.Cleanup(p.Release)
		return &ref{p: p, bufs: s.upload(t, args)}
	}
	var e builder
	e.out(e.node(backend.Node{Op: backend.OpFill, Shape: []int{1}, A: 1}))
	var mb builder
	mx, mw := mb.arg(make([]float32, n*n), n, n), mb.arg(make([]float32, n*n), n, n)
	mb.out(mb.op(backend.OpReLU, []int{n, n}, mb.op(backend.OpMatMul, []int{n, n}, mx, mw)))
	refs := []*ref{mk(&e.g, e.args), mk(&mb.g, mb.args), mk(&b.g, b.args)}

	{
		// Timed runs and the reference's runs take turns, so that the state of
		// the machine falls on both alike (software adapters and ggml-cpu share
		// the CPU with this test; ggml-cpu's 24 tiny adds cost 4% of some runs
		// and 20% of others, as its threads spin or sleep between nodes), and
		// each gives its median.
		var shares, prod, relu, totals []float64
		for _, f := range refs {
			f.ds = nil
		}
		times := backend.NewNodeTimes(len(b.g.Nodes))
		for r := 0; r < reps+1; r++ {
			if _, err := nt.RunTimed(bufs, times); err != nil {
				t.Fatalf("RunTimed: %v", err)
			}
			for _, f := range refs {
				d := s.runTime(t, f.p, f.bufs)
				if r > 0 {
					f.ds = append(f.ds, float64(d))
				}
			}
			if r == 0 {
				continue // first use: page faults, pipeline creation
			}
			var total time.Duration
			for _, d := range times.Dur {
				total += d
			}
			// nodes 2 and 3: the product and its ReLU
			shares = append(shares, float64(times.Dur[2]+times.Dur[3])/float64(total))
			totals = append(totals, float64(total))
			prod = append(prod, float64(times.Dur[2]))
			relu = append(relu, float64(times.Dur[3]))
		}
		got = median(shares)
		// Each round's reference share from its own three runs, then their
		// median: runs next to each other see the same load.
		var refShares []float64
		for r := range refs[0].ds {
			e := refs[0].ds[r]
			refShares = append(refShares, min(max(refs[1].ds[r]-e, 0)/max(refs[2].ds[r]-e, 1), 1))
		}
		want = median(refShares)
		empty := time.Duration(median(refs[0].ds))
		mm := max(time.Duration(median(refs[1].ds))-empty, 0)
		whole := max(time.Duration(median(refs[2].ds))-empty, 1)
		t.Logf("%s (%s): %d^3 product: matmul share %.3f of a timed run (median of %.3f), %.3f by untimed runs (matmul alone %v, whole program %v, one tiny kernel %v); a timed run's medians: product %v, ReLU %v, all nodes %v",
			s.caps.Name, s.caps.Timer, n, got, shares, want, mm, whole, empty,
			time.Duration(median(prod)), time.Duration(median(relu)), time.Duration(median(totals)))
	}
	return got, want
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// testProfileShares checks the times a NodeTimer gives the nodes of
// profileGraph over several timed runs (a backend recalibrates every few;
// see the file's comment) by sums and counts only: it holds however busy
// the machine is.
func testProfileShares(t *testing.T, s *suite) {
	const n, m, adds, runs = 512, 64, 24, 12
	b := profileGraph(n, m, adds)
	nt := s.nodeTimer(t, &b.g, "per-op shares")
	bufs := s.upload(t, b.args)
	times := backend.NewNodeTimes(len(b.g.Nodes))
	kinds := map[backend.TimeKind]int{}
	for r := range runs {
		info, err := nt.RunTimed(bufs, times)
		if err != nil {
			t.Fatalf("RunTimed %d: %v", r, err)
		}
		for _, k := range times.How {
			kinds[k]++
		}
		if why := checkNodeTimes(&b.g, times, info); why != "" {
			t.Errorf("%s timed run %d: %s (times %v, kinds %v)", s.caps.Name, r, why, times.Dur, times.How)
		}
	}
	t.Logf("%s (%s): node time kinds over %d runs: %v", s.caps.Name, s.caps.Timer, runs, kinds)
}

// checkNodeTimes returns what is wrong with one timed run's node times
// ("": nothing): a negative time, a time for a node that ran no kernel or
// none for the product, an unknown kind, a fused product and ReLU
// (TimeSplit) not shared by backend.CostShares, or estimated times of a run
// timed whole that do not add up to its time (info.DeviceTime). Exact up to
// the nanosecond each share is truncated to.
func checkNodeTimes(g *backend.Graph, nt *backend.NodeTimes, info backend.RunInfo) string {
	var sum time.Duration
	estimated, kernels := true, 0
	mm, relu := -1, -1
	for i, nd := range g.Nodes {
		d, how := nt.Dur[i], nt.How[i]
		switch {
		case d < 0:
			return fmt.Sprintf("node %d (%v): time %v < 0", i, nd.Op, d)
		case how > backend.TimeEstimated:
			return fmt.Sprintf("node %d (%v): unknown time kind %d", i, nd.Op, how)
		case how == backend.TimeNone && d != 0:
			return fmt.Sprintf("node %d (%v): a time %v but no kernel (TimeNone)", i, nd.Op, d)
		case nd.Op == backend.OpArg && how != backend.TimeNone:
			return fmt.Sprintf("arg node %d: time %v (kind %d), want none", i, d, how)
		case nd.Op == backend.OpMatMul && how == backend.TimeNone:
			return fmt.Sprintf("matmul node %d ran but has no time", i)
		}
		switch nd.Op {
		case backend.OpMatMul:
			mm = i
		case backend.OpReLU:
			relu = i
		}
		if how != backend.TimeNone {
			sum += d
			kernels++
			estimated = estimated && how == backend.TimeEstimated
		}
	}
	if mm >= 0 && relu >= 0 && nt.How[mm] == backend.TimeSplit && nt.How[relu] == backend.TimeSplit {
		sh := backend.CostShares(g, []int{mm, relu})
		both := float64(nt.Dur[mm] + nt.Dur[relu])
		if math.Abs(float64(nt.Dur[mm])-sh[0]*both) > 2 {
			return fmt.Sprintf("the fused product and ReLU got %v and %v: by cost the product's share is %.4f, not %.4f",
				nt.Dur[mm], nt.Dur[relu], sh[0], float64(nt.Dur[mm])/both)
		}
	}
	// A run timed whole (one launch) shares its time out; a calibration
	// that computes the kernels one by one (ggml's) estimates some from
	// their costs and owes no such sum.
	if estimated && kernels > 0 && sum > 0 && info.Launches == 1 {
		if slack := time.Duration(kernels); sum > info.DeviceTime || info.DeviceTime-sum > slack {
			return fmt.Sprintf("estimated node times add up to %v, the run took %v: an estimate shares out the run's time", sum, info.DeviceTime)
		}
	}
	return ""
}
