package profile

import "time"

// SchemaVersion is Profile.Schema; it changes when a field's meaning does.
const SchemaVersion = 1

// Profile is a whole-profile snapshot, the JSON the web page renders. Field
// names are snake_case with the unit in the name (ms, bytes, pct).
//
// Example (abridged):
//
//	{"schema":1,"device":"NVIDIA H200 (webgpu)","taken_at":"2026-...Z",
//	 "forward":{"pass":"forward","ops":12,"total_ms":10.5,"stages":[{"stage":"compute","ms":6,"pct":57.1},...],...},
//	 "backward":{...},"update":{...},
//	 "transfers":{"counted":true,"sites":[{"dir":"up","site":"inputs","count":3,"bytes":786432}],...},
//	 "launches":{"sites":[{"site":"sync","count":3}],"total":3},
//	 "steps":3,"step_ms":[31.2,30.9,31.0],"step_total_ms":93.1,
//	 "attributed_ms":90.4,"coverage_pct":97.1,"trace_events":120,"trace_dropped":0}
type Profile struct {
	// Schema is SchemaVersion.
	Schema int `json:"schema"`
	// Device names the device profiled, and Timer says how it times each
	// op (backend.Caps.Timer); the caller sets both (this package knows no
	// devices).
	Device string `json:"device"`
	Timer  string `json:"timer"`
	// Mode is how the profiled steps ran (lazy, captured, eager), when the
	// caller says; the page labels and compares profiles by it.
	Mode string `json:"mode,omitempty"`
	// TakenAt is when the snapshot was taken (UTC).
	TakenAt time.Time `json:"taken_at"`
	// Forward, Backward and Update are the pass profiles (never null; see
	// Report.Empty).
	Forward  *Report `json:"forward"`
	Backward *Report `json:"backward"`
	Update   *Report `json:"update"`
	// Transfers is the transfer tally (see Count).
	Transfers *Transfers `json:"transfers"`
	// Launches are the launch counts by site.
	Launches *LaunchCounts `json:"launches"`
	// Steps counts the steps recorded with Step; StepMS holds the wall time
	// of the last ones (at most 4096), oldest first; StepTotalMS sums all.
	Steps       int       `json:"steps"`
	StepMS      []float64 `json:"step_ms"`
	StepTotalMS float64   `json:"step_total_ms"`
	// AttributedMS is the stage time of all passes together.
	AttributedMS float64 `json:"attributed_ms"`
	// CoveragePct is AttributedMS over StepTotalMS: the profiler's promise is
	// >= 95 on a training step (0 when no step was recorded). Meaningful when
	// the profilers were on, and reset, over exactly the recorded steps.
	CoveragePct float64 `json:"coverage_pct"`
	// TraceEvents and TraceDropped count the kept and dropped trace events.
	TraceEvents  int `json:"trace_events"`
	TraceDropped int `json:"trace_dropped"`
	// StageInfo lists the stages in execution order with their meanings,
	// so that a reader of the file needs no copy of them.
	StageInfo []StageInfo `json:"stage_info"`
}

// Snapshot returns everything recorded so far; set Device before encoding.
func Snapshot() *Profile {
	mu.Lock()
	defer mu.Unlock()
	p := &Profile{
		Schema:       SchemaVersion,
		TakenAt:      time.Now().UTC().Round(0),
		Forward:      st.pass[PassForward].build(PassForward),
		Backward:     st.pass[PassBackward].build(PassBackward),
		Update:       st.pass[PassUpdate].build(PassUpdate),
		Transfers:    st.transfers(),
		Launches:     st.launches(),
		Steps:        st.steps.n,
		StepTotalMS:  ms(st.steps.total),
		TraceEvents:  st.trace.len(),
		TraceDropped: st.trace.dropped,
		StageInfo:    StageInfos(),
	}
	for _, ns := range st.steps.ordered() {
		p.StepMS = append(p.StepMS, ms(ns))
	}
	if p.StepMS == nil {
		p.StepMS = []float64{}
	}
	p.AttributedMS = p.Forward.TotalMS + p.Backward.TotalMS + p.Update.TotalMS
	p.CoveragePct = pct(p.AttributedMS, p.StepTotalMS)
	return p
}
