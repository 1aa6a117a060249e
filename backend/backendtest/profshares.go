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
// large matmul and many small adds - timed through the backend's NodeTimer
// must give the matmul the share of the run that timing its kernel alone
// gives it, within shareTol. This is what makes the profiler's per-op
// table true: whatever the backend's timer (kernel timestamps, a host
// clock per kernel, calibrated shares), the largest op is the largest op.

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
func (s *suite) runTime(t *testing.T, p backend.Program, bufs []backend.Buffer) time.Duration {
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
func productSize(t *testing.T, s *suite) int {
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

func testProfileShares(t *testing.T, s *suite) {
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

	// measure takes one measurement and returns what is wrong with it ("":
	// nothing). A profiler that attributes wrongly is wrong in every
	// attempt; other processes (go test runs packages side by side, and
	// ggml-cpu, lavapipe and SwiftShader run on the same two cores) can
	// spoil one, so up to three are taken.
	measure := func() string {
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
		got := median(shares)
		// The product's own time above its ReLU's, in the typical run (one run
		// may give a ReLU the product's wait: ggml-cpu charges the wait for
		// the other threads at a node's end to the node after it).
		if !(median(prod) > median(relu)) {
			return fmt.Sprintf("the product has %v, its ReLU %v (medians): a fused kernel's time went to one of its nodes (%v)",
				time.Duration(median(prod)), time.Duration(median(relu)), times.How[2:4])
		}
		// Each round's reference share from its own three runs, then their
		// median: runs next to each other see the same load.
		var refShares []float64
		for r := range refs[0].ds {
			e := refs[0].ds[r]
			refShares = append(refShares, min(max(refs[1].ds[r]-e, 0)/max(refs[2].ds[r]-e, 1), 1))
		}
		want := median(refShares)
		empty := time.Duration(median(refs[0].ds))
		mm := max(time.Duration(median(refs[1].ds))-empty, 0)
		whole := max(time.Duration(median(refs[2].ds))-empty, 1)
		t.Logf("%s (%s): %d^3 product: matmul share %.3f of a timed run (median of %.3f), %.3f by untimed runs (matmul alone %v, whole program %v, one tiny kernel %v); a timed run's medians: product %v, ReLU %v, all nodes %v",
			s.caps.Name, s.caps.Timer, n, got, shares, want, mm, whole, empty,
			time.Duration(median(prod)), time.Duration(median(relu)), time.Duration(median(totals)))
		if math.Abs(got-want) > shareTol {
			return fmt.Sprintf("the matmul's share of a profiled run is %.3f, untimed runs give it %.3f: more than %.2f apart", got, want, shareTol)
		}
		return ""
	}
	for attempt := 1; ; attempt++ {
		why := measure()
		if why == "" {
			return
		}
		if attempt == 3 {
			t.Errorf("%s (third attempt)", why)
			return
		}
		t.Logf("attempt %d: %s", attempt, why)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
