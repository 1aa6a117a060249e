package profile

import (
	"strconv"
	"time"
)

// userName is the per-op key of a node: the op its user wrote, else its IR
// op (runs recorded without names).
func userName(n NodeTime) string {
	if n.User != "" {
		return n.User
	}
	return n.Op
}

// Run is one program run at a sync point, as core measured it. One Run may
// hold nodes of several passes (a fused training step); RecordRun splits its
// stages among them (see the package doc).
type Run struct {
	// Site names where the run came from: "sync", "eager", "captured", ...
	Site string
	// Start is when the run's first stage began (the trace places it there).
	// A zero Start means "ended now".
	Start time.Time
	// Stage times of the run. Create is per op and comes through Op.
	Ctx, Graph, Flush, Upload, Compute, Download time.Duration
	// DeviceTimed is true when Compute is device time (timestamp queries).
	DeviceTimed bool
	// Nodes are the program's nodes, in execution order.
	Nodes []NodeTime
	// DownloadPass is the pass of the value read back (the loss: forward,
	// a gradient: backward). Used only when the run has nodes of that pass;
	// otherwise Download is split by node count like Ctx.
	DownloadPass Pass
	// Wait is the part of Download spent waiting for the device rather
	// than moving bytes: a read's round trip, which a read of 4 bytes pays
	// as much as a large one (in a browser, a round trip to the GPU
	// process, 1-3 ms). RecordRun gives it to the graph stage - the submit
	// and the waits around the device's work - of the download's pass, not
	// to the transfer: a resident pass would not remove it. Wait <=
	// Download.
	Wait time.Duration
	// Replayed marks a replay of a recording (a Capture): its nodes were
	// recorded once, so RecordRun counts them as the operations of the
	// passes and ops here, as recording them counts them in lazy mode
	// (otherwise a captured step's reports would say "0 operations").
	Replayed bool
}

// NodeTime is one node of a run.
type NodeTime struct {
	Op    string        // IR op name (matmul, mul, ...): the breakdown one level down
	User  string        // the op a user wrote (MatMul, GELU, AdamWUpdate): the key of the per-op totals
	Scope string        // the layer (core.Device.Scope): the key of the per-layer totals
	Pass  Pass          // which pass emitted the node
	Dur   time.Duration // its compute time; 0 for a node that runs no kernel
	How   Timing        // how Dur was obtained
	// Call marks the first node of a call of User (see Op and Node): a
	// replay counts its op's calls by it.
	Call bool
}

// Timing says how a node's compute time was obtained.
type Timing uint8

// The ways of timing a node, from best to worst.
const (
	// Measured: the node's own kernel was timed (timestamp queries around
	// it, or the host clock around it on a CPU).
	Measured Timing = iota
	// Split: the node was fused with others into one kernel that was timed;
	// the kernel's time is split among them by cost (FLOPs and bytes, see
	// backend.NodeCost).
	Split
	// Estimated: the run was timed as a whole (or in parts) and the node's
	// share comes from a model: calibrated per-kernel shares or costs.
	Estimated
	// Even: no timer at all; the run's compute is split evenly per node.
	Even
	numTimings
)

var timingNames = [numTimings]string{"measured", "split", "estimated", "even"}

// String returns "measured", "split", "estimated" or "even".
func (t Timing) String() string {
	if t < numTimings {
		return timingNames[t]
	}
	return "timing(" + strconv.Itoa(int(t)) + ")"
}

// Op records one call of op in pass p and the node it records: counted in
// the pass's operations and calls and in the op's calls, and create added
// to the create stage and to the op's total. Core calls it when a call
// records its first node (lazy; later runs add the compute) or runs it
// (eager); the call's further nodes (a composite's) come through Node. It
// does nothing when the pass profiler is off.
func Op(p Pass, op string, create time.Duration) { opNode(p, op, create, true) }

// Node records a further node of the call of op that Op recorded last (a
// composite's second and later nodes, a gradient's): counted in the pass's
// operations, not as a call, with create added as Op adds it. A user's
// MSELoss is one call of several nodes; counting nodes as calls said 348
// calls for 58 steps.
func Node(p Pass, op string, create time.Duration) { opNode(p, op, create, false) }

func opNode(p Pass, op string, create time.Duration, call bool) {
	if !Enabled(p) {
		return
	}
	now := time.Now()
	c := float64(create)
	mu.Lock()
	d := &st.pass[p]
	d.ops++
	d.stage[StageCreate] += c
	t := d.op(op)
	if call {
		d.calls++
		t.calls++
	}
	t.create += c
	ts := now.Sub(st.epoch) - create
	st.trace.add(event{name: op, cat: passNames[p], ph: 'X', tid: st.trace.lane(tidOps, ts, create),
		ts: ts, dur: create})
	mu.Unlock()
}

// Step records the wall time of one training step, for the snapshot's step
// list and its coverage figure (attributed stage time over step wall time).
// It does nothing when every profiler is off.
func Step(wall time.Duration) {
	if !Any() {
		return
	}
	now := time.Now()
	mu.Lock()
	st.steps.add(float64(wall))
	ts := now.Sub(st.epoch) - wall
	st.trace.add(event{name: "step", cat: "step", ph: 'X', tid: st.trace.lane(tidSteps, ts, wall),
		ts: ts, dur: wall, args: &eventArgs{Step: st.steps.n}})
	mu.Unlock()
}

// RecordRun folds one program run into the profiles of the passes that are
// on, and into the trace. It does nothing when every profiler is off.
func RecordRun(r *Run) {
	if r == nil || !Any() {
		return
	}
	sh := attribute(r)
	mu.Lock()
	defer mu.Unlock()
	for p := range numPasses {
		if !on[p].Load() {
			continue
		}
		d := &st.pass[p]
		got := sh.nodes[p] > 0
		for s, v := range sh.stage[p] {
			d.stage[s] += v
			got = got || v != 0
		}
		if got {
			d.runs++
			if r.DeviceTimed {
				d.timedRuns++
			}
		}
	}
	for i, n := range r.Nodes {
		if n.Pass >= numPasses || !on[n.Pass].Load() {
			continue
		}
		if !sh.timed {
			n.How = Even
		}
		d := &st.pass[n.Pass]
		if r.Replayed {
			d.ops++
			if n.Call {
				d.calls++
				d.op(userName(n)).calls++
			}
		}
		d.op(userName(n)).addNode(n, sh.node[i])
		d.layer(n.Scope).addNode(n, sh.node[i])
	}
	st.traceRun(r, &sh)
}

// runShare is a run split among the passes; times in float64 nanoseconds.
type runShare struct {
	stage   [numPasses][numStages]float64
	nodes   [numPasses]int // nodes per pass
	node    []float64      // compute share of each node
	compute float64        // the run's compute (r.Compute, or the node sum when that is 0)
	timed   bool           // node durations were known
}

// attribute splits r's stages among the passes of its nodes:
//   - Compute by node durations when any is known, else evenly per node;
//   - Upload to the forward (inputs feed it), Download to r.DownloadPass,
//     each falling back to the node-count share when the run has no node of
//     that pass;
//   - Ctx, Graph and Flush by node-count share;
//   - Wait (a read's round trip, part of Download) to the graph stage of the
//     pass that gets Download, shared as Download is.
//
// A run without nodes gives Upload to the forward and the rest to
// DownloadPass. A node of an invalid pass keeps its share from every pass.
func attribute(r *Run) runShare {
	var sh runShare
	n := len(r.Nodes)
	var sumDur float64
	for _, nd := range r.Nodes {
		if nd.Pass < numPasses {
			sh.nodes[nd.Pass]++
		}
		sumDur += float64(nd.Dur)
	}
	sh.compute = float64(r.Compute)
	if sh.compute == 0 {
		sh.compute = sumDur
	}
	dl := r.DownloadPass
	if n == 0 {
		if dl < numPasses {
			for _, s := range [...]Stage{StageCtx, StageFlush, StageGraph, StageCompute, StageDownload} {
				sh.stage[dl][s] = float64(r.dur(s))
			}
			sh.stage[dl][StageGraph] += float64(r.wait())
		}
		sh.stage[PassForward][StageUpload] = float64(r.Upload)
		return sh
	}

	// byCount gives pass p its node-count share of d; multiplying first keeps
	// whole shares exact (3 ms over 1 of 3 nodes is exactly 1 ms).
	byCount := func(s Stage) {
		d := float64(r.dur(s))
		for p := range numPasses {
			if sh.nodes[p] > 0 {
				sh.stage[p][s] = d * float64(sh.nodes[p]) / float64(n)
			}
		}
	}
	// wait is byCount's twin for the read's wait, added to graph.
	wait := float64(r.wait())
	byCount(StageCtx)
	byCount(StageFlush)
	byCount(StageGraph)
	if sh.nodes[PassForward] > 0 {
		sh.stage[PassForward][StageUpload] = float64(r.Upload)
	} else {
		byCount(StageUpload)
	}
	if dl < numPasses && sh.nodes[dl] > 0 {
		sh.stage[dl][StageDownload] = float64(r.dur(StageDownload))
		sh.stage[dl][StageGraph] += wait
	} else {
		byCount(StageDownload)
		for p := range numPasses {
			if sh.nodes[p] > 0 {
				sh.stage[p][StageGraph] += wait * float64(sh.nodes[p]) / float64(n)
			}
		}
	}

	sh.node = make([]float64, n)
	sh.timed = sumDur > 0
	for i, nd := range r.Nodes {
		if sh.timed {
			sh.node[i] = sh.compute * float64(nd.Dur) / sumDur
		} else {
			sh.node[i] = sh.compute / float64(n)
		}
		if nd.Pass < numPasses {
			sh.stage[nd.Pass][StageCompute] += sh.node[i]
		}
	}
	return sh
}

// wait is r.Wait, within 0..Download.
func (r *Run) wait() time.Duration { return max(0, min(r.Wait, r.Download)) }

// dur returns the run's time for stage s (0 for create, which is per op),
// download without its wait (see Run.Wait).
func (r *Run) dur(s Stage) time.Duration {
	switch s {
	case StageCtx:
		return r.Ctx
	case StageFlush:
		return r.Flush
	case StageUpload:
		return r.Upload
	case StageGraph:
		return r.Graph
	case StageCompute:
		return r.Compute
	case StageDownload:
		return r.Download - r.wait()
	}
	return 0
}

// AddStage adds d to stage s of pass p without counting an operation: time
// that belongs to a pass but to no single op, such as the graph walk of a
// backward between the ops it records. It does nothing when p is off.
func AddStage(p Pass, s Stage, d time.Duration) {
	if !Enabled(p) || s >= numStages {
		return
	}
	mu.Lock()
	st.pass[p].stage[s] += float64(d)
	mu.Unlock()
}
