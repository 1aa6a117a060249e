package backend

import (
	"math"
	"slices"
	"time"
)

// Per-node timing, one scheme for every backend's NodeTimer. A backend
// brings two primitives: a calibration run, which times each kernel (by
// timestamp queries, by the host clock around a kernel computed alone, or
// by a clock read between kernels inside the real run), and a plain run,
// timed whole. NodeClock decides which run a RunTimed makes, gives each
// kernel's time to the nodes it computes (a fused kernel's by CostShares),
// shares a plain run's time among the nodes by what the last calibration
// measured, and marks each node's time measured, split or estimated.

// KernelTime is one kernel's time in a calibration run: the node whose
// kernel it is (a fused kernel's time goes to every node fused into it, by
// CostShares) and its time.
type KernelTime struct {
	Node int
	Dur  time.Duration
}

// Kernels is a backend's side of a NodeClock: a program's two ways to run.
type Kernels interface {
	// TimeKernels runs the program on args timing each kernel: it appends
	// each kernel's time to ks, in order, and returns them.
	TimeKernels(args []Buffer, ks []KernelTime) ([]KernelTime, RunInfo, error)
	// RunWhole runs the program on args, timed whole
	// (RunInfo.DeviceTime). Not called under EveryRun.
	RunWhole(args []Buffer) (RunInfo, error)
}

// Calibration says when a NodeClock calibrates and how it reads the
// kernel times of a calibration.
type Calibration struct {
	// Every > 0: calibrate in series of Runs consecutive runs (each
	// kernel's fastest time in a series counts for the plain runs after
	// it, as one run alone can catch a kernel cold or descheduled), a
	// series every Every runs. Every 1 and Runs 1: every run is timed per
	// kernel (a device that times kernels inside the real run).
	Every, Runs int
	// WarmUp: with Every, the first series waits for the second run (the
	// first pays for first use: pipelines, page faults); the first run's
	// nodes share its time by NodeCost.
	WarmUp bool
	// Budget (Every 0): calibrate one run at a time, the first run first,
	// then as often as keeps a calibration's extra cost over a plain run
	// within Budget of the plain runs it serves.
	Budget float64
	// Lone: each kernel was timed computed alone, with the fixed cost of a
	// compute (a thread-pool wake, a submit and wait), which the cheapest
	// kernel stands for and which inside the real graph a kernel does not
	// pay; it is taken off each. A kernel that exceeds it by less than the
	// fixed cost itself is too small to time this way: its work is its
	// NodeCost at the rate the timed kernels ran, and its node's time is
	// estimated. Plain runs give each kernel a like share of the run's
	// time that the kernels' work does not explain (its barrier and launch
	// inside the graph), from the quickest plain run since the
	// calibration: a run slowed by something else must not make every
	// small kernel look slow.
	Lone bool
}

// EveryRun is the Calibration of a device that times every kernel inside
// the run that counts: every run is a calibration run.
var EveryRun = Calibration{Every: 1, Runs: 1}

// NodeClock is a program's per-node timing under a Calibration (see
// above). It is not safe for concurrent use; programs call it under their
// own lock.
type NodeClock struct {
	n       int       // the graph's nodes
	cost    []float64 // each node's NodeCost (WarmUp, Lone)
	cal     Calibration
	planned []int // the kernels' nodes as compiled, for the first run's estimate
	members map[int][]int
	shares  map[int][]float64

	runs int
	// From the last calibration: each node's work (ns) and kernels (a
	// fused kernel counts by its shares), and whether it ran any.
	work    []float64
	kernels []float64
	ran     []bool
	// best is each kernel's fastest time in the current series (of
	// bestOf's kernels).
	best   []time.Duration
	bestOf []int
	// Lone: the quickest plain run since the calibration, ns.
	minWhole float64
	// Scratch reused run after run: a profiled run allocates nothing once
	// warm.
	ks               []KernelTime
	nodes            []int
	times            []time.Duration
	nowWork, kWork   []float64
	nowTimed, kTimed []bool
	perNode          map[int]int
	one              [1]int
	// Budget: plain runs before the next calibration, and the host times
	// of the last calibration and plain run.
	left           int
	calHost, plain time.Duration
}

// NewNodeClock makes the clock of a program of graph g. planned lists the
// nodes of the program's kernels, in order (used only for Calibration's
// WarmUp); members[n] are the nodes the kernel of node n computes where it
// computes more than n (fusion).
func NewNodeClock(g *Graph, cal Calibration, planned []int, members map[int][]int) *NodeClock {
	c := &NodeClock{n: len(g.Nodes), cal: cal, planned: planned, members: members, shares: map[int][]float64{}}
	if cal.WarmUp || cal.Lone {
		c.cost = make([]float64, len(g.Nodes))
		for i := range c.cost {
			c.cost[i] = NodeCost(g, i)
		}
	}
	for n, ms := range members {
		c.shares[n] = CostShares(g, ms)
	}
	return c
}

// Run is one timed run of k on args, its node times written to t (which
// the caller has Checked).
func (c *NodeClock) Run(t *NodeTimes, k Kernels, args []Buffer) (RunInfo, error) {
	if cal, first := c.due(); cal {
		start := time.Now()
		ks, info, err := k.TimeKernels(args, c.ks[:0])
		if err != nil {
			return info, err
		}
		c.ks = ks
		c.calibrated(t, ks, first, time.Since(start))
		return info, nil
	}
	start := time.Now()
	info, err := k.RunWhole(args)
	if err != nil {
		return info, err
	}
	c.spread(t, info.DeviceTime, time.Since(start))
	return info, nil
}

// due reports whether this run calibrates, and whether it starts a series.
func (c *NodeClock) due() (cal, first bool) {
	runs := c.runs
	c.runs++
	if c.cal.Every > 0 {
		k := runs % c.cal.Every
		if c.cal.WarmUp {
			k--
		}
		return k >= 0 && k < c.cal.Runs, k == 0
	}
	return c.work == nil || c.left <= 0, true
}

// calibrated gives a calibration run's kernel times ks to their nodes in
// t, and keeps each node's work (from the series' fastest times) for the
// plain runs after it.
func (c *NodeClock) calibrated(t *NodeTimes, ks []KernelTime, first bool, host time.Duration) {
	nodes, times := c.nodes[:0], c.times[:0]
	for _, kt := range ks {
		nodes, times = append(nodes, kt.Node), append(times, kt.Dur)
	}
	c.nodes, c.times = nodes, times
	if first || !slices.Equal(c.bestOf, nodes) {
		c.best, c.bestOf = append(c.best[:0], times...), append(c.bestOf[:0], nodes...)
	}
	for k, d := range times {
		c.best[k] = min(c.best[k], d)
	}
	c.work, c.kernels, c.ran = zeroed(c.work, c.n), zeroed(c.kernels, c.n), zeroed(c.ran, c.n)
	c.minWhole = 0
	c.nowWork, c.nowTimed = c.kernelWork(nodes, times, c.nowWork, c.nowTimed)
	c.kWork, c.kTimed = c.kernelWork(nodes, c.best, c.kWork, c.kTimed)
	now, timed, best := c.nowWork, c.nowTimed, c.kWork
	for k, owner := range nodes {
		ms, sh := c.split(owner)
		how := TimeMeasured
		switch {
		case !timed[k]:
			how = TimeEstimated
		case len(ms) > 1:
			how = TimeSplit
		}
		for m, j := range ms {
			t.Dur[j] += time.Duration((now[k] + 1) * sh[m]) // 1 ns: a kernel that ran has a time
			if t.How[j] != TimeEstimated {
				t.How[j] = how // one estimated kernel makes its node's time estimated
			}
			c.work[j] += best[k] * sh[m]
			c.kernels[j] += sh[m]
			c.ran[j] = true
		}
	}
	if c.cal.Every == 0 {
		c.calHost = host
		c.left = 1 // one plain run first, to learn what it costs
		if c.plain > 0 {
			extra := float64(c.calHost - c.plain)
			c.left = min(max(int(math.Ceil(extra/(c.cal.Budget*float64(c.plain)))), 1), 1024)
		}
	}
}

// unitShare is the share of a kernel that computes one node.
var unitShare = []float64{1}

// split returns the nodes a kernel of node n computes and their shares of
// its time (valid until the next call).
func (c *NodeClock) split(n int) ([]int, []float64) {
	if ms := c.members[n]; len(ms) > 1 {
		return ms, c.shares[n]
	}
	c.one[0] = n
	return c.one[:], unitShare
}

// zeroed returns s, or a new slice where it is too short, as n zeros.
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// kernelWork is each kernel's work (ns) from its time: the time itself,
// or under Calibration.Lone its time less a lone compute's fixed cost,
// or its cost at the timed kernels' rate for a kernel too small to time
// alone (timed reports false for it). work and timed reuse the given
// slices.
func (c *NodeClock) kernelWork(nodes []int, times []time.Duration, work []float64, timed []bool) ([]float64, []bool) {
	work, timed = zeroed(work, len(times)), zeroed(timed, len(times))
	if !c.cal.Lone || len(times) == 0 {
		for k, d := range times {
			work[k], timed[k] = float64(d), true
		}
		return work, timed
	}
	fixed := slices.Min(times)
	if c.perNode == nil {
		c.perNode = map[int]int{}
	}
	perNode := c.perNode
	clear(perNode)
	for _, n := range nodes {
		perNode[n]++
	}
	cost := func(n int) float64 { return c.cost[n] / float64(perNode[n]) }
	var bigWork, bigCost float64
	for k, n := range nodes {
		if over := times[k] - fixed; fixed > 0 && over >= fixed {
			timed[k] = true
			bigWork += float64(over)
			bigCost += cost(n)
		}
	}
	for k, n := range nodes {
		if timed[k] || bigCost == 0 {
			work[k] = float64(times[k] - fixed)
		} else {
			work[k] = cost(n) * bigWork / bigCost
		}
	}
	return work, timed
}

// spread shares a plain run's time whole (host: its host time) among the
// nodes by their work in the last calibration - before the first, under
// WarmUp, by the planned kernels' costs - marking them estimated.
func (c *NodeClock) spread(t *NodeTimes, whole, host time.Duration) {
	c.left--
	c.plain = host
	work, kernels, ran := c.work, c.kernels, c.ran
	if work == nil {
		n := c.n
		work, kernels, ran = make([]float64, n), make([]float64, n), make([]bool, n)
		for _, owner := range c.planned {
			ms, sh := c.split(owner)
			for m, j := range ms {
				work[j] += c.cost[owner] * sh[m]
				kernels[j] += sh[m]
				ran[j] = true
			}
		}
	}
	var sumWork, sumKernels float64
	for i, w := range work {
		sumWork += w
		sumKernels += kernels[i]
	}
	var each float64
	if c.cal.Lone {
		if w := float64(whole); c.minWhole == 0 || w < c.minWhole {
			c.minWhole = w
		}
		each = max(c.minWhole-sumWork, 0) / max(sumKernels, 1)
	}
	total := sumWork + each*sumKernels
	for i := range work {
		if !ran[i] {
			continue
		}
		if total > 0 {
			t.Dur[i] = time.Duration(float64(whole) * (work[i] + each*kernels[i]) / total)
		}
		t.How[i] = TimeEstimated
	}
}
