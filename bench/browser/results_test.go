package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ag-go/ag/profile"
)

func okRun(side, backend, mode string, ms float64) *Run {
	return &Run{Side: side, Backend: backend, Mode: mode, MedianMS: ms, MinMS: ms, StepMS: []float64{ms}}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestRatios(t *testing.T) {
	skipped := okRun("tfjs", "webgpu", "", 1)
	skipped.Skip = "no adapter"
	failed := okRun("ag", "webgpu", "lazy", 1)
	failed.Error = "boom"
	tests := []struct {
		name       string
		runs       []*Run
		webgpu     float64 // want WebGPURatio
		best       float64 // want BestRatio
		agBest     string
		tfjsBest   string
		agWebGPUIs string
	}{
		{
			name: "all there",
			runs: []*Run{okRun("ag", "webgpu", "captured", 100), okRun("ag", "webgpu", "lazy", 150),
				okRun("tfjs", "webgpu", "", 400), okRun("ag", "cpu-wasm", "captured", 20),
				okRun("tfjs", "wasm", "", 10), okRun("tfjs", "cpu", "", 80)},
			webgpu: 0.25, best: 2, agBest: "ag cpu-wasm captured", tfjsBest: "tfjs wasm", agWebGPUIs: "ag webgpu captured",
		},
		{
			name: "skipped and failed runs are left out",
			runs: []*Run{failed, okRun("ag", "webgpu", "captured", 300), skipped,
				okRun("tfjs", "webgpu", "", 200), okRun("tfjs", "wasm", "", 600)},
			webgpu: 1.5, best: 1.5, agBest: "ag webgpu captured", tfjsBest: "tfjs webgpu", agWebGPUIs: "ag webgpu captured",
		},
		{
			name:   "no tfjs webgpu: ratio (1) is 0",
			runs:   []*Run{okRun("ag", "webgpu", "lazy", 50), skipped, okRun("tfjs", "cpu", "", 25)},
			webgpu: 0, best: 2, agBest: "ag webgpu lazy", tfjsBest: "tfjs cpu", agWebGPUIs: "ag webgpu lazy",
		},
		{
			name: "nothing ran", runs: []*Run{failed, skipped},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := ratios(2, tt.runs) // okRun sets min = median, so the min ratios equal the median ones
			if !near(q.WebGPUMinRatio, tt.webgpu) || !near(q.BestMinRatio, tt.best) {
				t.Errorf("min ratios %g, %g: want %g, %g", q.WebGPUMinRatio, q.BestMinRatio, tt.webgpu, tt.best)
			}
			if q.Round != 2 || !near(q.WebGPURatio, tt.webgpu) || !near(q.BestRatio, tt.best) ||
				q.AgBest != tt.agBest || q.TfjsBest != tt.tfjsBest || q.AgWebGPU != tt.agWebGPUIs {
				t.Errorf("ratios = %+v\nwant webgpu %g, best %g, %q vs %q, ag webgpu %q", q, tt.webgpu, tt.best, tt.agBest, tt.tfjsBest, tt.agWebGPUIs)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	rounds := []Ratios{
		{Round: 1, WebGPURatio: 0.4, BestRatio: 2, AgBest: "ag a", AgBestMS: 20, TfjsBestMS: 10},
		{Round: 2, WebGPURatio: 0, BestRatio: 3, AgBest: "ag b", AgBestMS: 30, TfjsBestMS: 10},
		{Round: 3, WebGPURatio: 0.6, BestRatio: 1, AgBest: "ag a", AgBestMS: 10, TfjsBestMS: 10},
	}
	s := summarize(rounds)
	// Round 2 has no WebGPU ratio: the median is over 0.4 and 0.6.
	if !near(s.WebGPURatio, 0.5) || !near(s.BestRatio, 2) || !near(s.AgBestMS, 20) || s.AgBest != "ag a" || s.Round != 0 {
		t.Errorf("summarize = %+v: want webgpu 0.5, best 2, ag best 20 ms by \"ag a\"", s)
	}
	for _, c := range []struct {
		r, goal float64
		want    string
	}{{0, 1, "n/a"}, {0.5, 0.5, "met"}, {1.5, 1, "missed: ag 1.50x slower than the goal"}} {
		if got := verdict(c.r, c.goal); got != c.want {
			t.Errorf("verdict(%g, %g) = %q, want %q", c.r, c.goal, got, c.want)
		}
	}
}

func TestBreakdown(t *testing.T) {
	rep := func(pass string, total float64, stages map[string]float64, ops map[string]float64) *profile.Report {
		r := &profile.Report{Pass: pass, TotalMS: total}
		for k, v := range stages {
			r.Stages = append(r.Stages, profile.StageTime{Stage: k, MS: v})
		}
		for k, v := range ops {
			r.ByOp = append(r.ByOp, profile.OpTime{Op: k, MS: v})
		}
		return r
	}
	p := &agProfile{Mode: "captured", Compiles: 1}
	p.Steps, p.StepMS, p.StepTotalMS, p.AttributedMS = 4, []float64{9, 10, 11, 30}, 60, 40
	p.Forward = rep("forward", 16, map[string]float64{"compute": 12, "upload": 4}, map[string]float64{"matmul": 10, "relu": 2})
	p.Backward = rep("backward", 20, map[string]float64{"compute": 20}, map[string]float64{"matmul": 18})
	p.Update = rep("update", 4, map[string]float64{"compute": 2, "download": 2}, map[string]float64{"adamw": 2})
	p.Launches = &profile.LaunchCounts{Total: 4}
	p.Transfers = &profile.Transfers{UpCount: 8, DownCount: 4}
	b := breakdown(p)
	if !near(b.StepMS, 10.5) || !near(b.MeanStepMS, 15) || !near(b.AttributedMS, 10) || !near(b.LaunchesPerStep, 1) || !near(b.UpPerStep, 2) || !near(b.DownPerStep, 1) {
		t.Errorf("breakdown = %+v: want median 10.5, mean 15, attributed 10 ms/step, 1 launch, 2 up, 1 down", b)
	}
	wantStages := []Share{{"compute", 8.5, 85}, {"upload", 1, 10}, {"download", 0.5, 5}}
	if len(b.Stages) != len(wantStages) {
		t.Fatalf("stages %+v, want %+v", b.Stages, wantStages)
	}
	for i, w := range wantStages {
		if g := b.Stages[i]; g.Name != w.Name || !near(g.MS, w.MS) || !near(g.Pct, w.Pct) {
			t.Errorf("stage %d = %+v, want %+v", i, g, w)
		}
	}
	if b.TopOps[0].Name != "matmul" || !near(b.TopOps[0].MS, 7) || !near(b.Passes[1].Pct, 50) || len(b.Notes) != 1 {
		t.Errorf("ops %+v, passes %+v, notes %v: want matmul 7 ms first, backward 50%%, one note", b.TopOps, b.Passes, b.Notes)
	}
}

func TestFill(t *testing.T) {
	tests := []struct {
		raw     string
		skip    string
		ok      bool
		loss    bool
		infoKey string
		err     bool
	}{
		{raw: `{"skip":"tfjs backend webgpu failed to initialize: no adapter"}`, skip: "tfjs backend webgpu failed to initialize: no adapter"},
		{raw: `{"backend":"wasm","threads":2,"median_ms":3,"min_ms":2,"step_ms":[2,3,4],"first_loss":0.5,"last_loss":0.4,"warmup":{"steps":3,"ms":3100}}`,
			ok: true, loss: true, infoKey: "threads"},
		{raw: `{"device":"cpu","median_ms":3,"min_ms":2,"step_ms":[3],"profiled":true,"profile":{"steps":1,"mode":"captured","step_ms":[3]}}`,
			ok: true, infoKey: "device"},
		{raw: `not json`, err: true},
	}
	for _, tt := range tests {
		r := &Run{Side: "tfjs", Backend: "x"}
		err := r.fill(tt.raw)
		if (err != nil) != tt.err {
			t.Errorf("fill(%s): err %v, want error %v", tt.raw, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if r.Skip != tt.skip || r.OK() != tt.ok || (r.FirstLoss != nil) != tt.loss {
			t.Errorf("fill(%s) = %+v: want skip %q, ok %v, loss %v", tt.raw, r, tt.skip, tt.ok, tt.loss)
		}
		if _, has := r.Info[tt.infoKey]; tt.infoKey != "" && !has {
			t.Errorf("fill(%s): info %v lacks %q", tt.raw, r.Info, tt.infoKey)
		}
		if _, has := r.Info["step_ms"]; has {
			t.Errorf("fill(%s): info %v keeps the step times", tt.raw, r.Info)
		}
	}
}

func TestJobsAlternate(t *testing.T) {
	o := Options{Width: 8, Depth: 2, Batch: 4, Steps: 2, AgDevices: []string{"webgpu", "cpu"}, AgModes: []string{"captured", "lazy"},
		TfjsBackends: []string{"webgpu", "wasm", "cpu", "webgl"}}
	var got []string
	for _, j := range jobs(o) {
		got = append(got, strings.TrimSpace(j.side+" "+j.label+" "+j.cfg.Mode+j.cfg.Backend))
	}
	want := "ag webgpu captured|ag webgpu lazy|tfjs webgpu webgpu|ag cpu-wasm captured|ag cpu-wasm lazy|tfjs wasm wasm|tfjs cpu cpu|tfjs webgl webgl"
	if strings.Join(got, "|") != want {
		t.Errorf("jobs:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

func TestHandler(t *testing.T) {
	build, nm := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(build, "ag.wasm"), []byte("\x00asm"), 0o644)
	os.MkdirAll(filepath.Join(nm, "pkg"), 0o755)
	os.WriteFile(filepath.Join(nm, "pkg", "a.js"), []byte("1"), 0o644)
	srv := httptest.NewServer(handler(build, nm, ""))
	defer srv.Close()
	for _, c := range []struct {
		path, ctype string
		code        int
	}{
		{"/ag.html", "text/html", 200}, {"/tfjs.js", "text/javascript", 200}, {"/probe.html", "text/html", 200}, {"/build/ag.wasm", "application/wasm", 200},
		{"/node_modules/pkg/a.js", "text/javascript", 200}, {"/build/missing.wasm", "", 404},
	} {
		res, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.code || !strings.HasPrefix(res.Header.Get("Content-Type"), c.ctype) ||
			res.Header.Get("Cross-Origin-Embedder-Policy") != "require-corp" || res.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" {
			t.Errorf("GET %s: %d %q COEP %q COOP %q, want %d %q and cross-origin isolation", c.path, res.StatusCode,
				res.Header.Get("Content-Type"), res.Header.Get("Cross-Origin-Embedder-Policy"), res.Header.Get("Cross-Origin-Opener-Policy"), c.code, c.ctype)
		}
	}
}

func TestPrintTables(t *testing.T) {
	skipped := &Run{Round: 1, Side: "tfjs", Backend: "webgpu", Skip: "tfjs backend webgpu failed to initialize: no adapter"}
	ran := okRun("ag", "webgpu", "lazy", 12)
	ran.Round = 1
	var b strings.Builder
	printRuns(&b, []*Run{ran, skipped})
	rounds := []Ratios{{Round: 1, WebGPURatio: 0.25, AgWebGPUMS: 1, TfjsWebGPU: 4}}
	printRatios(&b, rounds, summarize(rounds))
	out := b.String()
	for _, want := range []string{"skipped: tfjs backend webgpu failed to initialize: no adapter", "ag webgpu lazy", "0.250 = 1.0 / 4.0 ms", "(1) met; (2) n/a"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "median") && strings.Contains(line, "=") {
			t.Errorf("median row %q shows a quotient of medians taken apart", line)
		}
	}
}
