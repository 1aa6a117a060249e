package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
)

// ag bench -every 2 reads the loss at every second step (half a download a
// step, in both modes), says so in its JSON, and -cpuprofile writes a
// profile.
func TestBenchEveryAndProfile(t *testing.T) {
	dir := t.TempDir()
	js, prof := filepath.Join(dir, "b.json"), filepath.Join(dir, "cpu.prof")
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-width", "16", "-depth", "2", "-batch", "4", "-reps", "4",
		"-every", "2", "-json", js, "-cpuprofile", prof}); err != nil {
		t.Fatal(err)
	}
	rep, b := readReport(t, js)
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want lazy and captured: %s", len(rep.Results), b)
	}
	for _, r := range rep.Results {
		if r.Every != 2 || r.Reps != 4 || r.Down != 0.5 || !(r.MedianM > 0) {
			t.Errorf("%s step: every %d, reps %d, %g downloads a step, median %g ms; want every 2, 4 reps, 0.5 downloads", r.Mode, r.Every, r.Reps, r.Down, r.MedianM)
		}
	}
	p, err := os.ReadFile(prof)
	if err != nil || len(p) < 2 || p[0] != 0x1f || p[1] != 0x8b {
		t.Errorf("-cpuprofile wrote %d bytes (%v), want a gzipped profile", len(p), err)
	}
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-every", "0"}); err == nil {
		t.Error("-every 0 accepted")
	}
	if err := bench([]string{"-device", "cpu", "-matmul", "64", "-batch", "", "-reps", "0"}); err == nil {
		t.Error("-reps 0 accepted") // it panicked taking the median of no times
	}
	// A bad size refused the whole run, naming it (it was skipped with a
	// warning, and a list of only bad sizes measured nothing and passed).
	for _, args := range [][]string{{"-batch", "64,x"}, {"-matmul", "0"}, {"-convnet", "-3"}, {"-gpt-batch", "1.5"}} {
		err := bench(append([]string{"-device", "cpu", "-reps", "1"}, args...))
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("ag bench %s: err %v, want one naming %s", strings.Join(args, " "), err, args[0])
		}
	}
}

// Every flag is checked before anything is measured, and a run that would
// measure nothing or leave a flag it was given unused is refused, naming
// the flag: each of these measured (a matmul first, here) and then failed,
// or measured nothing and exited 0, or dropped the flag silently.
func TestBenchRefusedBeforeMeasuring(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-matmul", "", "-batch", ""}, "nothing to measure"},
		{[]string{"-modes", "lazy,nope"}, `-modes "lazy,nope": "nope" is no mode`},
		{[]string{"-modes", ""}, `-modes "": want at least one`},
		{[]string{"-gpt", "2x64x"}, `"2x64x" is not LAYERSxWIDTH`},
		{[]string{"-gpt", "2x129"}, "width 129 is not a multiple of its 2 heads"},
		{[]string{"-gpt", "1x8", "-gpt-batch", ""}, `-gpt "1x8" with -gpt-batch ""`},
		{[]string{"-gpt", "1x8", "-gpt-dropout", ""}, `-gpt-dropout ""`},
		{[]string{"-gpt", "1x8", "-gpt-ctx", "0"}, "-gpt-ctx 0"},
		{[]string{"-gpt-dropout", "1"}, `-gpt-dropout "1"`},
		{[]string{"-convnet", "6"}, `-convnet "6": want sides that are multiples of 4`},
		{[]string{"-convnet", "8", "-convnet-batch", ""}, `-convnet "8" with -convnet-batch ""`},
		{[]string{"-width", "0"}, "-width 0, -depth 4"},
		{[]string{"-profiled", "-every", "2"}, "-profiled with -every 2"},
		{[]string{"-ops", "3"}, "-ops 3: want a count >= 0, and -profiled with it"},
		{[]string{"-profiled", "-ops", "-1"}, "-ops -1: want a count >= 0"},
		{[]string{"-store16"}, `-store16 with -precision "f32"`},
		{[]string{"-precision", ""}, `-precision ""`},
		{[]string{"-json", filepath.Join(dir, "no", "b.json")}, "-json " + filepath.Join(dir, "no", "b.json") + ": cannot be written"},
		{[]string{"-json", dir}, "-json " + dir + ": is a folder"},
		{[]string{"x", "-reps", "100"}, `unexpected arguments ["x" "-reps" "100"]`},
	} {
		// A measurement warms up for a minute first, so a refusal that came
		// sooner measured nothing: the clock cannot run slow, so load can
		// only lengthen a refusal, of milliseconds, not shorten a
		// measurement (the bound was 10 s against a 20 s warm-up).
		const warmup = time.Minute
		t0 := time.Now()
		err := bench(append([]string{"-device", "cpu", "-matmul", "8", "-reps", "1", "-warmup", warmup.String()}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ag bench %s: error %v, want one with %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if took := time.Since(t0); took >= warmup {
			t.Errorf("ag bench %s: refused after %v, having measured", strings.Join(tc.args, " "), took)
		}
	}
}

// ag bench -later 2 waits for each read two reads after asking for it, on
// webgpu (whose reads return before the values are in): the JSON says so,
// the transfers and launches per step are those of the loop reading at
// once.
func TestBenchLater(t *testing.T) {
	dev, err := core.Open("webgpu")
	if err != nil {
		testenv.SkipDevice(t, "webgpu", err.Error())
	}
	dev.Close()
	js := filepath.Join(t.TempDir(), "b.json")
	if err := bench([]string{"-device", "webgpu", "-matmul", "", "-width", "16", "-depth", "2", "-batch", "4", "-reps", "6",
		"-every", "2", "-later", "2", "-warmup", "0", "-json", js}); err != nil {
		t.Fatal(err)
	}
	rep, b := readReport(t, js)
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want lazy and captured: %s", len(rep.Results), b)
	}
	for _, r := range rep.Results {
		if r.Later != 2 || r.Every != 2 || r.Reps != 6 || len(r.TimesMs) != 6 || r.Down != 0.5 || r.Launch != 1 || !(r.MedianM > 0) {
			t.Errorf("%s step: later %d, every %d, reps %d, %d times, %g downloads and %g launches a step, median %g ms; want later 2, every 2, 6 reps and times, 0.5 downloads, 1 launch",
				r.Mode, r.Later, r.Every, r.Reps, len(r.TimesMs), r.Down, r.Launch, r.MedianM)
		}
	}
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-later", "-1"}); err == nil {
		t.Error("-later -1 accepted")
	}
}

// ag bench warms up for -warmup before each measurement, lists every timed
// repetition in its JSON, and counts device buffers allocated per step:
// none in a steady training loop, whose values take the buffers of the
// step before.
func TestBenchWarmupTimesAllocs(t *testing.T) {
	js := filepath.Join(t.TempDir(), "b.json")
	const warmup = 300 * time.Millisecond
	t0 := time.Now()
	if err := bench([]string{"-device", "cpu", "-matmul", "8", "-width", "16", "-depth", "2", "-batch", "4", "-reps", "5",
		"-warmup", warmup.String(), "-json", js}); err != nil {
		t.Fatal(err)
	}
	// three measurements (a matmul, a lazy and a captured step), each
	// after at least warmup of warm-up runs
	if took := time.Since(t0); took < 3*warmup {
		t.Errorf("ag bench took %v with three measurements after -warmup %v each", took, warmup)
	}
	rep, b := readReport(t, js)
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want a matmul, lazy and captured steps: %s", len(rep.Results), b)
	}
	for _, r := range rep.Results {
		if len(r.TimesMs) != 5 || slices.Min(r.TimesMs) < 0 {
			t.Errorf("%s %s: times_ms %v, want the 5 repetitions", r.Kind, r.Mode, r.TimesMs)
		}
		if r.Kind == "mlp_step" && r.Allocs != 0 {
			t.Errorf("%s step: %g buffers allocated a step after warm-up, want none", r.Mode, r.Allocs)
		}
	}
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-warmup", "-1s"}); err == nil {
		t.Error("-warmup -1s accepted")
	}
}

// readReport reads ag bench's JSON report at path, and its bytes for
// messages.
func readReport(t *testing.T, path string) (benchReport, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, b
}

// ag bench -profiled -ops 3 prints, after the profiled measurement, each
// pass's report and its costliest ops: the step's MatMul among them.
func TestBenchOps(t *testing.T) {
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = out
	err = bench([]string{"-device", "cpu", "-matmul", "", "-width", "16", "-depth", "2", "-batch", "4", "-reps", "2",
		"-warmup", "0", "-modes", "captured", "-profiled", "-ops", "3"})
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-- ops of mlp_step captured batch 4 on cpu", "forward per op", "backward per op", "MatMul"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ag bench -profiled -ops 3 printed no %q:\n%s", want, b)
		}
	}
}
