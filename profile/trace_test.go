package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

type jsonEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	TS   float64         `json:"ts"`
	Dur  *float64        `json:"dur"`
	PID  int             `json:"pid"`
	TID  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

type jsonTrace struct {
	TraceEvents     []jsonEvent    `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

func readTrace(t *testing.T) jsonTrace {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTrace(&buf); err != nil {
		t.Fatalf("WriteTrace: %v", err)
	}
	var tr jsonTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("trace is not JSON: %v\n%s", err, buf.String())
	}
	return tr
}

func TestTrace(t *testing.T) {
	fresh(t)
	Forward(true)
	Backward(true)
	Op(PassForward, "matmul", msd(0.2))
	start := time.Now()
	RecordRun(&Run{Site: "sync", Start: start, Ctx: msd(0.1), Upload: msd(0.5), Compute: msd(3), Download: msd(0.4),
		DeviceTimed: true, DownloadPass: PassForward,
		Nodes: []NodeTime{{Op: "matmul", Pass: PassForward, Dur: msd(1)}, {Op: "matmul", Pass: PassBackward, Dur: msd(2)}}})
	Step(msd(5))

	tr := readTrace(t)
	if tr.DisplayTimeUnit != "ms" || tr.OtherData["dropped_events"] != float64(0) {
		t.Errorf("displayTimeUnit %q, otherData %v", tr.DisplayTimeUnit, tr.OtherData)
	}
	byName := map[string][]jsonEvent{}
	for _, e := range tr.TraceEvents {
		if e.PID != tracePID {
			t.Errorf("event %s has pid %d, want %d", e.Name, e.PID, tracePID)
		}
		if e.Ph == "X" && e.Dur == nil {
			t.Errorf("X event %s has no dur", e.Name)
		}
		byName[e.Name] = append(byName[e.Name], e)
	}
	for _, name := range []string{"process_name", "thread_name", "sync", "ctx", "upload", "compute", "download", "matmul", "step"} {
		if len(byName[name]) == 0 {
			t.Errorf("trace lacks event %q; have %v", name, byName)
		}
	}
	if len(byName["flush"]) != 0 || len(byName["graph"]) != 0 {
		t.Error("zero-length stages were traced")
	}

	run := byName["sync"][0]
	if run.Cat != "run" || run.TID != tidRuns || *run.Dur != 4000 { // 0.1+0.5+3+0.4 ms in µs
		t.Errorf("run event = %+v, want cat run, tid %d, dur 4000 µs", run, tidRuns)
	}
	var args eventArgs
	if err := json.Unmarshal(run.Args, &args); err != nil || args.Nodes != 2 || !args.DeviceTimed {
		t.Errorf("run args %s (%v), want nodes 2, device_timed", run.Args, err)
	}
	// Stages nest in order inside the run: ctx, upload, compute, download.
	at := run.TS
	for _, name := range []string{"ctx", "upload", "compute", "download"} {
		e := byName[name][0]
		if e.Cat != "stage" || !near(e.TS, at) {
			t.Errorf("stage %s at %v µs (cat %q), want %v", name, e.TS, e.Cat, at)
		}
		at += *e.Dur
	}
	if !near(at, run.TS+*run.Dur) {
		t.Errorf("stages end at %v µs, run at %v", at, run.TS+*run.Dur)
	}
	// Nodes tile the compute span: forward 1 ms, backward 2 ms.
	comp := byName["compute"][0]
	var nodes []jsonEvent
	for _, e := range byName["matmul"] {
		if e.TID == tidRuns {
			nodes = append(nodes, e)
		}
	}
	if len(nodes) != 2 || nodes[0].Cat != "forward" || nodes[1].Cat != "backward" ||
		!near(nodes[0].TS, comp.TS) || *nodes[0].Dur != 1000 || *nodes[1].Dur != 2000 ||
		!near(nodes[1].TS, comp.TS+1000) {
		t.Errorf("node events %+v, want forward 1000 µs then backward 2000 µs from %v", nodes, comp.TS)
	}
	// The op's create span is on its own lane, ending before the run starts.
	var op jsonEvent
	for _, e := range byName["matmul"] {
		if e.TID == tidOps {
			op = e
		}
	}
	if op.Cat != "forward" || *op.Dur != 200 || op.TS+*op.Dur > run.TS+1 {
		t.Errorf("op event %+v, want cat forward, 200 µs, before the run at %v", op, run.TS)
	}
}

func near(a, b float64) bool { return a-b < 1e-3 && b-a < 1e-3 } // within 1 ns

func TestTraceRing(t *testing.T) {
	fresh(t)
	Forward(true)
	SetTraceCap(10)
	for i := range 25 {
		Op(PassForward, fmt.Sprintf("op%d", i), time.Microsecond)
	}
	tr := readTrace(t)
	var names []string
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			names = append(names, e.Name)
		}
	}
	if len(names) != 10 || names[0] != "op15" || names[9] != "op24" {
		t.Errorf("kept %v, want op15..op24 in order", names)
	}
	if tr.OtherData["dropped_events"] != float64(15) {
		t.Errorf("dropped_events = %v, want 15", tr.OtherData["dropped_events"])
	}
	SetTraceCap(0)
	Op(PassForward, "x", time.Microsecond)
	if p := Snapshot(); p.TraceEvents != 0 || p.TraceDropped != 1 {
		t.Errorf("cap 0: kept %d dropped %d, want 0, 1", p.TraceEvents, p.TraceDropped)
	}
}

// TestTraceOff: nothing is traced while every profiler is off.
func TestTraceOff(t *testing.T) {
	fresh(t)
	Op(PassForward, "x", time.Microsecond)
	RecordRun(&Run{Site: "sync", Compute: time.Millisecond})
	Step(time.Millisecond)
	if p := Snapshot(); p.TraceEvents != 0 {
		t.Errorf("traced %d events with profiling off", p.TraceEvents)
	}
}

// TestTraceLanes: spans of two devices running at once (one goroutine
// each) overlap in time; on one lane the viewers would cut or wrongly nest
// them, so the second goes on a lane of its own, named, while spans that
// follow one another share a lane.
func TestTraceLanes(t *testing.T) {
	fresh(t)
	Forward(true)
	s := time.Now()
	run := func(site string, at time.Duration) {
		RecordRun(&Run{Site: site, Start: s.Add(at), Upload: msd(1), Compute: msd(9),
			Nodes: []NodeTime{{Op: "matmul", Pass: PassForward, Dur: msd(1)}}})
	}
	run("a", 0)
	run("b", msd(5))  // overlaps a
	run("c", msd(10)) // after a
	// The second step and op begin an hour before the first ends, so they
	// overlap it however long the scheduler keeps this goroutine from the
	// next call (a 20 ms step and a 30 ms one recorded in turn overlapped
	// only if they were recorded within 30 ms of each other, an op within
	// 3 ms).
	Step(msd(20))
	Step(time.Since(s) + time.Hour) // overlaps the step before
	Op(PassForward, "x", msd(2))
	Op(PassForward, "y", time.Since(s)+time.Hour)

	tr := readTrace(t)
	type span struct {
		name       string
		start, end float64
	}
	lanes := map[int][]span{}
	named := map[int]string{}
	tidOf := map[string]int{}
	for _, e := range tr.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "thread_name":
			var a map[string]string
			json.Unmarshal(e.Args, &a)
			named[e.TID] = a["name"]
		case e.Ph == "X":
			lanes[e.TID] = append(lanes[e.TID], span{e.Name, e.TS, e.TS + *e.Dur})
			if e.Cat == "run" || e.Cat == "step" || e.Name == "x" || e.Name == "y" {
				tidOf[e.Name+fmt.Sprint(len(tidOf))] = e.TID
			}
		}
	}
	// On every lane two spans nest or are disjoint.
	for tid, ss := range lanes {
		if named[tid] == "" {
			t.Errorf("lane %d has %d spans and no thread_name", tid, len(ss))
		}
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				disjoint := a.end <= b.start+1e-3 || b.end <= a.start+1e-3
				nested := a.start <= b.start+1e-3 && b.end <= a.end+1e-3 || b.start <= a.start+1e-3 && a.end <= b.end+1e-3
				if !disjoint && !nested {
					t.Errorf("lane %d (%s): %s [%.0f %.0f] and %s [%.0f %.0f] overlap without nesting", tid, named[tid], a.name, a.start, a.end, b.name, b.start, b.end)
				}
			}
		}
	}
	want := map[string]int{"a0": tidRuns, "b1": tidRuns + laneStride, "c2": tidRuns,
		"step3": tidSteps, "step4": tidSteps + laneStride, "x5": tidOps, "y6": tidOps + laneStride}
	for k, tid := range want {
		if tidOf[k] != tid {
			t.Errorf("span %s on lane %d, want %d (all: %v)", k, tidOf[k], tid, tidOf)
		}
	}
	if named[tidRuns+laneStride] != "runs 2" {
		t.Errorf("second run lane named %q, want \"runs 2\"", named[tidRuns+laneStride])
	}
}
