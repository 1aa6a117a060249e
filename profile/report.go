package profile

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Report is one pass's profile: what the seed's text report prints, as data
// (and as JSON for the web page). Times are milliseconds, shares percent.
type Report struct {
	// Pass is "forward", "backward" or "update".
	Pass string `json:"pass"`
	// Ops counts the nodes recorded (Op and Node): the operations the
	// program runs.
	Ops int `json:"ops"`
	// Calls counts the op calls recorded (Op): a composite such as a loss
	// is one call of several nodes.
	Calls int `json:"calls"`
	// Runs counts the program runs that gave this pass a share.
	Runs int `json:"runs"`
	// DeviceTimedRuns counts those of Runs whose compute was device time.
	DeviceTimedRuns int `json:"device_timed_runs"`
	// TotalMS is the sum of the stages.
	TotalMS float64 `json:"total_ms"`
	// PerOpMS is TotalMS / Ops (0 without ops).
	PerOpMS float64 `json:"per_op_ms"`
	// Stages are the stages with time recorded, largest first.
	Stages []StageTime `json:"stages"`
	// ByOp are the per-op totals (create + compute) by the op a user wrote
	// (MatMul, ReLU, GELU, AdamWUpdate; a gradient's nodes under the op
	// they differentiate), largest first, each with its IR ops.
	ByOp []OpTime `json:"by_op"`
	// ByLayer are the compute totals by layer (core.Device.Scope; "" for
	// ops outside any), largest first.
	ByLayer []OpTime `json:"by_layer"`
	// TransferMS is upload + download: what a resident pass would remove.
	TransferMS float64 `json:"transfer_ms"`
	// TransferPct is TransferMS as a percent of TotalMS.
	TransferPct float64 `json:"transfer_pct"`
	// Ceiling is TotalMS / (TotalMS - TransferMS): the most removing every
	// transfer could speed this pass up ("could not beat Kx").
	Ceiling float64 `json:"ceiling"`
}

// StageTime is one stage's total in a Report.
type StageTime struct {
	Stage string  `json:"stage"` // "ctx", "create", ...
	MS    float64 `json:"ms"`
	Pct   float64 `json:"pct"` // of the pass total
}

// OpTime is one op's (or layer's) total in a Report.
type OpTime struct {
	Op        string  `json:"op"`
	Calls     int     `json:"calls"` // calls of the op (in the backward: of its gradient)
	Nodes     int     `json:"nodes"` // program nodes run
	CreateMS  float64 `json:"create_ms"`
	ComputeMS float64 `json:"compute_ms"`
	MS        float64 `json:"ms"`  // CreateMS + ComputeMS
	Pct       float64 `json:"pct"` // of the pass total
	// Timing says how ComputeMS was obtained: "measured" (its kernels were
	// timed), "split" (shares of timed fused kernels, by cost),
	// "estimated" (shares of a timed run from a model), "even" (no timer:
	// the run split evenly per node), or "mixed"; MeasuredPct is the part
	// of ComputeMS that was measured.
	Timing      string  `json:"timing"`
	MeasuredPct float64 `json:"measured_pct"`
	// IR is the breakdown by IR op, largest first.
	IR []IRTime `json:"ir,omitempty"`
}

// IRTime is one IR op's part of an OpTime.
type IRTime struct {
	Op        string  `json:"op"`
	Nodes     int     `json:"nodes"`
	ComputeMS float64 `json:"compute_ms"`
}

// row makes the OpTime of a total; total is the pass's, for Pct.
func (t *opTotal) row(name string, total float64) OpTime {
	v := t.create + t.compute
	o := OpTime{Op: name, Calls: t.calls, Nodes: t.nodes, CreateMS: ms(t.create), ComputeMS: ms(t.compute),
		MS: ms(v), Pct: pct(v, total), MeasuredPct: pct(t.timed[Measured], t.compute), Timing: "measured"}
	kinds := 0
	for k, v := range t.timed {
		if v > 0 {
			kinds++
			o.Timing = Timing(k).String()
		}
	}
	if kinds > 1 {
		o.Timing = "mixed"
	}
	for name, it := range t.ir {
		o.IR = append(o.IR, IRTime{Op: name, Nodes: it.nodes, ComputeMS: ms(it.compute)})
	}
	slices.SortFunc(o.IR, func(a, b IRTime) int {
		return cmp.Or(cmp.Compare(b.ComputeMS, a.ComputeMS), cmp.Compare(a.Op, b.Op))
	})
	return o
}

func ms(ns float64) float64 { return ns / 1e6 }

func pct(part, whole float64) float64 {
	if whole == 0 {
		return 0 // keeps JSON free of NaN
	}
	return 100 * part / whole
}

// Empty reports whether nothing was recorded for the pass. A nil Report,
// what ReportPass returns then, is empty.
func (r *Report) Empty() bool { return r == nil || r.Ops == 0 && r.Runs == 0 && r.TotalMS == 0 }

// build makes the Report of one pass's data; mu must be held.
func (d *passData) build(p Pass) *Report {
	r := &Report{Pass: p.String(), Ops: d.ops, Calls: d.calls, Runs: d.runs, DeviceTimedRuns: d.timedRuns,
		Stages: []StageTime{}, ByOp: []OpTime{}, ByLayer: []OpTime{}}
	var total float64
	for _, v := range d.stage {
		total += v
	}
	r.TotalMS = ms(total)
	if d.ops > 0 {
		r.PerOpMS = r.TotalMS / float64(d.ops)
	}
	for s, v := range d.stage {
		if v != 0 {
			r.Stages = append(r.Stages, StageTime{Stage: stageNames[s], MS: ms(v), Pct: pct(v, total)})
		}
	}
	// Stable: ties keep execution order, as R's order() keeps ties.
	slices.SortStableFunc(r.Stages, func(a, b StageTime) int { return cmp.Compare(b.MS, a.MS) })
	for name, t := range d.byOp {
		r.ByOp = append(r.ByOp, t.row(name, total))
	}
	for name, t := range d.byLayer {
		o := t.row(name, total)
		o.MS, o.Pct = o.ComputeMS, pct(t.compute, total)
		r.ByLayer = append(r.ByLayer, o)
	}
	for _, rows := range [][]OpTime{r.ByOp, r.ByLayer} {
		slices.SortFunc(rows, func(a, b OpTime) int {
			return cmp.Or(cmp.Compare(b.MS, a.MS), cmp.Compare(a.Op, b.Op))
		})
	}
	moved := d.stage[StageUpload] + d.stage[StageDownload]
	r.TransferMS = ms(moved)
	r.TransferPct = pct(moved, total)
	r.Ceiling = total / max(total-moved, 1e-9*1e6) // the seed's 1e-9 ms floor, in ns
	return r
}

// Data returns the profile of pass p (never nil; see Report.Empty).
func Data(p Pass) *Report {
	if p >= numPasses {
		return &Report{Pass: p.String(), Stages: []StageTime{}, ByOp: []OpTime{}, ByLayer: []OpTime{}}
	}
	mu.Lock()
	defer mu.Unlock()
	return st.pass[p].build(p)
}

// ReportForward prints the forward profile in the seed's format
// (ag_forward_profile_report) and returns it; nil when nothing was recorded.
// A nil w prints nothing.
func ReportForward(w io.Writer) *Report { return ReportPass(w, PassForward) }

// ReportBackward prints the backward profile like ReportForward.
func ReportBackward(w io.Writer) *Report { return ReportPass(w, PassBackward) }

// ReportPass prints the profile of pass p like ReportForward.
func ReportPass(w io.Writer, p Pass) *Report {
	w = orDiscard(w)
	r := Data(p)
	if r.Empty() {
		fmt.Fprintf(w, "no %s operations recorded (is profiling on?)\n", r.Pass)
		return nil
	}
	r.WriteText(w)
	return r
}

// orDiscard lets the report functions take a nil writer to mean "data only".
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// WriteText prints r in the seed's format:
//
//	forward: 12 operations (5 calls), 10.00 ms total, 0.833 ms per op
//	  compute       6.00 ms   60.0%
//	  ...
//	  -> transfer (upload+download) 30.0% of the forward
//	  -> a resident forward could not beat 1.43x on this workload
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %d operations (%d calls), %.2f ms total, %.3f ms per op\n", r.Pass, r.Ops, r.Calls, r.TotalMS, r.PerOpMS)
	for _, s := range r.Stages {
		fmt.Fprintf(w, "  %-9s %8.2f ms  %5.1f%%\n", s.Stage, s.MS, s.Pct)
	}
	fmt.Fprintf(w, "  -> transfer (upload+download) %.1f%% of the %s\n", r.TransferPct, r.Pass)
	fmt.Fprintf(w, "  -> a resident %s could not beat %.2fx on this workload\n", r.Pass, r.Ceiling)
}

// WriteOps prints r's per-op table (op, calls, nodes run, ms, % of the
// pass), at most n rows (n <= 0: all), folding the rest into one row. A
// last row holds the stages no op owns (ctx, flush, upload, graph,
// download), named with their times, so the rows add up to the pass total.
func (r *Report) WriteOps(w io.Writer, n int) {
	fmt.Fprintf(w, "%s per op (create + compute; ~ marks compute not measured per kernel)\n", r.Pass)
	fmt.Fprintf(w, "  %-18s %7s %7s %10s %7s\n", "op", "calls", "nodes", "ms", "%")
	var opsMS float64
	for _, o := range r.ByOp {
		opsMS += o.MS
	}
	rows := r.ByOp
	if n > 0 && len(rows) > n {
		rows = rows[:n]
	}
	var shown float64
	for _, o := range rows {
		mark := " "
		if o.Timing != "measured" && o.ComputeMS > 0 {
			mark = "~"
		}
		line := fmt.Sprintf("  %-18s %7d %7d %9.2f%s %6.1f%%", o.Op, o.Calls, o.Nodes, o.MS, mark, o.Pct)
		if ir := irText(o.IR); ir != "" {
			line += "  " + ir
		}
		fmt.Fprintln(w, line)
		shown += o.MS
	}
	if rest := len(r.ByOp) - len(rows); rest > 0 {
		label := fmt.Sprintf("(%d more ops)", rest)
		fmt.Fprintf(w, "  %-18s %7s %7s %10.2f %6.1f%%\n", label, "", "", opsMS-shown, pct(opsMS-shown, r.TotalMS))
	}
	other := r.TotalMS - opsMS
	line := fmt.Sprintf("  %-18s %7s %7s %10.2f %6.1f%%", "(other stages)", "", "", other, pct(other, r.TotalMS))
	if os := r.OtherStages(); len(os) > 0 {
		parts := make([]string, len(os))
		for i, s := range os {
			parts[i] = fmt.Sprintf("%s %.2f", s.Stage, s.MS)
		}
		line += "  (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintln(w, line)
}

// OtherStages returns the stages no op owns (all but create and compute)
// with time recorded, largest first: what the per-op table's
// "(other stages)" row holds, named so that a table where it is most of a
// pass says what it is (a small captured step's forward: the read of its
// outputs and the wait for it).
func (r *Report) OtherStages() []StageTime {
	var out []StageTime
	for _, s := range r.Stages {
		if s.Stage != StageCreate.String() && s.Stage != StageCompute.String() {
			out = append(out, s)
		}
	}
	return out
}

// ReportOps prints the per-op table of pass p (see Report.WriteOps) and
// returns the report; nil, with the seed's message, when nothing was recorded.
// A nil w prints nothing.
func ReportOps(w io.Writer, p Pass, n int) *Report {
	w = orDiscard(w)
	r := Data(p)
	if r.Empty() {
		fmt.Fprintf(w, "no %s operations recorded (is profiling on?)\n", r.Pass)
		return nil
	}
	r.WriteOps(w, n)
	return r
}

// irText lists an op's IR breakdown compactly: "matmul 3.1, add 0.2".
func irText(ir []IRTime) string {
	if len(ir) <= 1 {
		return ""
	}
	parts := make([]string, 0, 3)
	for i, x := range ir {
		if i == 3 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", x.Op, x.ComputeMS))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
