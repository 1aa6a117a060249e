package main

// The -gpt2 mode (issue 41): GPT-2 (examples/gpt2) trained in the page on
// WebGPU and then natively with the same settings, one step time next to
// the other, and the native run's loss against the unigram entropy of the
// text.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GoalGPT2 is issue 41's bound on the page's GPT-2 step over the native
// step on the same machine.
const GoalGPT2 = 1.3

// gpt2Config is runBench's argument in gpt2.js.
type gpt2Config struct {
	Size     string `json:"size"`
	Ctx      int    `json:"ctx"`
	Batch    int    `json:"batch"`
	Vocab    int    `json:"vocab"`
	BPE      int    `json:"bpe"`
	Steps    int    `json:"steps"`
	Device   string `json:"device"`
	TextName string `json:"textName"`
	Warmup   struct {
		MinSteps int     `json:"minSteps"`
		MinMS    float64 `json:"minMS"`
		MaxSteps int     `json:"maxSteps"`
	} `json:"warmup"`
}

// GPT2Page is what gpt2.js's runBench resolves with.
type GPT2Page struct {
	Device   string    `json:"device"`
	Params   int       `json:"params"`
	Batch    int       `json:"batch"`   // the batch built: cfg.batch, or the largest that fits
	Refused  string    `json:"refused"` // ag.build's refusal of the batch asked, when it took a smaller one
	Built    string    `json:"built"`
	SetupMS  float64   `json:"setup_ms"`
	Adapter  *Adapter  `json:"adapter,omitempty"`
	MedianMS float64   `json:"median_ms"`
	MinMS    float64   `json:"min_ms"`
	StepMS   []float64 `json:"step_ms"`
	Losses   []float64 `json:"losses"`
	Warmup   struct {
		Steps int     `json:"steps"`
		MS    float64 `json:"ms"`
	} `json:"warmup"`
	Metrics map[string]float64 `json:"metrics"`
	Skip    string             `json:"skip,omitempty"`
	Error   string             `json:"error,omitempty"`
}

// NativeStep is one "step" line of the native run (app.RunArgs with
// -eval-every 1): the step, its loss, its time and the metrics after it.
type NativeStep struct {
	Step    int                `json:"step"`
	Loss    float64            `json:"loss"`
	MS      float64            `json:"ms"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// GPT2Native is the native run of examples/gpt2 and what its output says.
type GPT2Native struct {
	Command string       `json:"command"`
	Steps   []NativeStep `json:"steps"`
	// TimedMS are the step times of the steps timed against the page's:
	// as many, after Warmup steps.
	Warmup   int       `json:"warmup"`
	TimedMS  []float64 `json:"timed_ms"`
	MedianMS float64   `json:"median_ms"`
	// RestMedianMS is the median of every step after the warm-up.
	RestMedianMS float64 `json:"rest_median_ms"`
	Unigram      float64 `json:"unigram_entropy"`
	// Crossed is the first step whose smoothed loss is below Unigram (0:
	// none), CrossedS the training time until then.
	Crossed  int     `json:"crossed"`
	CrossedS float64 `json:"crossed_s"`
	Output   string  `json:"output"`
	Error    string  `json:"error,omitempty"`
}

// GPT2Report is the JSON of the -gpt2 mode.
type GPT2Report struct {
	Command   string      `json:"command"`
	AgRev     string      `json:"ag_rev"`
	GPUMode   bool        `json:"gpu_mode"`
	Adapter   *Adapter    `json:"webgpu_adapter"`
	Probe     *Probe      `json:"probe"`
	Browser   string      `json:"browser"`
	Go        string      `json:"go"`
	Started   string      `json:"started"`
	Config    gpt2Config  `json:"config"`
	TextBytes int         `json:"text_bytes"`
	Page      *GPT2Page   `json:"page"`
	PageWallS float64     `json:"page_wall_s"`
	PageError string      `json:"page_error,omitempty"`
	Native    *GPT2Native `json:"native"`
	// Ratio is the page's median step over the native one (0: either is
	// missing); the goal is GoalGPT2.
	Ratio float64 `json:"ratio"`
}

var (
	stepLine    = regexp.MustCompile(`^step +(\d+)  loss (\S+)  (\S+) ms/step(?:  (.*))?$`)
	unigramLine = regexp.MustCompile(`^unigram entropy of the training tokens: (\S+) nats/token`)
	metricsLine = regexp.MustCompile(`^metrics: (.*)$`)
	metricPair  = regexp.MustCompile(`^(.*) (\S+)$`)
)

// parseNative reads the native run's output (app.RunArgs's lines; the
// metrics of a line are "name value" pairs joined by ", ").
func parseNative(out string, warmup, timed int) (*GPT2Native, error) {
	n := &GPT2Native{Warmup: warmup}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := unigramLine.FindStringSubmatch(l); m != nil {
			n.Unigram, _ = strconv.ParseFloat(m[1], 64)
			continue
		}
		// the last step's metrics come after it, on their own line
		if m := metricsLine.FindStringSubmatch(l); m != nil && len(n.Steps) > 0 && n.Steps[len(n.Steps)-1].Metrics == nil {
			n.Steps[len(n.Steps)-1].Metrics = parseMetrics(m[1])
			continue
		}
		m := stepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := NativeStep{}
		var err error
		if s.Step, err = strconv.Atoi(m[1]); err == nil {
			if s.Loss, err = strconv.ParseFloat(m[2], 64); err == nil {
				s.MS, err = strconv.ParseFloat(m[3], 64)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("parseNative: line %q: %w", l, err)
		}
		s.Metrics = parseMetrics(m[4])
		n.Steps = append(n.Steps, s)
	}
	if len(n.Steps) <= warmup {
		return n, fmt.Errorf("parseNative: %d step lines, want more than the %d of warm-up (run with -eval-every 1)", len(n.Steps), warmup)
	}
	var rest []float64
	for _, s := range n.Steps[warmup:] {
		rest = append(rest, s.MS)
	}
	n.TimedMS = rest[:min(timed, len(rest))]
	n.MedianMS, n.RestMedianMS = median(n.TimedMS), median(rest)
	for _, s := range n.Steps {
		if v, ok := s.Metrics["step below unigram entropy"]; ok {
			n.Crossed = int(v)
			break
		}
	}
	for _, s := range n.Steps {
		if n.Crossed > 0 && s.Step <= n.Crossed {
			n.CrossedS += s.MS / 1e3
		}
	}
	return n, nil
}

// parseMetrics reads app's "name value, name value" (nil for "").
func parseMetrics(s string) map[string]float64 {
	if s == "" {
		return nil
	}
	m := map[string]float64{}
	for _, p := range strings.Split(s, ", ") {
		if pm := metricPair.FindStringSubmatch(p); pm != nil {
			if v, err := strconv.ParseFloat(pm[2], 64); err == nil {
				m[pm[1]] = v
			}
		}
	}
	return m
}

// nativeArgs are the native run's flags: the page's model and batch, a
// line per step (-eval-every 1: its step time and metrics).
func nativeArgs(o Options, batch int, text string) []string {
	return []string{"-device", o.NativeDevice, "-size", o.GPT2, "-ctx", strconv.Itoa(o.Ctx), "-batch", strconv.Itoa(batch), "-vocab", strconv.Itoa(o.Vocab),
		"-bpe", strconv.Itoa(o.BPE), "-steps", strconv.Itoa(o.NativeSteps), "-eval-every", "1", "-sample", "0", "-text", text}
}

// buildGPT2 builds examples/gpt2 from root: for the page (gpt2.wasm and
// Go's wasm_exec.js into dir) and natively (dir/gpt2-native).
func buildGPT2(root, dir string) error {
	goExe := "go"
	out, err := exec.Command(goExe, "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("buildGPT2: go env GOROOT: %w", err)
	}
	execJS, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return fmt.Errorf("buildGPT2: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("buildGPT2: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm_exec.js"), execJS, 0o644); err != nil {
		return fmt.Errorf("buildGPT2: %w", err)
	}
	for _, b := range []struct {
		out string
		env []string
	}{{"gpt2.wasm", []string{"GOOS=js", "GOARCH=wasm"}}, {"gpt2-native", nil}} {
		cmd := exec.Command(goExe, "build", "-trimpath", "-o", filepath.Join(dir, b.out), "./examples/gpt2")
		cmd.Dir, cmd.Env = root, append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("buildGPT2: go build -o %s ./examples/gpt2 (%s): %w\n%s", b.out, strings.Join(b.env, " "), err, out)
		}
	}
	return nil
}

// runGPT2 is the -gpt2 mode: the probe, the page's steps, the native run,
// the table and the JSON.
func runGPT2(o Options) error {
	if o.Ctx < 1 || o.Batch < 1 || o.Vocab < o.BPE || o.Steps < 1 || o.NativeSteps < 1 || o.NativeWarmup < 0 || o.BPE < 256 {
		return fmt.Errorf("-gpt2: -ctx %d, -batch %d, -vocab %d, -steps %d, -native-steps %d, -native-warmup %d, -bpe %d: want ctx, batch, steps and native steps >= 1, native warm-up >= 0, 256 <= bpe <= vocab",
			o.Ctx, o.Batch, o.Vocab, o.Steps, o.NativeSteps, o.NativeWarmup, o.BPE)
	}
	if o.Text == "" {
		return fmt.Errorf("-gpt2: -text FILE is missing: the text both runs train on")
	}
	text, err := os.ReadFile(o.Text)
	if err != nil {
		return fmt.Errorf("-gpt2: -text: %w", err)
	}
	if o.JSON != "" {
		if err := os.MkdirAll(filepath.Dir(o.JSON), 0o755); err != nil {
			return fmt.Errorf("-json %s: %w", o.JSON, err)
		}
	}
	bcfg, flags, exe, tmp, err := chromeSetup(o.ChromeArgs, o.Chromium, o.GPU, "ag-bench-gpt2-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	buildDir, native, agRev := filepath.Join(tmp, "build"), o.Native, ""
	if o.WasmDir != "" {
		if buildDir, err = filepath.Abs(o.WasmDir); err != nil {
			return fmt.Errorf("-wasm: %w", err)
		}
		if b, err := os.ReadFile(filepath.Join(buildDir, agRevFile)); err == nil {
			agRev = strings.TrimSpace(string(b))
		}
	} else {
		root, err := repoRoot()
		if err != nil {
			return fmt.Errorf("%w (or pass -wasm and -native)", err)
		}
		t0 := time.Now()
		if err := buildGPT2(root, buildDir); err != nil {
			return err
		}
		agRev = gitRev(root)
		if native == "" {
			native = filepath.Join(buildDir, "gpt2-native")
		}
		logf("built gpt2.wasm and the native examples/gpt2 from %s in %.1f s", root, time.Since(t0).Seconds())
	}
	for _, f := range []string{"gpt2.wasm", "wasm_exec.js"} {
		if _, err := os.Stat(filepath.Join(buildDir, f)); err != nil {
			return fmt.Errorf("-gpt2: no %s in %s (h200-browser.sh prepare-gpt2, or no -wasm to build it): %w", f, buildDir, err)
		}
	}
	if native == "" {
		return fmt.Errorf("-gpt2: -native PATH is missing: the native examples/gpt2 binary (with -wasm, nothing is built)")
	}

	cfg := gpt2Config{Size: o.GPT2, Ctx: o.Ctx, Batch: o.Batch, Vocab: o.Vocab, BPE: o.BPE, Steps: o.Steps, Device: o.PageDevice, TextName: filepath.Base(o.Text)}
	cfg.Warmup.MinSteps, cfg.Warmup.MinMS, cfg.Warmup.MaxSteps = o.WarmupSteps, o.WarmupMS, max(50, o.WarmupSteps)
	rep := &GPT2Report{Command: strings.Join(os.Args, " "), AgRev: agRev, GPUMode: o.GPU, Go: runtime.Version(),
		Started: time.Now().UTC().Format(time.RFC3339), Config: cfg, TextBytes: len(text)}

	logPath := filepath.Join(tmp, "chrome.log")
	if o.ChromeLog != "" {
		logPath = o.ChromeLog
	}
	chromeLog, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("-chrome-log: %w", err)
	}
	defer chromeLog.Close()
	bcfg.Log = chromeLog
	h := handler(buildDir, filepath.Join(tmp, "no-node-modules"), o.Text)
	base, stopServer, err := serve(h)
	if err != nil {
		return err
	}
	defer stopServer()
	logf("starting %s; flags added: %s", exe, orDash(strings.Join(flags, " ")))
	br, err := startBrowser(exe, filepath.Join(tmp, "chrome-profile"), o.Load, bcfg)
	if err != nil {
		return fmt.Errorf("%w\nchromium's output:\n%s", err, logTail(chromeLog.Name(), 30, false))
	}
	var echo func(string)
	if o.Verbose {
		echo = func(s string) { fmt.Fprintf(os.Stderr, "    console: %s\n", s) }
	}
	pb, perr := probe(br, base, flags, o.Load, o.Timeout, echo)
	if perr == nil {
		perr = pb.check(o.GPU)
	}
	rep.Adapter, rep.Probe, rep.Browser = pb.Adapter(), pb, br.Version
	if perr != nil && o.GPU {
		br.Close()
		pb.print(os.Stdout)
		return fmt.Errorf("%w\nchromium's GPU lines:\n%s", perr, logTail(chromeLog.Name(), 40, true))
	}
	logf("%s, WebGPU adapter: %s", br.Version, pb.Adapter().Summary())
	t1 := time.Now()
	pr, err := br.runPage(base+"/gpt2.html", cfg, o.Load, o.Timeout, echo)
	rep.PageWallS = time.Since(t1).Seconds()
	br.Close() // the native run has the GPU to itself
	batch := o.Batch
	if err == nil {
		rep.Page = &GPT2Page{}
		if err = json.Unmarshal([]byte(pr.Result), rep.Page); err == nil {
			switch {
			case rep.Page.Error != "":
				err = fmt.Errorf("the page: %s", rep.Page.Error)
			case rep.Page.Skip != "":
				err = fmt.Errorf("the page skipped: %s", rep.Page.Skip)
			default:
				batch = rep.Page.Batch
			}
		}
	}
	if err != nil {
		rep.PageError = err.Error()
		logf("page FAILED after %.0f s: %v", rep.PageWallS, err)
	} else {
		logf("page: median %.2f ms/step over %d steps after %d warm-up steps (%.0f s in all)", rep.Page.MedianMS, len(rep.Page.StepMS), rep.Page.Warmup.Steps, rep.PageWallS)
	}

	args := nativeArgs(o, batch, o.Text)
	logf("native: %s %s", native, strings.Join(args, " "))
	var out bytes.Buffer
	cmd := exec.Command(native, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	nerr := cmd.Run()
	nat, perr2 := parseNative(out.String(), o.NativeWarmup, o.Steps)
	if nat == nil {
		nat = &GPT2Native{}
	}
	nat.Command, nat.Output = native+" "+strings.Join(args, " "), out.String()
	if nerr != nil || perr2 != nil {
		nat.Error = fmt.Sprint(nerr, "; ", perr2)
	}
	rep.Native = nat
	if rep.Page != nil && rep.PageError == "" && nat.MedianMS > 0 {
		rep.Ratio = rep.Page.MedianMS / nat.MedianMS
	}
	printGPT2(os.Stdout, rep, o)
	if o.JSON != "" {
		if err := writeJSON(o.JSON, rep); err != nil {
			return err
		}
	}
	switch {
	case rep.PageError != "":
		return fmt.Errorf("-gpt2: %s", firstLine(rep.PageError))
	case nat.Error != "":
		return fmt.Errorf("-gpt2: the native run: %s\n%s", nat.Error, tail(nat.Output, 20))
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// printGPT2 writes the -gpt2 mode's summary.
func printGPT2(w io.Writer, r *GPT2Report, o Options) {
	c := r.Config
	fmt.Fprintf(w, "GPT-2 %s, ctx %d, vocabulary %d, a BPE of at most %d tokens learned from %s (%d bytes); %s; ag %s\n",
		c.Size, c.Ctx, c.Vocab, c.BPE, c.TextName, r.TextBytes, r.Browser, orDash(r.AgRev))
	fmt.Fprintf(w, "WebGPU adapter: %s\n", r.Adapter.Summary())
	if p := r.Page; p != nil && r.PageError == "" {
		fmt.Fprintf(w, "page   (ag.wasm on %s): batch %d, median %.2f ms/step, min %.2f, %d timed steps after %d warm-up steps (%.1f s), loss %.4f -> %.4f, setup %.1f s\n",
			c.Device, p.Batch, p.MedianMS, p.MinMS, len(p.StepMS), p.Warmup.Steps, p.Warmup.MS/1e3, p.Losses[0], p.Losses[len(p.Losses)-1], p.SetupMS/1e3)
		if p.Refused != "" {
			fmt.Fprintf(w, "       batch %d refused in the page: %s\n", c.Batch, firstLine(p.Refused))
		}
		fmt.Fprintf(w, "       metrics after: %s\n", formatMetricMap(p.Metrics))
	} else {
		fmt.Fprintf(w, "page: FAILED: %s\n", firstLine(r.PageError))
	}
	n := r.Native
	if len(n.TimedMS) > 0 {
		fmt.Fprintf(w, "native (%s): median %.2f ms/step over steps %d-%d; %.2f over steps %d-%d\n", o.NativeDevice, n.MedianMS,
			n.Warmup+1, n.Warmup+len(n.TimedMS), n.RestMedianMS, n.Warmup+1, len(n.Steps))
	}
	if n.Error != "" {
		fmt.Fprintf(w, "native: FAILED: %s\n%s\n", n.Error, tail(n.Output, 10))
	}
	if r.Ratio > 0 {
		fmt.Fprintf(w, "page / native: %.3f (goal <= %.1f: %s)\n", r.Ratio, GoalGPT2, verdictGPT2(r.Ratio))
	}
	if len(n.Steps) > 0 {
		last := n.Steps[len(n.Steps)-1]
		fmt.Fprintf(w, "unigram entropy of the training tokens %.4f nats/token; native loss %.4f at step 1, %.4f at step %d (smoothed %.4f)\n",
			n.Unigram, n.Steps[0].Loss, last.Loss, last.Step, last.Metrics["smoothed loss"])
		if n.Crossed > 0 {
			fmt.Fprintf(w, "native: the smoothed training loss fell below the unigram entropy at step %d, after %.1f s of training\n", n.Crossed, n.CrossedS)
		} else {
			fmt.Fprintf(w, "native: the smoothed training loss stayed above the unigram entropy for all %d steps\n", len(n.Steps))
		}
	}
}

// verdictGPT2 says whether the page/native ratio meets GoalGPT2.
func verdictGPT2(r float64) string {
	if r <= GoalGPT2 {
		return "met"
	}
	return "missed"
}

// formatMetricMap writes metrics as "name value" pairs in name order.
func formatMetricMap(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.4g", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
