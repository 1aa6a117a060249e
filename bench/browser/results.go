package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ag-go/ag/profile"
)

// Goals the speed issue sets for the two ratios (ag step time over tfjs's).
const (
	GoalWebGPU = 0.4 // ag on WebGPU at least 2.5x as fast as tfjs on WebGPU
	GoalBest   = 0.5 // ag's best browser backend at least twice as fast as tfjs's best
)

// Run is one timed configuration in one round: a fresh tab, warm-up, then
// Steps timed training steps.
type Run struct {
	Round   int    `json:"round"`
	Side    string `json:"side"`           // "ag" or "tfjs"
	Backend string `json:"backend"`        // ag: "webgpu", "cpu-wasm"; tfjs: "webgpu", "wasm", "cpu", "webgl"
	Mode    string `json:"mode,omitempty"` // ag only: "captured", "lazy", "eager"
	// Profiled is true when the step times were taken with ag's profiler on
	// (captured and eager modes: ag.profile is their only entry point).
	Profiled bool      `json:"profiled"`
	MedianMS float64   `json:"median_ms"`
	MinMS    float64   `json:"min_ms"`
	StepMS   []float64 `json:"step_ms"`
	// FirstLoss and LastLoss are the losses of the first and last timed
	// steps (nil for ag's profiled modes: ag.profile returns no losses).
	FirstLoss *float64 `json:"first_loss,omitempty"`
	LastLoss  *float64 `json:"last_loss,omitempty"`
	Warmup    struct {
		Steps int     `json:"steps"`
		MS    float64 `json:"ms"`
	} `json:"warmup"`
	// Info is what the page reported about the backend (device, adapter,
	// wasm threads, versions...).
	Info map[string]any `json:"info,omitempty"`
	// Breakdown is ag's profile of this configuration, per step.
	Breakdown *Breakdown `json:"breakdown,omitempty"`
	Skip      string     `json:"skip,omitempty"`  // why it did not run (backend missing)
	Error     string     `json:"error,omitempty"` // why it failed
	// ConsoleErrors are the tab's console errors and uncaught exceptions.
	ConsoleErrors []string `json:"console_errors,omitempty"`
	WallS         float64  `json:"wall_s"`
}

// Name is the run's label in tables: "ag webgpu captured", "tfjs wasm".
func (r *Run) Name() string {
	return strings.TrimSpace(r.Side + " " + r.Backend + " " + r.Mode)
}

// OK reports whether the run produced step times.
func (r *Run) OK() bool { return r.Skip == "" && r.Error == "" && len(r.StepMS) > 0 }

// pageResult is what runBench resolves with (common.js, ag.js, tfjs.js).
type pageResult struct {
	Skip      string    `json:"skip"`
	Error     string    `json:"error"`
	MedianMS  float64   `json:"median_ms"`
	MinMS     float64   `json:"min_ms"`
	StepMS    []float64 `json:"step_ms"`
	FirstLoss *float64  `json:"first_loss"`
	LastLoss  *float64  `json:"last_loss"`
	Profiled  bool      `json:"profiled"`
	Warmup    struct {
		Steps int     `json:"steps"`
		MS    float64 `json:"ms"`
	} `json:"warmup"`
	Profile *agProfile `json:"profile"`
}

// agProfile is ag.profile's answer (wasm.WebProfile: profile.Profile plus
// the page's fields).
type agProfile struct {
	profile.Profile
	Mode     string  `json:"mode"`
	Compiles int     `json:"compiles"`
	WallMS   float64 `json:"wall_ms"`
}

// fill copies a page's answer into r; info keeps the fields that describe
// the backend.
func (r *Run) fill(raw string) error {
	var p pageResult
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return fmt.Errorf("decoding the result of %s: %w (%.200s)", r.Name(), err, raw)
	}
	r.Skip, r.Error = p.Skip, p.Error
	r.MedianMS, r.MinMS, r.StepMS = p.MedianMS, p.MinMS, p.StepMS
	r.FirstLoss, r.LastLoss, r.Profiled, r.Warmup = p.FirstLoss, p.LastLoss, p.Profiled, p.Warmup
	if p.Profile != nil {
		r.Breakdown = breakdown(p.Profile)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return fmt.Errorf("decoding the result of %s: %w", r.Name(), err)
	}
	for _, k := range []string{"skip", "error", "median_ms", "min_ms", "step_ms", "first_loss", "last_loss", "profiled", "warmup", "profile"} {
		delete(info, k)
	}
	if len(info) > 0 {
		r.Info = info
	}
	return nil
}

// Breakdown is ag's profile of a run reduced to per-step numbers: where a
// step's time goes, by pass, stage and op.
type Breakdown struct {
	Mode  string `json:"mode"`
	Steps int    `json:"steps"`
	// StepMS is the median profiled step and MeanStepMS the mean;
	// AttributedMS is the stage time per step (a mean, so compare it with
	// MeanStepMS); CoveragePct is their ratio as the profiler computes it.
	StepMS          float64  `json:"step_ms"`
	MeanStepMS      float64  `json:"mean_step_ms"`
	AttributedMS    float64  `json:"attributed_ms"`
	CoveragePct     float64  `json:"coverage_pct"`
	Passes          []Share  `json:"passes"`
	Stages          []Share  `json:"stages"`
	TopOps          []Share  `json:"top_ops"`
	LaunchesPerStep float64  `json:"launches_per_step"`
	UpPerStep       float64  `json:"uploads_per_step"`
	DownPerStep     float64  `json:"downloads_per_step"`
	Compiles        int      `json:"compiles"` // programs compiled during the profiled steps
	Notes           []string `json:"notes,omitempty"`
}

// Share is a named part of a step: ms per step and percent of the
// attributed time.
type Share struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
	Pct  float64 `json:"pct"`
}

// breakdown sums a profile's passes into per-step shares.
func breakdown(p *agProfile) *Breakdown {
	n := float64(max(p.Steps, 1))
	b := &Breakdown{Mode: p.Mode, Steps: p.Steps, StepMS: median(p.StepMS), MeanStepMS: p.StepTotalMS / n, AttributedMS: p.AttributedMS / n,
		CoveragePct: p.CoveragePct, Compiles: p.Compiles}
	stages, ops := map[string]float64{}, map[string]float64{}
	for _, r := range []*profile.Report{p.Forward, p.Backward, p.Update} {
		if r == nil {
			continue
		}
		b.Passes = append(b.Passes, Share{Name: r.Pass, MS: r.TotalMS / n})
		for _, s := range r.Stages {
			stages[s.Stage] += s.MS / n
		}
		for _, o := range r.ByOp {
			ops[o.Op] += o.MS / n
		}
	}
	b.Stages, b.TopOps = shares(stages, 0), shares(ops, 6)
	total := 0.0
	for _, s := range b.Passes {
		total += s.MS
	}
	for i := range b.Passes {
		b.Passes[i].Pct = pctOf(b.Passes[i].MS, total)
	}
	if p.Launches != nil {
		b.LaunchesPerStep = float64(p.Launches.Total) / n
	}
	if p.Transfers != nil {
		b.UpPerStep, b.DownPerStep = float64(p.Transfers.UpCount)/n, float64(p.Transfers.DownCount)/n
	}
	if b.Compiles > 0 {
		b.Notes = append(b.Notes, fmt.Sprintf("%d programs compiled inside the profiled steps", b.Compiles))
	}
	return b
}

// shares sorts m largest first (keeping at most top, 0 for all) with each
// part's percent of the sum.
func shares(m map[string]float64, top int) []Share {
	total := 0.0
	for _, v := range m {
		total += v
	}
	out := make([]Share, 0, len(m))
	for k, v := range m {
		out = append(out, Share{Name: k, MS: v, Pct: pctOf(v, total)})
	}
	slices.SortFunc(out, func(a, b Share) int { return cmp.Or(cmp.Compare(b.MS, a.MS), cmp.Compare(a.Name, b.Name)) })
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out
}

func pctOf(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Ratios are the two numbers for one round (or their medians over
// the rounds): ag's step time over tfjs's, so lower is better for ag. A
// ratio is 0 when one side is missing.
type Ratios struct {
	Round int `json:"round"` // 0 for the summary
	// WebGPU: ag's fastest mode on WebGPU over tfjs's webgpu backend.
	AgWebGPU    string  `json:"ag_webgpu"`
	AgWebGPUMS  float64 `json:"ag_webgpu_ms"`
	TfjsWebGPU  float64 `json:"tfjs_webgpu_ms"`
	WebGPURatio float64 `json:"webgpu_ratio"`
	// Best: ag's fastest browser configuration over tfjs's fastest backend.
	AgBest     string  `json:"ag_best"`
	AgBestMS   float64 `json:"ag_best_ms"`
	TfjsBest   string  `json:"tfjs_best"`
	TfjsBestMS float64 `json:"tfjs_best_ms"`
	BestRatio  float64 `json:"best_ratio"`
	// WebGPUMinRatio and BestMinRatio are the same ratios from each side's
	// fastest single step (min_ms): less sensitive to other load on a
	// shared machine, which only ever adds time.
	WebGPUMinRatio float64 `json:"webgpu_min_ratio"`
	BestMinRatio   float64 `json:"best_min_ratio"`
}

// fastest returns the run with the lowest median among those keep accepts.
func fastest(runs []*Run, keep func(*Run) bool) *Run {
	var best *Run
	for _, r := range runs {
		if r.OK() && keep(r) && (best == nil || r.MedianMS < best.MedianMS) {
			best = r
		}
	}
	return best
}

// ratios computes one round's Ratios from its runs.
func ratios(round int, runs []*Run) Ratios {
	q := Ratios{Round: round}
	if a := fastest(runs, func(r *Run) bool { return r.Side == "ag" && r.Backend == "webgpu" }); a != nil {
		q.AgWebGPU, q.AgWebGPUMS = a.Name(), a.MedianMS
	}
	if t := fastest(runs, func(r *Run) bool { return r.Side == "tfjs" && r.Backend == "webgpu" }); t != nil {
		q.TfjsWebGPU = t.MedianMS
	}
	if a := fastest(runs, func(r *Run) bool { return r.Side == "ag" }); a != nil {
		q.AgBest, q.AgBestMS = a.Name(), a.MedianMS
	}
	if t := fastest(runs, func(r *Run) bool { return r.Side == "tfjs" }); t != nil {
		q.TfjsBest, q.TfjsBestMS = t.Name(), t.MedianMS
	}
	q.WebGPURatio, q.BestRatio = ratio(q.AgWebGPUMS, q.TfjsWebGPU), ratio(q.AgBestMS, q.TfjsBestMS)
	minOf := func(keep func(*Run) bool) float64 {
		m := 0.0
		for _, r := range runs {
			if r.OK() && keep(r) && (m == 0 || r.MinMS < m) {
				m = r.MinMS
			}
		}
		return m
	}
	isAg := func(r *Run) bool { return r.Side == "ag" }
	isTfjs := func(r *Run) bool { return r.Side == "tfjs" }
	q.WebGPUMinRatio = ratio(minOf(func(r *Run) bool { return isAg(r) && r.Backend == "webgpu" }), minOf(func(r *Run) bool { return isTfjs(r) && r.Backend == "webgpu" }))
	q.BestMinRatio = ratio(minOf(isAg), minOf(isTfjs))
	return q
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// summarize takes the median over rounds of each ratio (rounds without one
// left out) and names the configurations that were fastest most often.
func summarize(rounds []Ratios) Ratios {
	var s Ratios
	pick := func(get func(Ratios) float64) float64 {
		var xs []float64
		for _, r := range rounds {
			if v := get(r); v > 0 {
				xs = append(xs, v)
			}
		}
		return median(xs)
	}
	mode := func(get func(Ratios) string) string {
		count := map[string]int{}
		best := ""
		for _, r := range rounds {
			if v := get(r); v != "" {
				count[v]++
				if count[v] > count[best] || (count[v] == count[best] && v < best) {
					best = v
				}
			}
		}
		return best
	}
	s.AgWebGPU, s.AgBest, s.TfjsBest = mode(func(r Ratios) string { return r.AgWebGPU }), mode(func(r Ratios) string { return r.AgBest }), mode(func(r Ratios) string { return r.TfjsBest })
	s.AgWebGPUMS, s.TfjsWebGPU = pick(func(r Ratios) float64 { return r.AgWebGPUMS }), pick(func(r Ratios) float64 { return r.TfjsWebGPU })
	s.AgBestMS, s.TfjsBestMS = pick(func(r Ratios) float64 { return r.AgBestMS }), pick(func(r Ratios) float64 { return r.TfjsBestMS })
	s.WebGPURatio, s.BestRatio = pick(func(r Ratios) float64 { return r.WebGPURatio }), pick(func(r Ratios) float64 { return r.BestRatio })
	s.WebGPUMinRatio, s.BestMinRatio = pick(func(r Ratios) float64 { return r.WebGPUMinRatio }), pick(func(r Ratios) float64 { return r.BestMinRatio })
	return s
}

// verdict says whether a ratio meets its goal.
func verdict(r, goal float64) string {
	switch {
	case r == 0:
		return "n/a"
	case r <= goal:
		return "met"
	default:
		return fmt.Sprintf("missed: ag %.2fx slower than the goal", r/goal)
	}
}

// printRuns writes the per-run table.
func printRuns(w io.Writer, runs []*Run) {
	fmt.Fprintf(w, "%-5s %-26s %10s %10s %8s %21s  %s\n", "round", "config", "median ms", "min ms", "warm-up", "loss first -> last", "note")
	for _, r := range runs {
		note := ""
		switch {
		case r.Skip != "":
			note = "skipped: " + r.Skip
		case r.Error != "":
			note = "error: " + firstLine(r.Error)
		case r.Profiled:
			note = "profiled"
		}
		if len(r.ConsoleErrors) > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" (%d console errors)", len(r.ConsoleErrors)))
		}
		if !r.OK() {
			fmt.Fprintf(w, "%-5d %-26s %10s %10s %8s %21s  %s\n", r.Round, r.Name(), "-", "-", "-", "-", note)
			continue
		}
		loss := "-"
		if r.FirstLoss != nil && r.LastLoss != nil {
			loss = fmt.Sprintf("%.4f -> %.4f", *r.FirstLoss, *r.LastLoss)
		}
		fmt.Fprintf(w, "%-5d %-26s %10.2f %10.2f %8s %21s  %s\n", r.Round, r.Name(), r.MedianMS, r.MinMS,
			fmt.Sprintf("%d/%.1fs", r.Warmup.Steps, r.Warmup.MS/1e3), loss, note)
	}
}

// printRatios writes the ratio table, one row per round and the median.
func printRatios(w io.Writer, rounds []Ratios, sum Ratios) {
	fmt.Fprintf(w, "\nag step / tfjs step (lower is better for ag)\n")
	fmt.Fprintf(w, "%-6s %-40s %-40s %-14s %s\n", "round", fmt.Sprintf("(1) ag WebGPU / tfjs-webgpu (goal <= %.1f)", GoalWebGPU),
		fmt.Sprintf("(2) ag best / tfjs best (goal <= %.1f)", GoalBest), "min: (1)  (2)", "fastest by median")
	// The median row has no "= a / b": its ratio and its times are medians
	// over the rounds, taken one by one.
	row := func(label string, q Ratios) {
		one, two := "n/a", "n/a"
		if q.WebGPURatio > 0 {
			one = fmt.Sprintf("%.3f", q.WebGPURatio)
			if q.Round > 0 {
				one += fmt.Sprintf(" = %.1f / %.1f ms", q.AgWebGPUMS, q.TfjsWebGPU)
			}
		}
		if q.BestRatio > 0 {
			two = fmt.Sprintf("%.3f", q.BestRatio)
			if q.Round > 0 {
				two += fmt.Sprintf(" = %.1f / %.1f ms", q.AgBestMS, q.TfjsBestMS)
			}
		}
		mins := fmt.Sprintf("%.3f  %.3f", q.WebGPUMinRatio, q.BestMinRatio)
		fmt.Fprintf(w, "%-6s %-40s %-40s %-14s %s vs %s\n", label, one, two, mins, orDash(q.AgBest), orDash(q.TfjsBest))
	}
	for _, q := range rounds {
		row(fmt.Sprint(q.Round), q)
	}
	row("median", sum)
	fmt.Fprintf(w, "ratios of medians (min: of the fastest single steps); the median row is the median of the rounds' ratios\n")
	fmt.Fprintf(w, "(1) %s; (2) %s\n", verdict(sum.WebGPURatio, GoalWebGPU), verdict(sum.BestRatio, GoalBest))
}

// printBreakdowns writes, for each ag configuration, the last round's
// profile: where a step's time goes.
func printBreakdowns(w io.Writer, runs []*Run) {
	last := map[string]*Run{}
	var names []string
	for _, r := range runs {
		if r.Breakdown == nil || !r.OK() {
			continue
		}
		if _, seen := last[r.Name()]; !seen {
			names = append(names, r.Name())
		}
		last[r.Name()] = r
	}
	if len(names) > 0 {
		fmt.Fprintf(w, "\nag profile per step (last round; ag.profile, profiler on)\n")
	}
	for _, n := range names {
		b := last[n].Breakdown
		fmt.Fprintf(w, "%s (profiled %s, %d steps): step median %.2f ms, mean %.2f ms, attributed %.2f ms/step (coverage %.0f%%), %.1f launches, %.1f up / %.1f down transfers per step\n",
			n, b.Mode, b.Steps, b.StepMS, b.MeanStepMS, b.AttributedMS, b.CoveragePct, b.LaunchesPerStep, b.UpPerStep, b.DownPerStep)
		fmt.Fprintf(w, "  (pass, stage and op times below are means per step)\n")
		fmt.Fprintf(w, "  passes: %s\n  stages: %s\n  ops:    %s\n", joinShares(b.Passes), joinShares(b.Stages), joinShares(b.TopOps))
		for _, note := range b.Notes {
			fmt.Fprintf(w, "  note: %s\n", note)
		}
	}
}

func joinShares(s []Share) string {
	parts := make([]string, 0, len(s))
	for _, x := range s {
		if x.MS < 0.005 && x.Pct < 0.5 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f ms (%.0f%%)", x.Name, x.MS, x.Pct))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// printAdapters writes the WebGPU adapter each WebGPU run's page got, one
// line per distinct adapter, so that a run on another adapter than the
// probe's (a SwiftShader fallback beside a GPU) shows.
func printAdapters(w io.Writer, runs []*Run, probed *Adapter) {
	var order []string
	names := map[string][]string{}
	for _, r := range runs {
		a := adapterOf(r)
		if a == nil {
			continue
		}
		s := a.Summary()
		if _, seen := names[s]; !seen {
			order = append(order, s)
		}
		names[s] = append(names[s], fmt.Sprintf("%d:%s", r.Round, r.Name()))
	}
	for _, s := range order {
		note := ""
		if probed != nil && s != probed.Summary() {
			note = "  <- NOT the probe's adapter"
		}
		fmt.Fprintf(w, "adapter of %d WebGPU runs: %s%s\n", len(names[s]), s, note)
	}
}
