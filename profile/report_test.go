package profile

import (
	"strings"
	"testing"
)

// eagerForward records two eager forward ops: the seed's situation, where
// every op is its own run with all seven stages.
func eagerForward() {
	Op(PassForward, "matmul", msd(1))
	Op(PassForward, "add", msd(0.5))
	RecordRun(&Run{Site: "eager", Ctx: msd(0.25), Flush: msd(0.5), Upload: msd(2), Graph: msd(0.25),
		Compute: msd(3), Download: msd(1.5),
		Nodes: []NodeTime{{Op: "matmul", Pass: PassForward}, {Op: "add", Pass: PassForward}}})
}

func TestReportGolden(t *testing.T) {
	tests := []struct {
		name   string
		pass   Pass
		record func()
		want   string
	}{
		{
			// total 9: ctx .25 create 1.5 flush .5 upload 2 graph .25 compute 3 download 1.5;
			// transfer 3.5/9 = 38.9%, ceiling 9/5.5 = 1.636.
			name: "forward eager", pass: PassForward, record: eagerForward,
			want: "forward: 2 operations (2 calls), 9.00 ms total, 4.500 ms per op\n" +
				"  compute       3.00 ms   33.3%\n" +
				"  upload        2.00 ms   22.2%\n" +
				"  create        1.50 ms   16.7%\n" +
				"  download      1.50 ms   16.7%\n" +
				"  flush         0.50 ms    5.6%\n" +
				"  ctx           0.25 ms    2.8%\n" +
				"  graph         0.25 ms    2.8%\n" +
				"  -> transfer (upload+download) 38.9% of the forward\n" +
				"  -> a resident forward could not beat 1.64x on this workload\n",
		},
		{
			// Fused run, 2 forward + 2 backward nodes: backward gets half of
			// ctx/flush/graph (0.5 each), its node times 4+2 of compute, and
			// the download of the gradient (DownloadPass); create 0.5+0.5.
			// total 0.5+1+0.5+0.5+6+2 = 10.5; transfer 2/10.5 = 19.0%; ceiling 10.5/8.5 = 1.235.
			name: "backward fused", pass: PassBackward,
			record: func() {
				Op(PassBackward, "matmul", msd(0.5))
				Op(PassBackward, "sum", msd(0.5))
				RecordRun(&Run{Site: "sync", Ctx: msd(1), Flush: msd(1), Graph: msd(1), Upload: msd(3),
					Download: msd(2), DownloadPass: PassBackward, Compute: msd(9), DeviceTimed: true,
					Nodes: []NodeTime{{Op: "matmul", Pass: PassForward, Dur: msd(2)}, {Op: "relu", Pass: PassForward, Dur: msd(1)},
						{Op: "matmul", Pass: PassBackward, Dur: msd(4)}, {Op: "sum", Pass: PassBackward, Dur: msd(2)}}})
			},
			want: "backward: 2 operations (2 calls), 10.50 ms total, 5.250 ms per op\n" +
				"  compute       6.00 ms   57.1%\n" +
				"  download      2.00 ms   19.0%\n" +
				"  create        1.00 ms    9.5%\n" +
				"  ctx           0.50 ms    4.8%\n" +
				"  flush         0.50 ms    4.8%\n" +
				"  graph         0.50 ms    4.8%\n" +
				"  -> transfer (upload+download) 19.0% of the backward\n" +
				"  -> a resident backward could not beat 1.24x on this workload\n",
		},
		{
			// Lazy ops only: create is all there is, as the seed's deferred ops.
			name: "forward lazy", pass: PassForward,
			record: func() {
				Op(PassForward, "matmul", msd(0.1))
				Op(PassForward, "matmul", msd(0.2))
				Op(PassForward, "relu", msd(0.3))
			},
			want: "forward: 3 operations (3 calls), 0.60 ms total, 0.200 ms per op\n" +
				"  create        0.60 ms  100.0%\n" +
				"  -> transfer (upload+download) 0.0% of the forward\n" +
				"  -> a resident forward could not beat 1.00x on this workload\n",
		},
		{
			name: "nothing recorded", pass: PassForward, record: func() {},
			want: "no forward operations recorded (is profiling on?)\n",
		},
		{
			name: "nothing recorded backward", pass: PassBackward, record: eagerForward,
			want: "no backward operations recorded (is profiling on?)\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fresh(t)
			Forward(true)
			Backward(true)
			tc.record()
			var b strings.Builder
			r := ReportPass(&b, tc.pass)
			if got := b.String(); got != tc.want {
				t.Errorf("ReportPass(%v) printed\n%s\nwant\n%s", tc.pass, got, tc.want)
			}
			if (r == nil) != strings.HasPrefix(tc.want, "no ") {
				t.Errorf("ReportPass(%v) returned %v; want nil exactly when nothing was recorded", tc.pass, r)
			}
		})
	}
}

func TestReportForwardBackwardWrappers(t *testing.T) {
	fresh(t)
	Forward(true)
	eagerForward()
	var f, b strings.Builder
	if r := ReportForward(&f); r == nil || r.Ops != 2 || !strings.HasPrefix(f.String(), "forward: 2 operations") {
		t.Errorf("ReportForward = %+v, printed %q", r, f.String())
	}
	r := ReportBackward(&b)
	if r != nil || b.String() != "no backward operations recorded (is profiling on?)\n" {
		t.Errorf("ReportBackward = %+v, printed %q", r, b.String())
	}
	// ag demo asks the nil it returns whether it is empty.
	if !r.Empty() {
		t.Error("ReportBackward's nil: Empty() = false, want true")
	}
}

func TestReportFields(t *testing.T) {
	fresh(t)
	Forward(true)
	eagerForward()
	r := Data(PassForward)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"TotalMS", r.TotalMS, 9},
		{"PerOpMS", r.PerOpMS, 4.5},
		{"TransferMS", r.TransferMS, 3.5},
		{"TransferPct", r.TransferPct, 100 * 3.5 / 9},
		{"Ceiling", r.Ceiling, 9 / 5.5},
		{"Runs", float64(r.Runs), 1},
		{"stages", float64(len(r.Stages)), 7},
		{"by_op", float64(len(r.ByOp)), 2},
		// matmul: create 1 + compute 1.5 (3 ms over 2 untimed nodes).
		{"matmul ms", r.ByOp[0].MS, 2.5},
		{"matmul compute", r.ByOp[0].ComputeMS, 1.5},
		{"add ms", r.ByOp[1].MS, 2},
	}
	for _, c := range checks {
		if d := c.got - c.want; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s = %v, want %v (tolerance 1e-12)", c.name, c.got, c.want)
		}
	}
	if r.ByOp[0].Op != "matmul" || r.ByOp[0].Calls != 1 || r.ByOp[0].Nodes != 1 {
		t.Errorf("ByOp[0] = %+v, want matmul with 1 call, 1 node", r.ByOp[0])
	}
}

func TestWriteOpsGolden(t *testing.T) {
	fresh(t)
	Forward(true)
	eagerForward()
	Op(PassForward, "relu", msd(0.25))
	Op(PassForward, "relu", msd(0.25))
	// total 9.5: matmul 2.5 (26.3%), add 2 (21.1%), relu 0.5 (5.3%), other
	// stages 9.5-5 = 4.5 (47.4%).
	var b strings.Builder
	Data(PassForward).WriteOps(&b, 0)
	// No node times: compute split evenly per node, marked "~".
	// relu ran no node: 2 calls, 0 nodes.
	want := "forward per op (create + compute; ~ marks compute not measured per kernel)\n" +
		"  op                   calls   nodes         ms       %\n" +
		"  matmul                   1       1      2.50~   26.3%\n" +
		"  add                      1       1      2.00~   21.1%\n" +
		"  relu                     2       0      0.50     5.3%\n" +
		"  (other stages)                           4.50   47.4%  (upload 2.00, download 1.50, flush 0.50, ctx 0.25, graph 0.25)\n"
	if b.String() != want {
		t.Errorf("WriteOps printed\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	ReportOps(&b, PassForward, 1)
	want = "forward per op (create + compute; ~ marks compute not measured per kernel)\n" +
		"  op                   calls   nodes         ms       %\n" +
		"  matmul                   1       1      2.50~   26.3%\n" +
		"  (2 more ops)                             2.50   26.3%\n" +
		"  (other stages)                           4.50   47.4%  (upload 2.00, download 1.50, flush 0.50, ctx 0.25, graph 0.25)\n"
	if b.String() != want {
		t.Errorf("ReportOps(n=1) printed\n%s\nwant\n%s", b.String(), want)
	}
}

// TestNilWriter: every report function takes nil to mean "data only".
func TestNilWriter(t *testing.T) {
	fresh(t)
	Forward(true)
	Count(true)
	eagerForward()
	Xfer(Up, "x", 4)
	Launch("sync", 2)
	if ReportForward(nil) == nil || ReportOps(nil, PassForward, 0) == nil ||
		XferReport(nil, 0).UpCount != 1 || LaunchReport(nil).Total != 2 || ReportBackward(nil) != nil {
		t.Error("a report function with a nil writer lost its data")
	}
}

// TestCallsAndNodes: a composite's nodes are one call (Op, then Node), in
// recording and in a replay (NodeTime.Call), and the report says both: a
// user's MSELoss once a step read as 6 calls a step when nodes were counted.
func TestCallsAndNodes(t *testing.T) {
	fresh(t)
	Forward(true)
	for range 3 { // three steps of one MSELoss of 3 nodes and one MatMul
		Op(PassForward, "MSELoss", msd(0.1))
		Node(PassForward, "MSELoss", msd(0.1))
		Node(PassForward, "MSELoss", msd(0.1))
		Op(PassForward, "MatMul", msd(0.1))
	}
	// a replay of the same step: its nodes, the first of each call marked
	RecordRun(&Run{Site: "captured", Replayed: true, Compute: msd(4), Nodes: []NodeTime{
		{Op: "sub", User: "MSELoss", Pass: PassForward, Call: true}, {Op: "mul", User: "MSELoss", Pass: PassForward},
		{Op: "sum", User: "MSELoss", Pass: PassForward}, {Op: "matmul", User: "MatMul", Pass: PassForward, Call: true}}})
	r := Data(PassForward)
	if r.Ops != 16 || r.Calls != 8 {
		t.Errorf("report: %d operations, %d calls; want 16 nodes, 8 calls", r.Ops, r.Calls)
	}
	got := map[string][2]int{}
	for _, o := range r.ByOp {
		got[o.Op] = [2]int{o.Calls, o.Nodes}
	}
	// nodes are those run: the replay's only
	if got["MSELoss"] != [2]int{4, 3} || got["MatMul"] != [2]int{4, 1} {
		t.Errorf("calls, nodes run by op = %v; want MSELoss [4 3], MatMul [4 1]", got)
	}
	var b strings.Builder
	r.WriteText(&b)
	if want := "forward: 16 operations (8 calls),"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("report begins %q, want %q", b.String(), want)
	}
}

// TestReadWaitIsGraph: a read's wait for the device (Run.Wait, part of
// Download) is the graph stage of the download's pass, not transfer, so a
// step that moves 4 bytes after a 2 ms round trip is not advised to stay
// resident. The sums are exact: the pass total is unchanged.
func TestReadWaitIsGraph(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []NodeTime
	}{
		{"pass of the read", []NodeTime{{Op: "matmul", Pass: PassForward}, {Op: "matmul", Pass: PassBackward}}},
		{"no node of its pass", []NodeTime{{Op: "matmul", Pass: PassBackward}}},
		{"no nodes", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh(t)
			Forward(true)
			Backward(true)
			RecordRun(&Run{Site: "sync", Graph: msd(1), Compute: msd(1), Download: msd(2.5), Wait: msd(2),
				DownloadPass: PassForward, Nodes: tc.nodes})
			var graph, down, total float64
			for _, p := range []Pass{PassForward, PassBackward} {
				r := Data(p)
				total += r.TotalMS
				for _, s := range r.Stages {
					switch s.Stage {
					case "graph":
						graph += s.MS
					case "download":
						down += s.MS
					}
				}
			}
			if graph != 3 || down != 0.5 || total != 4.5 {
				t.Errorf("graph %v ms, download %v ms, total %v ms; want 3 (1 + the 2 ms wait), 0.5, 4.5", graph, down, total)
			}
		})
	}
	// the forward of the first case: transfer is the bytes only
	fresh(t)
	Forward(true)
	RecordRun(&Run{Site: "sync", Compute: msd(1), Download: msd(3), Wait: msd(3), DownloadPass: PassForward,
		Nodes: []NodeTime{{Op: "matmul", Pass: PassForward}}})
	if r := Data(PassForward); r.TransferPct != 0 || r.Ceiling != 1 {
		t.Errorf("a read that only waited: transfer %v%%, ceiling %vx; want 0, 1", r.TransferPct, r.Ceiling)
	}
}
