package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/profile"
)

// benchResult is one measurement in `ag bench --json` output.
type benchResult struct {
	Device  string  `json:"device"`
	Kind    string  `json:"kind"`           // "matmul", "mlp_step", "gpt_step" or "convnet_step"
	Mode    string  `json:"mode,omitempty"` // mlp_step: eager, lazy, captured
	Up      float64 `json:"uploads_per_step,omitempty"`
	Down    float64 `json:"downloads_per_step,omitempty"`
	Launch  float64 `json:"launches_per_step,omitempty"`
	Ahead   float64 `json:"recorded_ahead_per_step,omitempty"` // runs submitted from commands recorded during the run before (core.Stats.Ahead)
	Allocs  float64 `json:"allocs_per_step,omitempty"`         // device buffers allocated, not taken from the pool (core.Stats.Allocs)
	N       int     `json:"n,omitempty"`
	Width   int     `json:"width,omitempty"`
	Depth   int     `json:"depth,omitempty"`
	Batch   int     `json:"batch,omitempty"`
	Context int     `json:"context,omitempty"`   // gpt_step: tokens per sequence
	Dropout float64 `json:"dropout,omitempty"`   // gpt_step: dropout probability
	Prec    string  `json:"precision,omitempty"` // matmul precision (core.Precision), f32 when empty
	MedianM float64 `json:"median_ms"`
	MinMs   float64 `json:"min_ms"`
	GFLOPs  float64 `json:"gflops"`
	Reps    int     `json:"reps"`
	// TimesMs is every timed repetition in order, so a slow start (a
	// clock ramping up, buffers allocated) shows where a median hides it.
	TimesMs []float64 `json:"times_ms,omitempty"`
	Every   int       `json:"every,omitempty"` // mlp_step: the loss read every this many steps (reps timings of every steps each)
	Later   int       `json:"later,omitempty"` // mlp_step: each read waited for this many reads after it was asked (core.Later)
	Loss    float64   `json:"final_loss,omitempty"`
	// With -profiled: the median step with per-op profiling on, and its
	// ratio to the median step without, both from steps taken in turns.
	ProfMs    float64 `json:"profiled_median_ms,omitempty"`
	ProfRatio float64 `json:"profiled_ratio,omitempty"`
}

type benchReport struct {
	Time    string        `json:"time"`
	GOOS    string        `json:"goos"`
	GOARCH  string        `json:"goarch"`
	CPUs    int           `json:"cpus"`
	Results []benchResult `json:"results"`
}

func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	devs := fs.String("device", "", "comma-separated backends (default: every backend that runs here and auto may pick, plus cpu)")
	sizes := fs.String("matmul", "256,512,1024", "square matmul sizes")
	batches := fs.String("batch", "64,256", "MLP batch sizes")
	width := fs.Int("width", 1024, "MLP width")
	depth := fs.Int("depth", 4, "MLP depth")
	reps := fs.Int("reps", 10, "timed repetitions per measurement")
	modes := fs.String("modes", "lazy,captured", "MLP step execution modes: eager, lazy, captured")
	every := fs.Int("every", 1, "MLP steps: read the loss back every this many steps (a timing is then that many steps, shared); as the page's ag.train(n, cb, {every})")
	later := fs.Int("later", 0, "MLP steps: wait for each loss read this many reads after asking for it (core.Later, as the page's ag.train does), so the device runs the steps queued meanwhile; 0: wait when asked")
	out := fs.String("json", "", "write the results as JSON to this file")
	gpts := fs.String("gpt", "", "character-level transformer steps (models.GPT), comma-separated LAYERSxWIDTH, e.g. 4x256 (heads of 64)")
	gptCtx := fs.Int("gpt-ctx", 128, "transformer context (tokens per sequence)")
	gptBatches := fs.String("gpt-batch", "32", "transformer batch sizes (sequences)")
	gptDrops := fs.String("gpt-dropout", "0.1", "transformer dropout probabilities, comma-separated (0: attention is one fused kernel in training too)")
	convSides := fs.String("convnet", "", "convnet steps (conv-bn-relu-pool x2, two linear layers, 10 classes) on single-channel images of these sides, comma-separated, e.g. 28")
	convBatches := fs.String("convnet-batch", "64", "convnet batch sizes")
	precs := fs.String("precision", "f32", "matmul precisions (core.Device.SetMatMulPrecision), comma-separated: f32, f16, bf16")
	store16 := fs.Bool("store16", false, "with -precision f16 or bf16, also hold the activations saved for the backward in that format (core.Device.SetActivationStorage); results say \"f16+store\"")
	profiled := fs.Bool("profiled", false, "also time each step (MLP, transformer, convnet) with per-op profiling on, in turns with steps without, and print the ratio (the profiler's cost)")
	ops := fs.Int("ops", 0, "with -profiled: after each profiled measurement, print each pass's report and its N costliest ops (where a step's time goes)")
	warmup := fs.Duration("warmup", warmupDefault, "warm-up before each measurement: two runs (compiling), then runs for this long (a GPU idle while shaders compiled clocks down; on an H200 steps ran 3x slower for 0.15 s and 1.8x for 0.2 s more after 1.6 s of compiling)")
	cpuProf := fs.String("cpuprofile", "", "write a Go CPU profile of the whole run (the host's side of every step) to this file, for go tool pprof")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *reps < 1 { // every statistic takes the median of the reps
		return fmt.Errorf("-reps %d: want >= 1", *reps)
	}
	if *every < 1 {
		return fmt.Errorf("-every %d: want >= 1", *every)
	}
	if *later < 0 {
		return fmt.Errorf("-later %d: want >= 0", *later)
	}
	if *warmup < 0 {
		return fmt.Errorf("-warmup %v: want >= 0", *warmup)
	}
	var badSize error // the first bad size list, refused before anything runs
	sizeList := func(flag, s string) []int {
		v, err := sizesOf(flag, s)
		if badSize == nil {
			badSize = err
		}
		return v
	}
	matmulNs, mlpBatches := sizeList("matmul", *sizes), sizeList("batch", *batches)
	gptBatchList, convSideList, convBatchList := sizeList("gpt-batch", *gptBatches), sizeList("convnet", *convSides), sizeList("convnet-batch", *convBatches)
	if badSize != nil {
		return badSize
	}
	// Every other list is checked here too, and a run that would measure
	// nothing, or leave a flag it was given unused, is refused: a bad entry
	// found after minutes of measuring lost them, and an empty table with
	// status 0 read as a pass.
	modeList := splitList(*modes)
	for _, m := range modeList {
		if m := workload.Mode(m); m != workload.Eager && m != workload.Lazy && m != workload.Captured {
			return fmt.Errorf("-modes %q: %q is no mode; want eager, lazy or captured, comma-separated", *modes, m)
		}
	}
	gptList, err := gptSpecs(*gpts)
	if err != nil {
		return err
	}
	dropouts, err := probabilities(*gptDrops)
	if err != nil {
		return err
	}
	steps := len(mlpBatches) > 0 || len(gptList) > 0 || len(convSideList) > 0
	switch {
	case len(matmulNs) == 0 && !steps:
		return fmt.Errorf("nothing to measure: -matmul, -batch, -gpt and -convnet are all empty")
	case steps && len(modeList) == 0:
		return fmt.Errorf("-modes %q: want at least one of eager, lazy, captured for the steps asked for", *modes)
	case len(mlpBatches) > 0 && (*width < 1 || *depth < 1):
		return fmt.Errorf("-width %d, -depth %d: want both >= 1", *width, *depth)
	case len(gptList) > 0 && (len(gptBatchList) == 0 || len(dropouts) == 0):
		return fmt.Errorf("-gpt %q with -gpt-batch %q and -gpt-dropout %q: want a batch size and a dropout probability at least", *gpts, *gptBatches, *gptDrops)
	case len(gptList) > 0 && *gptCtx < 1:
		return fmt.Errorf("-gpt-ctx %d: want >= 1", *gptCtx)
	case slices.ContainsFunc(convSideList, func(side int) bool { return side%4 != 0 }):
		return fmt.Errorf("-convnet %q: want sides that are multiples of 4 (two 2x2 poolings)", *convSides)
	case len(convSideList) > 0 && len(convBatchList) == 0:
		return fmt.Errorf("-convnet %q with -convnet-batch %q: want a batch size at least", *convSides, *convBatches)
	case *profiled && len(mlpBatches) > 0 && (*every > 1 || *later > 0):
		return fmt.Errorf("-profiled with -every %d -later %d: the MLP steps read every N steps or later are not profiled; profile them without -every and -later", *every, *later)
	}
	var precisions []core.Precision
	half := false // a 16-bit precision, which -store16 needs
	for _, p := range splitList(*precs) {
		half = half || p == "f16" || p == "bf16"
		switch p {
		case "f32":
			precisions = append(precisions, core.PrecisionF32)
		case "f16":
			precisions = append(precisions, core.PrecisionF16)
		case "bf16":
			precisions = append(precisions, core.PrecisionBF16)
		default:
			return fmt.Errorf("-precision %q: want f32, f16 or bf16", p)
		}
	}
	if len(precisions) == 0 {
		return fmt.Errorf("-precision %q: want one or more of f32, f16, bf16", *precs)
	}
	if *store16 && !half {
		return fmt.Errorf("-store16 with -precision %q: it stores activations in f16 or bf16, so list one of them", *precs)
	}
	if err := checkOutput("json", *out); err != nil {
		return err
	}
	if *ops < 0 || (*ops > 0 && !*profiled) {
		return fmt.Errorf("-ops %d: want a count >= 0, and -profiled with it (the ops are those of the profiled steps)", *ops)
	}
	warmFor, opsShown = *warmup, *ops
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}

	names := splitList(*devs)
	if len(names) == 0 {
		for _, d := range backend.Drivers() {
			if d.OK && (d.Auto || d.Name == "cpu") {
				names = append(names, d.Name)
			}
		}
	}
	rep := benchReport{Time: time.Now().UTC().Format(time.RFC3339), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU()}
	fmt.Printf("%-12s %-24s %-14s %10s %10s %10s %8s %8s\n", "device", "kind", "shape", "median ms", "min ms", "GFLOP/s", "up/dn", "launch")
	for _, name := range names {
		dev, err := core.Open(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "ag bench: device %s\n", dev) // its hardware (and a GPU's matrix cores)
		for _, prec := range precisions {
			if _, err := dev.SetMatMulPrecision(prec); err != nil {
				return fmt.Errorf("-precision: %w", err)
			}
			suffix, precName := "", prec.String()
			store := core.PrecisionF32
			if *store16 {
				store = prec
			}
			if _, err := dev.SetActivationStorage(store); err != nil {
				return fmt.Errorf("-store16: %w", err)
			}
			if store != core.PrecisionF32 {
				precName += "+store"
			}
			if prec != core.PrecisionF32 {
				suffix = " " + precName
			}
			for _, n := range matmulNs {
				progress("matmul %dx%dx%d%s on %s", n, n, n, suffix, name)
				r, err := benchMatMul(dev, n, *reps)
				if err != nil {
					return fmt.Errorf("%s matmul %d: %w", name, n, err)
				}
				r.Prec = precName
				rep.Results = append(rep.Results, r)
				printResult(r, fmt.Sprintf("%dx%dx%d", n, n, n)+suffix)
			}
			for _, b := range mlpBatches {
				for _, mode := range modeList {
					m, err := workload.New(dev, workload.Config{Width: *width, Depth: *depth, Batch: b, Seed: 1})
					if err != nil {
						return err
					}
					r := benchResult{Kind: "mlp_step", Width: *width, Depth: *depth, Batch: b}
					progress("MLP %dx%d batch %d %s%s on %s", *depth, *width, b, mode, suffix, name)
					if *every > 1 || *later > 0 {
						err = benchEvery(dev, m, workload.Mode(mode), *reps, *every, *later, &r)
					} else {
						err = benchStep(dev, m, workload.Mode(mode), *reps, *profiled, &r)
					}
					if err != nil {
						return fmt.Errorf("%s MLP step batch %d %s: %w", name, b, mode, err)
					}
					r.Prec = precName
					rep.Results = append(rep.Results, r)
					printResult(r, fmt.Sprintf("%dx%d b%d", *depth, *width, b)+suffix)
				}
			}
			for _, g := range gptList {
				spec, layers, dim := g.spec, g.layers, g.dim
				for _, drop := range dropouts {
					for _, b := range gptBatchList {
						for _, mode := range modeList {
							g, err := workload.NewGPT(dev, workload.GPTConfig{Layers: layers, Dim: dim, Heads: max(1, dim/64), Context: *gptCtx, Batch: b, Dropout: float32(drop), Seed: 1})
							if err != nil {
								return err
							}
							r := benchResult{Kind: "gpt_step", Width: dim, Depth: layers, Batch: b, Context: *gptCtx, Dropout: drop}
							progress("GPT %s batch %d dropout %g %s%s on %s", spec, b, drop, mode, suffix, name)
							if err := benchStep(dev, g, workload.Mode(mode), *reps, *profiled, &r); err != nil {
								return fmt.Errorf("%s GPT step %s batch %d %s: %w", name, spec, b, mode, err)
							}
							r.Prec = precName
							rep.Results = append(rep.Results, r)
							printResult(r, fmt.Sprintf("gpt %dx%d b%d p%g", layers, dim, b, drop)+suffix)
						}
					}
				}
			}
			for _, side := range convSideList {
				for _, b := range convBatchList {
					for _, mode := range modeList {
						c, err := workload.NewConvNet(dev, workload.ConvNetConfig{Side: side, Batch: b, Seed: 1})
						if err != nil {
							return err
						}
						r := benchResult{Kind: "convnet_step", Width: side, Batch: b}
						progress("convnet %dx%d batch %d %s%s on %s", side, side, b, mode, suffix, name)
						if err := benchStep(dev, c, workload.Mode(mode), *reps, *profiled, &r); err != nil {
							return fmt.Errorf("%s convnet step %d batch %d %s: %w", name, side, b, mode, err)
						}
						r.Prec = precName
						rep.Results = append(rep.Results, r)
						printResult(r, fmt.Sprintf("conv %dx%d b%d", side, side, b)+suffix)
					}
				}
			}
		}
		if err := dev.Close(); err != nil {
			return err
		}
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			f.Close()
			return fmt.Errorf("-json: writing %s: %w", *out, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("-json: writing %s: %w", *out, err)
		}
		fmt.Println("wrote", *out)
	}
	return nil
}

// progress says on stderr what is being measured (a first step may
// compile for seconds), keeping stdout to the table.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ag bench: measuring "+format+"\n", args...)
}

func printResult(r benchResult, shape string) {
	kind := r.Kind
	if r.Mode != "" {
		kind += " " + r.Mode
	}
	if r.Later > 0 {
		kind += fmt.Sprintf(" later%d", r.Later)
	}
	xfer := ""
	if r.Kind != "matmul" {
		xfer = fmt.Sprintf("%.0f/%.0f", r.Up, r.Down)
	}
	fmt.Printf("%-12s %-24s %-14s %10.3f %10.3f %10.1f %8s %8.1f\n", r.Device, kind, shape, r.MedianM, r.MinMs, r.GFLOPs, xfer, r.Launch)
	if r.ProfMs > 0 {
		fmt.Printf("%-12s %-24s %-14s %10.3f  (profiled: %.3fx the steps without, taken in turns)\n", r.Device, "  profiled", shape, r.ProfMs, r.ProfRatio)
	}
}

func benchMatMul(dev *core.Device, n, reps int) (benchResult, error) {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	v := make([]float32, n*n)
	for i := range v {
		v[i] = float32(rng.Float64() - 0.5)
	}
	a, b := dev.Tensor(v, n, n), dev.Tensor(v, n, n)
	product := func() error {
		c := core.MatMul(a, b)
		defer c.Release()
		return dev.Sync(c)
	}
	if err := warm(product); err != nil { // compiles and uploads too
		return benchResult{}, err
	}
	times := make([]time.Duration, reps)
	for i := range times {
		t0 := time.Now()
		if err := product(); err != nil {
			return benchResult{}, err
		}
		times[i] = time.Since(t0)
	}
	med, mn := stats(times)
	return benchResult{Device: dev.Name(), Kind: "matmul", N: n, MedianM: med, MinMs: mn,
		GFLOPs: 2 * float64(n) * float64(n) * float64(n) / med / 1e6, Reps: reps, TimesMs: msList(times)}, nil
}

// stepper is a training workload that ag bench times.
type stepper interface {
	Timed(mode workload.Mode, n int) ([]time.Duration, float32, error)
	FLOPs() float64
}

// warmupDefault is -warmup's default. An H200 left idle for the 1.6 s
// its driver took to compile a new step's shaders clocked down to 555 of
// 1980 MHz; the 4x1024 batch-4096 step then took 10.6 ms for its first 15
// runs, 5.9 ms for the next 34 and 3.2 ms from there on (0.36 s of work).
// With two warm-up steps, 23 of 30 timed steps were slow
// (bench/results/h200-2026-12-04-s13a-*, -s13c-*).
const warmupDefault = time.Second

// warmFor is how long warm runs f after its first two runs (-warmup).
var warmFor = warmupDefault

// warm runs f twice (compiling, recording, uploading) and then for warmFor
// more, so that a measurement starts on a device at its working clock: the
// clock counts from the end of the compiling runs, during which the GPU
// idles.
func warm(f func() error) error {
	for range 2 {
		if err := f(); err != nil {
			return err
		}
	}
	for t0 := time.Now(); time.Since(t0) < warmFor; {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// benchStep times reps steps of m in mode after warm-up steps (warm) that
// compile and record, filling r's timings, transfers and launches.
func benchStep(dev *core.Device, m stepper, mode workload.Mode, reps int, profiled bool, r *benchResult) error {
	if err := warm(func() error { _, _, err := m.Timed(mode, 1); return err }); err != nil {
		return err
	}
	var times []time.Duration
	var loss float32
	st0, st1, launches, err := counted(dev, func() (err error) {
		times, loss, err = m.Timed(mode, reps)
		return err
	})
	if err != nil {
		return err
	}
	med, mn := stats(times)
	n := float64(reps)
	r.Device, r.Mode, r.MedianM, r.MinMs, r.GFLOPs, r.Reps, r.Loss = dev.Name(), string(mode), med, mn, m.FLOPs()/med/1e6, reps, float64(loss)
	r.perStep(times, st0, st1, launches, n)
	if profiled {
		plain, prof, err := profiledSteps(m, mode, reps)
		if err != nil {
			return err
		}
		r.ProfMs, r.ProfRatio = prof, prof/plain
		if opsShown > 0 {
			printOps(r)
		}
	}
	return nil
}

// opsShown is how many of each pass's costliest ops printOps prints (-ops).
var opsShown int

// printOps prints the per-pass reports and costliest ops of the steps
// profiledSteps just ran (its profile.Reset scopes them to r's
// measurement), under a line naming the measurement.
func printOps(r *benchResult) {
	fmt.Printf("\n-- ops of %s %s batch %d on %s (profiled steps, %.3f ms median):\n", r.Kind, r.Mode, r.Batch, r.Device, r.ProfMs)
	for _, p := range []profile.Pass{profile.PassForward, profile.PassBackward, profile.PassUpdate} {
		if rep := profile.ReportPass(os.Stdout, p); !rep.Empty() {
			rep.WriteOps(os.Stdout, opsShown)
		}
	}
	fmt.Println()
}

// benchEvery times reps groups of every MLP steps in mode, the loss read at
// the last of each - waited for at once, or later reads after (TimedLater)
// - after warm-up groups (see warm), filling r's per-step timings and
// transfers.
func benchEvery(dev *core.Device, m *workload.MLP, mode workload.Mode, reps, every, later int, r *benchResult) error {
	timed := func(n int) ([]time.Duration, float32, error) {
		if later > 0 {
			return m.TimedLater(mode, n, every, later)
		}
		return m.TimedEvery(mode, n, every)
	}
	if err := warm(func() error { _, _, err := timed(max(1, later)); return err }); err != nil {
		return err
	}
	var times []time.Duration
	var loss float32
	st0, st1, launches, err := counted(dev, func() (err error) {
		times, loss, err = timed(reps)
		return err
	})
	if err != nil {
		return err
	}
	med, mn := stats(times)
	n := float64(reps * every)
	if later > 0 { // the groups filling and draining the pipeline ran too
		n = float64(workload.LaterGroups(reps, later) * every)
	}
	r.Device, r.Mode, r.MedianM, r.MinMs, r.GFLOPs, r.Reps, r.Every, r.Later, r.Loss = dev.Name(), string(mode), med, mn, m.FLOPs()/med/1e6, reps, every, later, float64(loss)
	r.perStep(times, st0, st1, launches, n)
	return nil
}

// counted runs f counting the device's transfers (its Stats before and
// after) and the launches the profiler counts.
func counted(dev *core.Device, f func() error) (st0, st1 core.Stats, launches int, err error) {
	profile.Count(true)
	profile.ResetLaunches()
	st0 = dev.Stats()
	err = f()
	profile.Count(false)
	st1 = dev.Stats()
	for _, n := range profile.Launches() {
		launches += n
	}
	return st0, st1, launches, err
}

// profiledSteps times steps with per-op profiling off and on in turns, so
// that drift of the machine falls on both alike, and returns the medians.
// Each profiled step records its per-op times as ag demo -profile does;
// two profiled steps first let the backend make its timed programs.
func profiledSteps(m stepper, mode workload.Mode, reps int) (plain, prof float64, err error) {
	set := func(on bool) {
		profile.Forward(on)
		profile.Backward(on)
		profile.Switch(profile.PassUpdate, on)
	}
	defer set(false)
	profile.Reset()
	set(true)
	if _, _, err := m.Timed(mode, 2); err != nil {
		return 0, 0, err
	}
	var off, on []time.Duration
	for i := 0; i < 2*reps; i++ {
		set(i%2 == 1)
		ts, _, err := m.Timed(mode, 1)
		if err != nil {
			return 0, 0, err
		}
		if i%2 == 1 {
			on = append(on, ts[0])
		} else {
			off = append(off, ts[0])
		}
	}
	plain, _ = stats(off)
	prof, _ = stats(on)
	return plain, prof, nil
}

// perStep fills r's timings and its counts per step from the device's
// stats before and after n steps and the launches counted meanwhile.
func (r *benchResult) perStep(times []time.Duration, st0, st1 core.Stats, launches int, n float64) {
	r.TimesMs = msList(times)
	r.Launch = float64(launches) / n
	r.Up, r.Down = float64(st1.Uploads-st0.Uploads)/n, float64(st1.Downloads-st0.Downloads)/n
	r.Ahead = float64(st1.Ahead-st0.Ahead) / n
	r.Allocs = float64(st1.Allocs-st0.Allocs) / n
}

// msList is ts in milliseconds (ms).
func msList(ts []time.Duration) []float64 {
	out := make([]float64, len(ts))
	for i, t := range ts {
		out[i] = ms(t)
	}
	return out
}

func stats(ts []time.Duration) (median, min float64) {
	s := slices.Clone(ts)
	slices.Sort(s)
	return ms(s[len(s)/2]), ms(s[0])
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// probabilities parses a comma-separated list of dropout probabilities.
func probabilities(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || !(p >= 0 && p < 1) {
			return nil, fmt.Errorf("-gpt-dropout %q: want probabilities in [0, 1), comma-separated", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// gptSize is one -gpt entry: LAYERSxWIDTH.
type gptSize struct {
	spec        string
	layers, dim int
}

// gptSpecs parses -gpt's comma-separated LAYERSxWIDTH entries, each whole
// (a trailing word such as "4x256x" was read as 4x256) and with a width
// that its heads of 64 divide.
func gptSpecs(s string) ([]gptSize, error) {
	var out []gptSize
	for _, spec := range splitList(s) {
		l, d, ok := strings.Cut(spec, "x")
		layers, err1 := strconv.Atoi(l)
		dim, err2 := strconv.Atoi(d)
		if !ok || err1 != nil || err2 != nil || layers < 1 || dim < 1 {
			return nil, fmt.Errorf("-gpt %q: %q is not LAYERSxWIDTH, e.g. 4x256", s, spec)
		}
		if heads := max(1, dim/64); dim%heads != 0 {
			return nil, fmt.Errorf("-gpt %q: width %d is not a multiple of its %d heads (one per 64)", s, dim, heads)
		}
		out = append(out, gptSize{spec, layers, dim})
	}
	return out, nil
}

// sizesOf parses flag's comma-separated list of positive sizes; a bad entry
// refuses the whole run, naming it, before anything is measured.
func sizesOf(flag, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s %q: %q is no size; want positive whole numbers, comma-separated", flag, s, f)
		}
		out = append(out, n)
	}
	return out, nil
}
