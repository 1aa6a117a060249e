// Command browser benchmarks ag's training step in the browser against
// TensorFlow.js in the same headless Chromium: the MLP of
// internal/workload (depth Linear layers width x width, ReLU between, Adam,
// MSE, batch read by index from data on the device) on ag's WebGPU and
// wasm-CPU devices and on tfjs's webgpu, wasm and cpu backends.
//
//	go run ./bench/browser -width 256 -depth 4 -batch 64 -steps 20 -json out.json
//
// It installs the pinned npm packages when node_modules is missing (npm ci
// in bench/browser), builds ag.wasm with web/build.sh, serves the pages on
// 127.0.0.1 and runs ag's and tfjs's pages alternately, a fresh tab per
// configuration, for -rounds rounds. Each run warms up (at least
// -warmup-steps steps and -warmup-ms, which keeps WebGPU shader compiles
// out) and then times -steps steps, each reading the loss back. It prints
// the runs, the two ratios per round - (1) ag WebGPU / tfjs-webgpu,
// goal <= 0.5; (2) ag's best / tfjs's best, goal <= 1.0 - and ag's profile
// of each configuration, and writes everything as JSON with -json.
//
// The machines are noisy: compare ratios of one round, not numbers of
// different runs.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Options are the command's flags.
type Options struct {
	Width, Depth, Batch int
	LR                  float64
	Steps, Rounds       int
	WarmupSteps         int
	WarmupMS            float64
	ProfileSteps        int
	TfjsWasmThreads     int      // 0: tfjs's default
	AgDevices           []string // "webgpu", "cpu"
	AgModes             []string // "captured", "lazy", "eager"
	TfjsBackends        []string // "webgpu", "wasm", "cpu", "webgl"
	JSON                string
	AgSrc               string // the ag checkout ag.wasm is built from
	Chromium            string
	Timeout, Load       time.Duration
	NoInstall, Verbose  bool
}

// Report is the JSON the command writes.
type Report struct {
	Command  string   `json:"command"`
	AgSrc    string   `json:"ag_src"` // the checkout ag.wasm was built from
	AgRev    string   `json:"ag_rev"` // its git commit, "+dirty" with uncommitted changes
	Model    any      `json:"model"`
	Steps    int      `json:"steps"`
	Rounds   int      `json:"rounds"`
	Browser  string   `json:"browser"`
	Go       string   `json:"go"`
	CPUs     int      `json:"cpus"`
	Started  string   `json:"started"`
	Runs     []*Run   `json:"runs"`
	PerRound []Ratios `json:"ratios_per_round"`
	Summary  Ratios   `json:"ratios_median"`
	Goals    any      `json:"goals"`
}

// pageConfig is runBench's argument (ag.js, tfjs.js).
type pageConfig struct {
	Width        int     `json:"width"`
	Depth        int     `json:"depth"`
	Batch        int     `json:"batch"`
	LR           float64 `json:"lr"`
	Steps        int     `json:"steps"`
	ProfileSteps int     `json:"profileSteps"`
	Device       string  `json:"device,omitempty"`      // ag
	Mode         string  `json:"mode,omitempty"`        // ag
	Backend      string  `json:"backend,omitempty"`     // tfjs
	WasmThreads  int     `json:"wasmThreads,omitempty"` // tfjs
	Warmup       struct {
		MinSteps int     `json:"minSteps"`
		MinMS    float64 `json:"minMS"`
		MaxSteps int     `json:"maxSteps"`
	} `json:"warmup"`
}

func main() {
	var o Options
	var agDevices, agModes, tfjsBackends string
	flag.IntVar(&o.Width, "width", 256, "hidden width of the MLP")
	flag.IntVar(&o.Depth, "depth", 4, "number of Linear (dense) layers")
	flag.IntVar(&o.Batch, "batch", 64, "batch size")
	flag.Float64Var(&o.LR, "lr", 1e-3, "Adam learning rate")
	flag.IntVar(&o.Steps, "steps", 20, "timed steps per run")
	flag.IntVar(&o.Rounds, "rounds", 3, "rounds; each runs every configuration once, ag and tfjs alternating")
	flag.IntVar(&o.WarmupSteps, "warmup-steps", 3, "untimed steps before timing, at least")
	flag.Float64Var(&o.WarmupMS, "warmup-ms", 3000, "untimed milliseconds before timing, at least (WebGPU shader compiles take ~3 s)")
	flag.IntVar(&o.ProfileSteps, "profile-steps", 5, "steps of ag's lazy-mode profile after its timing")
	flag.StringVar(&agDevices, "ag-devices", "webgpu,cpu", "ag devices (cpu is ag's CPU backend compiled to wasm)")
	flag.StringVar(&agModes, "ag-modes", "captured,lazy", "ag execution modes: captured, lazy, eager")
	flag.StringVar(&tfjsBackends, "tfjs-backends", "webgpu,wasm,cpu", "tfjs backends: webgpu, wasm, cpu, webgl")
	flag.IntVar(&o.TfjsWasmThreads, "tfjs-wasm-threads", 0, "threads of tfjs's wasm backend (0: its default, which is 1 on 2 cores)")
	flag.StringVar(&o.JSON, "json", "", "write the report as JSON to this file")
	flag.StringVar(&o.AgSrc, "ag-src", "", "build ag.wasm from this ag checkout (default: the one this runs in); the pages and peers stay the same")
	flag.StringVar(&o.Chromium, "chromium", "", "Chromium binary (default: $AG_CHROMIUM, then chromium on PATH)")
	flag.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "limit for one run (warm-up, timing, profile)")
	flag.DurationVar(&o.Load, "load-timeout", time.Minute, "limit for a page to load")
	flag.BoolVar(&o.NoInstall, "no-install", false, "fail instead of running npm ci when node_modules is missing")
	flag.BoolVar(&o.Verbose, "v", false, "echo the pages' console")
	flag.Parse()
	o.AgDevices, o.AgModes, o.TfjsBackends = list(agDevices), list(agModes), list(tfjsBackends)
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench/browser: %v\n", err)
		os.Exit(1)
	}
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// job is one configuration of a round.
type job struct {
	side, page string
	cfg        pageConfig
	label      string // Run.Backend
}

// jobs lists a round's configurations in the order they run: each ag
// device's modes, then the tfjs backend that matches it (webgpu next to
// webgpu, wasm and cpu next to ag's cpu-wasm), so ag and tfjs alternate.
func jobs(o Options) []job {
	base := pageConfig{Width: o.Width, Depth: o.Depth, Batch: o.Batch, LR: o.LR, Steps: o.Steps, ProfileSteps: o.ProfileSteps, WasmThreads: o.TfjsWasmThreads}
	base.Warmup.MinSteps, base.Warmup.MinMS, base.Warmup.MaxSteps = o.WarmupSteps, o.WarmupMS, max(50, o.WarmupSteps)
	var out []job
	tfjsDone := map[string]bool{}
	addTfjs := func(b string) {
		if tfjsDone[b] || !slices.Contains(o.TfjsBackends, b) {
			return
		}
		tfjsDone[b] = true
		c := base
		c.Backend = b
		out = append(out, job{side: "tfjs", page: "/tfjs.html", cfg: c, label: b})
	}
	for _, d := range o.AgDevices {
		for _, m := range o.AgModes {
			c := base
			c.Device, c.Mode = d, m
			label := d
			if d == "cpu" {
				label = "cpu-wasm"
			}
			out = append(out, job{side: "ag", page: "/ag.html", cfg: c, label: label})
		}
		if d == "webgpu" {
			addTfjs("webgpu")
		} else {
			addTfjs("wasm")
			addTfjs("cpu")
		}
	}
	for _, b := range o.TfjsBackends {
		addTfjs(b)
	}
	return out
}

func run(o Options) error {
	if o.Width < 1 || o.Depth < 1 || o.Batch < 1 || o.Steps < 1 || o.Rounds < 1 {
		return fmt.Errorf("width %d, depth %d, batch %d, steps %d, rounds %d: all must be >= 1", o.Width, o.Depth, o.Batch, o.Steps, o.Rounds)
	}
	if o.JSON != "" {
		// the report's folder first, so that a long run never ends in a
		// write that cannot happen (make bench-browser's out/ is not in a
		// fresh clone)
		if err := os.MkdirAll(filepath.Dir(o.JSON), 0o755); err != nil {
			return fmt.Errorf("-json %s: %w", o.JSON, err)
		}
	}
	for _, m := range o.AgModes {
		if !slices.Contains([]string{"captured", "lazy", "eager"}, m) {
			return fmt.Errorf("-ag-modes: %q: want captured, lazy or eager", m)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	here := filepath.Join(root, "bench", "browser")
	if len(o.TfjsBackends) > 0 {
		if err := ensureTfjs(here, !o.NoInstall, logf); err != nil {
			return err
		}
	}
	exe, err := chromiumPath(o.Chromium)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ag-bench-browser-")
	if err != nil {
		return fmt.Errorf("temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	buildDir := filepath.Join(tmp, "build")
	t0 := time.Now()
	agSrc := root
	if o.AgSrc != "" {
		agSrc = o.AgSrc
	}
	if err := buildWasm(agSrc, buildDir); err != nil {
		return err
	}
	logf("built ag.wasm from %s in %.1f s", agSrc, time.Since(t0).Seconds())
	base, stopServer, err := serve(handler(buildDir, filepath.Join(here, "node_modules")))
	if err != nil {
		return err
	}
	defer stopServer()
	br, err := startBrowser(exe, filepath.Join(tmp, "chrome-profile"), o.Load)
	if err != nil {
		return err
	}
	defer br.Close()
	logf("%s serving %s", br.Version, base)

	rep := &Report{Command: strings.Join(os.Args, " "), AgSrc: agSrc, AgRev: gitRev(agSrc), Steps: o.Steps, Rounds: o.Rounds, Browser: br.Version,
		Go: runtime.Version(), CPUs: runtime.NumCPU(), Started: time.Now().UTC().Format(time.RFC3339),
		Model: map[string]any{"width": o.Width, "depth": o.Depth, "batch": o.Batch, "lr": o.LR, "flops_per_step": 6.0 * float64(o.Batch*o.Width*o.Width*o.Depth)},
		Goals: map[string]float64{"webgpu_ratio": GoalWebGPU, "best_ratio": GoalBest}}
	var echo func(string)
	if o.Verbose {
		echo = func(s string) { fmt.Fprintf(os.Stderr, "    console: %s\n", s) }
	}
	js := jobs(o)
	for round := 1; round <= o.Rounds; round++ {
		order := slices.Clone(js)
		if round%2 == 0 {
			slices.Reverse(order) // even rounds run in reverse, so no side always goes first
		}
		var runs []*Run
		for _, j := range order {
			r := &Run{Round: round, Side: j.side, Backend: j.label, Mode: j.cfg.Mode}
			t1 := time.Now()
			pr, err := br.runPage(base+j.page, j.cfg, o.Load, o.Timeout, echo)
			r.WallS, r.ConsoleErrors = time.Since(t1).Seconds(), pr.ConsoleErrors
			if err == nil {
				err = r.fill(pr.Result)
			}
			if err != nil {
				r.Error = err.Error()
			}
			switch {
			case r.Skip != "":
				logf("round %d %-22s skipped: %s", round, r.Name(), r.Skip)
			case r.Error != "":
				logf("round %d %-22s FAILED after %.0f s: %s", round, r.Name(), r.WallS, r.Error)
			default:
				logf("round %d %-22s median %8.2f ms  min %8.2f ms  (%d steps after %d warm-up, %.0f s)", round, r.Name(), r.MedianMS, r.MinMS, len(r.StepMS), r.Warmup.Steps, r.WallS)
			}
			for _, e := range r.ConsoleErrors {
				logf("round %d %-22s console error: %s", round, r.Name(), e)
			}
			runs = append(runs, r)
		}
		rep.Runs = append(rep.Runs, runs...)
		rep.PerRound = append(rep.PerRound, ratios(round, runs))
	}
	rep.Summary = summarize(rep.PerRound)

	fmt.Printf("ag vs TensorFlow.js %s in %s, MLP %dx%d, batch %d, Adam, MSE; %d timed steps per run, %d rounds\n",
		tfjsVersion(rep.Runs), br.Version, o.Depth, o.Width, o.Batch, o.Steps, o.Rounds)
	printRuns(os.Stdout, rep.Runs)
	printRatios(os.Stdout, rep.PerRound, rep.Summary)
	printBreakdowns(os.Stdout, rep.Runs)
	if o.JSON != "" {
		b, err := json.MarshalIndent(rep, "", " ")
		if err != nil {
			return fmt.Errorf("encoding the report: %w", err)
		}
		if err := os.WriteFile(o.JSON, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.JSON, err)
		}
		logf("wrote %s", o.JSON)
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			return fmt.Errorf("%d run(s) failed; the first: round %d %s: %s", countFailed(rep.Runs), r.Round, r.Name(), firstLine(r.Error))
		}
	}
	return nil
}

// gitRev names the commit of the checkout at dir (read-only git calls; ""
// when dir is no git checkout).
func gitRev(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "+dirty"
	}
	return rev
}

func countFailed(runs []*Run) int {
	n := 0
	for _, r := range runs {
		if r.Error != "" {
			n++
		}
	}
	return n
}

// tfjsVersion is the tfjs version a page reported ("" when none ran).
func tfjsVersion(runs []*Run) string {
	for _, r := range runs {
		if v, ok := r.Info["version"].(string); ok && r.Side == "tfjs" {
			return v
		}
	}
	return ""
}
