package profile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// Trace lanes. Fixed ids keep nesting valid in the viewers: runs with their
// stages and nodes on one lane, per-op create times on another.
const (
	tracePID = 1
	tidSteps = 1
	tidRuns  = 2
	tidOps   = 3
)

// laneStride separates the lanes of one kind: the k-th extra lane of kind
// tid (tidSteps, tidRuns, tidOps) is tid + k*laneStride.
const laneStride = 10

// laneNames name the lane kinds in the viewer.
var laneNames = map[int]string{tidSteps: "steps", tidRuns: "runs", tidOps: "ops (create)"}

// defaultTraceCap bounds the trace ring: about 100 bytes an event, so a few
// MB at most, while covering several steps of a mid-sized model.
const defaultTraceCap = 1 << 16

// event is one trace event, times relative to st.epoch.
type event struct {
	name, cat string
	ph        byte
	tid       int
	ts, dur   time.Duration
	args      *eventArgs
}

// eventArgs are the "args" shown when an event is selected in the viewer.
type eventArgs struct {
	Nodes       int  `json:"nodes,omitempty"`
	DeviceTimed bool `json:"device_timed,omitempty"`
	Step        int  `json:"step,omitempty"`
}

// ring keeps the newest events; older ones are dropped and counted.
type ring struct {
	buf     []event
	head    int // next write position once full
	full    bool
	dropped int
	// ends holds, per lane kind, the latest end of each of its lanes
	// (see lane).
	ends map[int][]time.Duration
}

func (r *ring) setCap(n int) {
	*r = ring{buf: make([]event, 0, n)}
}

func (r *ring) clear() { r.setCap(cap(r.buf)) }

func (r *ring) len() int { return len(r.buf) }

func (r *ring) add(e event) {
	if cap(r.buf) == 0 {
		r.dropped++
		return
	}
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.head] = e
	r.head = (r.head + 1) % len(r.buf)
	r.dropped++
}

// lane returns the lane of kind tid for a span [ts, ts+dur): the first of
// that kind whose spans all end by ts, or a new one. The spans of one
// goroutine follow one another on lane tid; those of goroutines running at
// the same time (one per device) would overlap them there, which the
// trace viewers cannot nest, so they go on lanes beside it.
func (r *ring) lane(tid int, ts, dur time.Duration) int {
	if r.ends == nil {
		r.ends = map[int][]time.Duration{}
	}
	ends := r.ends[tid]
	k := 0
	for k < len(ends) && ends[k] > ts {
		k++
	}
	if k == len(ends) {
		ends = append(ends, 0)
	}
	ends[k] = ts + max(dur, 0)
	r.ends[tid] = ends
	return tid + k*laneStride
}

// each calls f on the kept events, oldest first.
func (r *ring) each(f func(*event)) {
	for i := range r.buf {
		f(&r.buf[(r.head+i)%len(r.buf)])
	}
}

// SetTraceCap sets how many trace events are kept (the newest win) and
// clears the trace. 0 turns trace keeping off.
func SetTraceCap(n int) {
	mu.Lock()
	st.trace.setCap(max(n, 0))
	mu.Unlock()
}

// traceStages is the order stages are laid out inside a run's span.
var traceStages = [...]Stage{StageCtx, StageFlush, StageUpload, StageGraph, StageCompute, StageDownload}

// traceRun adds r as a span with its stages nested in order and, when node
// durations are known, its nodes nested in the compute span. Stage order is
// the seed's; the real order inside a backend may differ, the sums do not.
func (s *state) traceRun(r *Run, sh *runShare) {
	total := r.Ctx + r.Flush + r.Upload + r.Graph + time.Duration(sh.compute) + r.Download
	start := r.Start
	if start.IsZero() {
		start = time.Now().Add(-total)
	}
	t := start.Sub(s.epoch)
	tid := s.trace.lane(tidRuns, t, total) // the run's stages and nodes nest on its lane
	s.trace.add(event{name: r.Site, cat: "run", ph: 'X', tid: tid, ts: t, dur: total,
		args: &eventArgs{Nodes: len(r.Nodes), DeviceTimed: r.DeviceTimed}})
	for _, sg := range traceStages {
		d := r.dur(sg)
		if sg == StageCompute {
			d = time.Duration(sh.compute)
		}
		if w := r.wait(); sg == StageDownload && w > 0 {
			// the read's wait comes first: its bytes move once the device is done
			s.trace.add(event{name: "graph (read wait)", cat: "stage", ph: 'X', tid: tid, ts: t, dur: w})
			t += w
		}
		if d <= 0 {
			continue
		}
		s.trace.add(event{name: stageNames[sg], cat: "stage", ph: 'X', tid: tid, ts: t, dur: d})
		if sg == StageCompute && sh.timed {
			// Cumulative rounding makes the node spans tile the compute span
			// exactly, so they nest inside it.
			var cum float64
			prev := time.Duration(0)
			for i, nd := range r.Nodes {
				cum += sh.node[i]
				end := min(time.Duration(math.Round(cum)), d)
				if end > prev {
					s.trace.add(event{name: nd.Op, cat: nd.Pass.String(), ph: 'X', tid: tid, ts: t + prev, dur: end - prev})
				}
				prev = end
			}
		}
		t += d
	}
}

// traceEvent is the Trace Event Format's JSON shape of one event.
type traceEvent struct {
	Name string   `json:"name"`
	Cat  string   `json:"cat,omitempty"`
	Ph   string   `json:"ph"`
	TS   float64  `json:"ts"`            // microseconds
	Dur  *float64 `json:"dur,omitempty"` // microseconds, "X" events only
	PID  int      `json:"pid"`
	TID  int      `json:"tid"`
	Args any      `json:"args,omitempty"`
}

// traceFile is the top-level object of the Trace Event Format.
type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// WriteTrace writes the kept trace events as Chrome Trace Event Format JSON
// (open it in Perfetto or chrome://tracing). Runs are "X" spans named by
// site with their stages nested (category "stage") and, where node times are
// known, nodes nested in compute (category = pass); per-op create times are
// "X" spans on their own lane (category = pass); steps on a third lane.
// Spans that overlap in time (devices running at once) go on further lanes
// of their kind ("runs 2", ...), so that every lane nests.
func WriteTrace(w io.Writer) error {
	mu.Lock()
	f := traceFile{DisplayTimeUnit: "ms", OtherData: map[string]any{
		"producer":       "github.com/ag-go/ag/profile",
		"dropped_events": st.trace.dropped,
		"epoch":          st.epoch.UTC().Format(time.RFC3339Nano),
	}}
	f.TraceEvents = make([]traceEvent, 0, st.trace.len()+4)
	meta := func(name string, tid int, value string) {
		f.TraceEvents = append(f.TraceEvents, traceEvent{Name: name, Ph: "M", PID: tracePID, TID: tid,
			Args: map[string]string{"name": value}})
	}
	meta("process_name", 0, "ag")
	for _, tid := range []int{tidSteps, tidRuns, tidOps} {
		meta("thread_name", tid, laneNames[tid])
		for k := 1; k < len(st.trace.ends[tid]); k++ {
			meta("thread_name", tid+k*laneStride, fmt.Sprintf("%s %d", laneNames[tid], k+1))
		}
	}
	st.trace.each(func(e *event) {
		te := traceEvent{Name: e.name, Cat: e.cat, Ph: string(e.ph), TS: us(e.ts), PID: tracePID, TID: e.tid}
		if e.ph == 'X' {
			d := us(e.dur)
			te.Dur = &d
		}
		if e.args != nil {
			te.Args = e.args
		}
		f.TraceEvents = append(f.TraceEvents, te)
	})
	mu.Unlock()

	bw := bufio.NewWriter(w)
	if err := json.NewEncoder(bw).Encode(&f); err != nil {
		return fmt.Errorf("profile.WriteTrace: encoding %d events: %w", len(f.TraceEvents), err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profile.WriteTrace: writing: %w", err)
	}
	return nil
}
