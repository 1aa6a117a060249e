package profile

import (
	"testing"
)

// stages is a pass's expected share per stage, in ms.
type stages map[Stage]float64

func TestAttribute(t *testing.T) {
	F, B, U := PassForward, PassBackward, PassUpdate
	tests := []struct {
		name    string
		run     Run
		want    map[Pass]stages
		compute []float64 // per node, ms
	}{
		{
			// Node times sum to 10 ms, the run's compute is 20: each node's
			// share is scaled by 2. Five nodes: F 2, B 2, U 1 for ctx/flush.
			name: "mixed with node times",
			run: Run{Ctx: msd(5), Flush: msd(10), Upload: msd(3), Download: msd(1), DownloadPass: B,
				Compute: msd(20), Nodes: []NodeTime{{Op: "matmul", Pass: F, Dur: msd(2)}, {Op: "add", Pass: F, Dur: msd(1)},
					{Op: "matmul", Pass: B, Dur: msd(4)}, {Op: "sum", Pass: B, Dur: msd(1)}, {Op: "adamw", Pass: U, Dur: msd(2)}}},
			want: map[Pass]stages{
				F: {StageCtx: 2, StageFlush: 4, StageUpload: 3, StageCompute: 6},
				B: {StageCtx: 2, StageFlush: 4, StageDownload: 1, StageCompute: 10},
				U: {StageCtx: 1, StageFlush: 2, StageCompute: 4},
			},
			compute: []float64{4, 2, 8, 2, 4},
		},
		{
			name: "no node times: even split of compute",
			run: Run{Compute: msd(6), Graph: msd(3), Download: msd(1.5),
				Nodes: []NodeTime{{Op: "a", Pass: F, Dur: 0}, {Op: "b", Pass: F, Dur: 0}, {Op: "c", Pass: B, Dur: 0}}},
			want: map[Pass]stages{
				F: {StageCompute: 4, StageGraph: 2, StageDownload: 1.5},
				B: {StageCompute: 2, StageGraph: 1},
			},
			compute: []float64{2, 2, 2},
		},
		{
			name: "zero compute: node times are the compute",
			run:  Run{Nodes: []NodeTime{{Op: "a", Pass: F, Dur: msd(1.5)}, {Op: "b", Pass: B, Dur: msd(2.5)}}},
			want: map[Pass]stages{
				F: {StageCompute: 1.5},
				B: {StageCompute: 2.5},
			},
			compute: []float64{1.5, 2.5},
		},
		{
			name: "some node times unknown: fused nodes get none",
			run:  Run{Compute: msd(8), Nodes: []NodeTime{{Op: "a", Pass: F, Dur: msd(3)}, {Op: "b", Pass: F, Dur: 0}, {Op: "c", Pass: B, Dur: msd(1)}}},
			want: map[Pass]stages{
				F: {StageCompute: 6},
				B: {StageCompute: 2},
			},
			compute: []float64{6, 0, 2},
		},
		{
			// No forward node: upload by count share. DownloadPass is the
			// zero value (forward), absent here, so download by count too.
			name: "update-only run",
			run: Run{Upload: msd(4), Download: msd(2), Compute: msd(1),
				Nodes: []NodeTime{{Op: "adamw", Pass: U, Dur: 0}, {Op: "adamw", Pass: U, Dur: 0}, {Op: "sub", Pass: B, Dur: 0}, {Op: "mul", Pass: B, Dur: 0}}},
			want: map[Pass]stages{
				B: {StageUpload: 2, StageDownload: 1, StageCompute: 0.5},
				U: {StageUpload: 2, StageDownload: 1, StageCompute: 0.5},
			},
			compute: []float64{0.25, 0.25, 0.25, 0.25},
		},
		{
			name: "no nodes: upload to forward, rest to DownloadPass",
			run:  Run{Ctx: msd(1), Upload: msd(2), Download: msd(3), Compute: msd(0.5), DownloadPass: B},
			want: map[Pass]stages{
				F: {StageUpload: 2},
				B: {StageCtx: 1, StageDownload: 3, StageCompute: 0.5},
			},
		},
		{
			// The node of an unknown pass counts in N but its share goes
			// nowhere: F gets 1 of 2 in ctx and its own node time.
			name: "invalid pass",
			run:  Run{Ctx: msd(2), Compute: msd(4), Nodes: []NodeTime{{Op: "a", Pass: F, Dur: msd(1)}, {Op: "x", Pass: Pass(7), Dur: msd(1)}}},
			want: map[Pass]stages{
				F: {StageCtx: 1, StageCompute: 2},
			},
			compute: []float64{2, 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sh := attribute(&tc.run)
			for _, p := range Passes() {
				for _, s := range Stages() {
					got := sh.stage[p][s] / 1e6
					if want := tc.want[p][s]; got != want { // exact: shares are whole ns
						t.Errorf("%v %v = %v ms, want %v", p, s, got, want)
					}
				}
			}
			for i, want := range tc.compute {
				if got := sh.node[i] / 1e6; got != want {
					t.Errorf("node %d (%s) compute = %v ms, want %v", i, tc.run.Nodes[i].Op, got, want)
				}
			}
		})
	}
}

// TestRecordRunSplit checks a run through the public path: per-op totals
// hold create plus compute, and a pass whose profiler is off keeps nothing.
func TestRecordRunSplit(t *testing.T) {
	fresh(t)
	Forward(true)
	Switch(PassUpdate, true)
	Op(PassForward, "matmul", msd(0.5))
	Op(PassBackward, "matmul", msd(7)) // backward is off: dropped
	RecordRun(&Run{Site: "sync", Ctx: msd(3), Compute: msd(6), Upload: msd(1),
		Nodes: []NodeTime{{Op: "matmul", Pass: PassForward, Dur: msd(1)}, {Op: "matmul", Pass: PassBackward, Dur: msd(3)}, {Op: "adamw", Pass: PassUpdate, Dur: msd(2)}}})

	f, b, u := Data(PassForward), Data(PassBackward), Data(PassUpdate)
	if f.TotalMS != 0.5+1+1+1 { // create, ctx share, upload, compute
		t.Errorf("forward total = %v ms, want 3.5", f.TotalMS)
	}
	if u.TotalMS != 1+2 || u.Ops != 0 || u.Runs != 1 {
		t.Errorf("update = %+v, want total 3 ms, 0 ops, 1 run", u)
	}
	if !b.Empty() {
		t.Errorf("backward (off) recorded %+v", b)
	}
	if len(f.ByOp) != 1 || f.ByOp[0].MS != 1.5 || f.ByOp[0].CreateMS != 0.5 || f.ByOp[0].ComputeMS != 1 {
		t.Errorf("forward by_op = %+v, want matmul 1.5 ms (0.5 create + 1 compute)", f.ByOp)
	}
	if len(u.ByOp) != 1 || u.ByOp[0].Op != "adamw" || u.ByOp[0].ComputeMS != 2 || u.ByOp[0].Calls != 0 || u.ByOp[0].Nodes != 1 {
		t.Errorf("update by_op = %+v, want adamw 2 ms compute, 1 node", u.ByOp)
	}
}
