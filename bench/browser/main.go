// Command browser benchmarks ag's training step in the browser against
// TensorFlow.js in the same headless Chromium: the MLP of
// bench/workload (depth Linear layers width x width, ReLU between, Adam,
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
// out) and then times -steps steps, reading the loss back every -every
// steps (1: each step, the default; both sides alike). It prints
// the runs, the two ratios per round - (1) ag WebGPU / tfjs-webgpu,
// goal <= 0.4; (2) ag's best / tfjs's best, goal <= 0.5 - and ag's profile
// of each configuration, and writes everything as JSON with -json.
//
// Before the runs it opens a probe page that reports the WebGPU adapter a
// page gets (info, fallback or not, features), printed in the header and
// written to the JSON with each WebGPU run's own; -probe stops there. -gpu
// starts Chromium with the flags for WebGPU on a real GPU (gpuFlags) and
// refuses a software adapter. -wasm and -node-modules serve prebuilt files
// (pack.sh makes a folder of them and of this command) on a machine
// without Go or npm.
//
// The machines are noisy: compare ratios of one round, not numbers of
// different runs.
//
// -gpt2 SIZE (gpt2.go) runs GPT-2 instead: examples/gpt2 trained on -text
// in the page and natively with the same settings, their step times side
// by side (issue 41).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	Every               int  // read the loss back every this many steps
	Stream              bool // ag's timed steps in one ag.train call (reads waited for groups later)
	WarmupSteps         int
	WarmupMS            float64
	ProfileSteps        int
	TfjsWasmThreads     int      // 0: tfjs's default
	AgDevices           []string // "webgpu", "cpu"
	AgModes             []string // "captured", "lazy", "eager"
	TfjsBackends        []string // "webgpu", "wasm", "cpu", "webgl"
	JSON                string
	AgSrc               string // the ag checkout ag.wasm is built from
	WasmDir             string // a prebuilt web dist instead (web/build.sh DIR, pack.sh)
	NodeModules         string // where the tfjs files are ("": bench/browser/node_modules)
	Chromium            string
	ChromeArgs          string // more Chromium switches (parseChromeArgs)
	ChromeLog           string // Chromium's output goes here ("": a temporary file)
	GPU                 bool   // real-GPU flags (gpuFlags); the adapter must be a GPU
	Probe               bool   // only report the WebGPU adapter
	Timeout, Load       time.Duration
	// the -gpt2 mode (gpt2.go)
	GPT2               string // the size; "" runs the MLP benchmark
	Ctx, BPE           int
	Vocab              int    // embedding rows
	Text               string // the training text
	Native             string // the native examples/gpt2 binary
	NativeDevice       string
	PageDevice         string
	NativeSteps        int
	NativeWarmup       int
	NoInstall, Verbose bool
}

// Report is the JSON the command writes.
type Report struct {
	Command string `json:"command"`
	AgSrc   string `json:"ag_src"` // the checkout ag.wasm was built from, or the -wasm folder
	AgRev   string `json:"ag_rev"` // its git commit, "+dirty" with uncommitted changes
	GPUMode bool   `json:"gpu_mode"`
	// Adapter is the WebGPU adapter the probe page got before the runs;
	// each WebGPU run's own is in its info.adapter.
	Adapter  *Adapter `json:"webgpu_adapter"`
	Probe    *Probe   `json:"probe"` // the browser's GPU, its command line and the flags added
	Model    any      `json:"model"`
	Steps    int      `json:"steps"`
	Every    int      `json:"every"`
	Stream   bool     `json:"stream"`
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
	Every        int     `json:"every"`
	Stream       bool    `json:"stream,omitempty"` // ag
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
	flag.IntVar(&o.Every, "every", 1, "read the loss back every this many steps (both sides; a read waits for the GPU, steps between are only queued)")
	flag.BoolVar(&o.Stream, "stream", false, "time ag's steps as one ag.train call of -steps steps, as a page trains: its reads are waited for a few groups after they are asked (app.LaterStepper), so the GPU is not idle while a loss travels back; the per-step times are the call's step_ms; tfjs the same way, each group's loss.data() awaited groups after it is asked")
	flag.IntVar(&o.Rounds, "rounds", 3, "rounds; each runs every configuration once, ag and tfjs alternating")
	flag.IntVar(&o.WarmupSteps, "warmup-steps", 3, "untimed steps before timing, at least")
	flag.Float64Var(&o.WarmupMS, "warmup-ms", 3000, "untimed milliseconds before timing, at least (WebGPU shader compiles take ~3 s)")
	flag.IntVar(&o.ProfileSteps, "profile-steps", 5, "steps of ag's profile after its timing, in the timed mode (0: none)")
	flag.StringVar(&agDevices, "ag-devices", "webgpu,cpu", "ag devices (cpu is ag's CPU backend compiled to wasm)")
	flag.StringVar(&agModes, "ag-modes", "captured,lazy", "ag execution modes: captured, lazy, eager")
	flag.StringVar(&tfjsBackends, "tfjs-backends", "webgpu,wasm,cpu", "tfjs backends: webgpu, wasm, cpu, webgl")
	flag.IntVar(&o.TfjsWasmThreads, "tfjs-wasm-threads", 0, "threads of tfjs's wasm backend (0: its default, which is 1 on 2 cores)")
	flag.StringVar(&o.JSON, "json", "", "write the report as JSON to this file")
	flag.StringVar(&o.AgSrc, "ag-src", "", "build ag.wasm from this ag checkout (default: the one this runs in); the pages and peers stay the same")
	flag.StringVar(&o.WasmDir, "wasm", "", "serve this prebuilt web dist (ag.wasm, wasm_exec.js: web/build.sh DIR or pack.sh's webdist) instead of building ag.wasm")
	flag.StringVar(&o.NodeModules, "node-modules", "", "serve tfjs from this node_modules folder (default: bench/browser/node_modules, installed by npm ci when missing)")
	flag.StringVar(&o.Chromium, "chromium", "", "Chromium binary or a wrapper script that execs it (default: $AG_CHROMIUM, then chromium on PATH); it inherits the environment")
	flag.BoolVar(&o.GPU, "gpu", false, "real-GPU mode: Chromium flags for WebGPU on the GPU through Vulkan, headless, no display; fails when the adapter is a software one")
	flag.StringVar(&o.ChromeArgs, "chrome-args", "", "more Chromium switches, space-separated: --name or --name=value; --name=false drops one of -gpu's; enable/disable-features add to the lists")
	flag.StringVar(&o.ChromeLog, "chrome-log", "", "write Chromium's stdout and stderr to this file (default: a temporary one, whose GPU lines are shown when the probe fails)")
	flag.BoolVar(&o.Probe, "probe", false, "only start the browser, print the WebGPU adapter it gives a page (info, features, limits, a compute check) and chrome://gpu's status; exit 1 without an adapter (-gpu: without a GPU one)")
	flag.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "limit for one run (warm-up, timing, profile)")
	flag.DurationVar(&o.Load, "load-timeout", time.Minute, "limit for a page to load")
	flag.BoolVar(&o.NoInstall, "no-install", false, "fail instead of running npm ci when node_modules lacks a file")
	flag.BoolVar(&o.Verbose, "v", false, "echo the pages' console")
	flag.StringVar(&o.GPT2, "gpt2", "", "instead of the MLP against tfjs: GPT-2 of this size (examples/gpt2: tiny, mini, 124M...) trained on -text in the page on WebGPU (-batch, or the largest batch the page fits; -steps timed after the warm-up), then natively with the same settings (-native); prints both step times and their ratio, and the native loss against the text's unigram entropy")
	flag.IntVar(&o.Ctx, "ctx", 1024, "-gpt2: tokens per training sequence")
	flag.IntVar(&o.Vocab, "vocab", 50257, "-gpt2: embedding rows (GPT-2's 50257 keeps 124M's parameter count)")
	flag.IntVar(&o.BPE, "bpe", 8192, "-gpt2: the most tokens of the BPE learned from the text")
	flag.StringVar(&o.Text, "text", "", "-gpt2: the training text (a file)")
	flag.StringVar(&o.Native, "native", "", "-gpt2: the native examples/gpt2 binary (default: built from the checkout beside gpt2.wasm)")
	flag.StringVar(&o.NativeDevice, "native-device", "webgpu", "-gpt2: the native run's device")
	flag.StringVar(&o.PageDevice, "page-device", "webgpu", "-gpt2: the page's device: webgpu, or cpu (the pure-Go backend in wasm)")
	flag.IntVar(&o.NativeSteps, "native-steps", 300, "-gpt2: the native run's steps (the loss against the unigram entropy)")
	flag.IntVar(&o.NativeWarmup, "native-warmup", 5, "-gpt2: the native steps before the -steps timed against the page's")
	flag.Parse()
	o.AgDevices, o.AgModes, o.TfjsBackends = list(agDevices), list(agModes), list(tfjsBackends)
	run := run
	if o.GPT2 != "" {
		run = runGPT2
	}
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
	base := pageConfig{Width: o.Width, Depth: o.Depth, Batch: o.Batch, LR: o.LR, Steps: o.Steps, Every: o.Every, Stream: o.Stream, ProfileSteps: o.ProfileSteps, WasmThreads: o.TfjsWasmThreads}
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
	if o.Width < 1 || o.Depth < 1 || o.Batch < 1 || o.Steps < 1 || o.Rounds < 1 || o.Every < 1 {
		return fmt.Errorf("width %d, depth %d, batch %d, steps %d, rounds %d, every %d: all must be >= 1", o.Width, o.Depth, o.Batch, o.Steps, o.Rounds, o.Every)
	}
	// ag.profile's own bound; 0 runs none (found before a round's runs
	// failed one by one on it)
	if o.ProfileSteps < 0 || o.ProfileSteps > 1000 {
		return fmt.Errorf("-profile-steps %d: want 0 (no profile) to 1000", o.ProfileSteps)
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
	bcfg, flags, exe, tmp, err := chromeSetup(o.ChromeArgs, o.Chromium, o.GPU, "ag-bench-browser-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logPath, logName := o.ChromeLog, o.ChromeLog
	if logPath == "" {
		logPath = filepath.Join(tmp, "chrome.log")
		logName = "temporary: -chrome-log FILE keeps it"
	}
	chromeLog, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("-chrome-log: %w", err)
	}
	defer chromeLog.Close()
	bcfg.Log = chromeLog

	// What the pages need: the wasm build and tfjs (the probe needs
	// neither). The checkout is needed only to build or install them.
	buildDir, nodeModules, installDir := filepath.Join(tmp, "build"), o.NodeModules, ""
	agSrc, agRev := "", ""
	if !o.Probe {
		root := ""
		if o.WasmDir == "" || (o.NodeModules == "" && len(o.TfjsBackends) > 0) {
			if root, err = repoRoot(); err != nil {
				return fmt.Errorf("%w (or pass -wasm and -node-modules)", err)
			}
		}
		if nodeModules == "" && root != "" {
			installDir = filepath.Join(root, "bench", "browser")
			nodeModules = filepath.Join(installDir, "node_modules")
		}
		if len(o.TfjsBackends) > 0 {
			if err := ensureTfjs(nodeModules, installDir, !o.NoInstall, logf); err != nil {
				return err
			}
		}
		if o.WasmDir != "" {
			if buildDir, err = filepath.Abs(o.WasmDir); err != nil {
				return fmt.Errorf("-wasm: %w", err)
			}
			if err := checkWasmDir(buildDir, "-wasm: found"); err != nil {
				return err
			}
			agSrc = buildDir
			if b, err := os.ReadFile(filepath.Join(buildDir, agRevFile)); err == nil {
				agRev = strings.TrimSpace(string(b))
			}
			logf("serving the prebuilt ag.wasm of %s (ag %s)", buildDir, orDash(agRev))
		} else {
			t0 := time.Now()
			agSrc = root
			if o.AgSrc != "" {
				agSrc = o.AgSrc
			}
			if err := buildWasm(agSrc, buildDir); err != nil {
				return err
			}
			agRev = gitRev(agSrc)
			logf("built ag.wasm from %s in %.1f s", agSrc, time.Since(t0).Seconds())
		}
	}
	if nodeModules == "" {
		nodeModules = filepath.Join(tmp, "no-node-modules") // served empty
	}
	base, stopServer, err := serve(handler(buildDir, nodeModules, ""))
	if err != nil {
		return err
	}
	defer stopServer()
	logf("starting %s; flags added to browsertest/chrome's: %s", exe, orDash(strings.Join(flags, " ")))
	br, err := startBrowser(exe, filepath.Join(tmp, "chrome-profile"), o.Load, bcfg)
	if err != nil {
		return fmt.Errorf("%w\nchromium's output (%s):\n%s", err, logName, logTail(logPath, 30, false))
	}
	defer br.Close()
	logf("%s serving %s", br.Version, base)

	var echo func(string)
	if o.Verbose {
		echo = func(s string) { fmt.Fprintf(os.Stderr, "    console: %s\n", s) }
	}
	pb, perr := probe(br, base, flags, o.Load, o.Timeout, echo)
	if perr == nil {
		perr = pb.check(o.GPU)
	}
	if o.Probe {
		pb.print(os.Stdout)
		if o.JSON != "" {
			if err := writeJSON(o.JSON, pb); err != nil {
				return err
			}
		}
		if perr != nil {
			return fmt.Errorf("%w\nchromium's GPU lines (%s):\n%s", perr, logName, logTail(logPath, 40, true))
		}
		return nil
	}
	if perr != nil {
		if o.GPU {
			pb.print(os.Stdout)
			return fmt.Errorf("%w\nchromium's GPU lines (%s):\n%s", perr, logName, logTail(logPath, 40, true))
		}
		logf("probe: %v (WebGPU runs will be skipped or fail)", perr)
	}
	logf("WebGPU adapter: %s", pb.Adapter().Summary())

	rep := &Report{Command: strings.Join(os.Args, " "), AgSrc: agSrc, AgRev: agRev, GPUMode: o.GPU, Adapter: pb.Adapter(), Probe: pb,
		Steps: o.Steps, Every: o.Every, Stream: o.Stream, Rounds: o.Rounds, Browser: br.Version,
		Go: runtime.Version(), CPUs: runtime.NumCPU(), Started: time.Now().UTC().Format(time.RFC3339),
		Model: map[string]any{"width": o.Width, "depth": o.Depth, "batch": o.Batch, "lr": o.LR, "flops_per_step": 6.0 * float64(o.Batch*o.Width*o.Width*o.Depth)},
		Goals: map[string]float64{"webgpu_ratio": GoalWebGPU, "best_ratio": GoalBest}}
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
				if mean, ok := r.Info["mean_ms"].(float64); ok { // -stream
					logf("round %d %-22s median %8.2f ms  min %8.2f ms  mean %8.2f ms  (one stream of %d steps, reads waited for later, read every %d, after %d warm-up calls, %.0f s)", round, r.Name(), r.MedianMS, r.MinMS, mean, len(r.StepMS), o.Every, r.Warmup.Steps, r.WallS)
					break
				}
				logf("round %d %-22s median %8.2f ms  min %8.2f ms  (%d timed calls of %d step(s) after %d warm-up calls, %.0f s)", round, r.Name(), r.MedianMS, r.MinMS, len(r.StepMS), o.Every, r.Warmup.Steps, r.WallS)
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

	fmt.Printf("ag vs TensorFlow.js %s in %s, MLP %dx%d, batch %d, Adam, MSE; %d timed steps per run, the loss read every %d, %d rounds\n",
		tfjsVersion(rep.Runs), br.Version, o.Depth, o.Width, o.Batch, o.Steps, o.Every, o.Rounds)
	fmt.Printf("ag %s; WebGPU adapter: %s\n", orDash(agRev), rep.Adapter.Summary())
	fmt.Printf("chromium flags added: %s\n", orDash(strings.Join(flags, " ")))
	printRuns(os.Stdout, rep.Runs)
	printAdapters(os.Stdout, rep.Runs, rep.Adapter)
	printRatios(os.Stdout, rep.PerRound, rep.Summary)
	printBreakdowns(os.Stdout, rep.Runs)
	if o.JSON != "" {
		if err := writeJSON(o.JSON, rep); err != nil {
			return err
		}
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

// writeJSON writes v as indented JSON to path, making its folder first: a
// fresh clone has no bench/browser/out (ignored), and a run of minutes must
// not end in a missing-folder error.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	logf("wrote %s", path)
	return nil
}

// logTail is the last n lines of Chromium's output at path; with gpuOnly
// only those about the GPU (Vulkan, Dawn, ANGLE, GL, WebGPU).
func logTail(path string, n int, gpuOnly bool) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	defer f.Close()
	// The last MiB: a GPU process that fails in a loop writes hundreds of
	// MiB.
	const last = 1 << 20
	if st, err := f.Stat(); err == nil && st.Size() > last {
		if _, err := f.Seek(st.Size()-last, io.SeekStart); err != nil {
			return fmt.Sprintf("(unreadable: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		low := strings.ToLower(l)
		if !gpuOnly || strings.Contains(low, "vulkan") || strings.Contains(low, "gpu") || strings.Contains(low, "dawn") ||
			strings.Contains(low, "angle") || strings.Contains(low, "gl") || strings.Contains(low, "vk") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 || (len(lines) == 1 && lines[0] == "") {
		return "(nothing)"
	}
	return strings.Join(lines, "\n")
}

// chromeSetup is what a run needs before it starts Chromium: the browser's
// configuration from -chrome-args and -gpu, the flags that adds (as the
// report lists them), the executable, and a temporary folder (named with
// prefix) that the caller removes.
func chromeSetup(chromeArgs, chromium string, gpu bool, prefix string) (bcfg browserConfig, flags []string, exe, tmp string, err error) {
	extra, err := parseChromeArgs(chromeArgs)
	if err != nil {
		return bcfg, nil, "", "", err
	}
	bcfg = browserConfig{GPU: gpu, Extra: extra}
	flags = []string{}
	for _, f := range effectiveFlags(bcfg) {
		flags = append(flags, f.String())
	}
	if exe, err = chromiumPath(chromium); err != nil {
		return bcfg, nil, "", "", err
	}
	if tmp, err = os.MkdirTemp("", prefix); err != nil {
		return bcfg, nil, "", "", fmt.Errorf("temporary folder: %w", err)
	}
	return bcfg, flags, exe, tmp, nil
}
