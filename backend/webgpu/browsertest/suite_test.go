//go:build !js

package browsertest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// binary is one wasm test binary the browser runs.
type binary struct {
	name, pkg string // subtest name; package, relative to this folder
	args      []string
	// mustPass are top-level tests that must pass (not skip) and
	// minPasses is a floor on the passing (sub)tests: a run that reports
	// PASS otherwise did not run the tests.
	mustPass  []string
	minPasses int
	// timeout bounds the run in the page (less when the go test deadline
	// is nearer); the binary's own -test.timeout is 20 s shorter, so that
	// a hang ends in a goroutine dump in the output.
	timeout time.Duration
}

// packageTests are the webgpu package's own tests that run in the browser:
// the ones about the device layer and planning (availability, bind-range
// splitting, memory plan and estimate, rebinding, device time, fusion
// patterns, optimizer groups, the browser's reused run plans). Left out as too slow on SwiftShader, where a
// tiled matmul pipeline takes ~5 s to compile: TestOps (its many matmul
// tile variants; every op is in the conformance suite) and
// TestFusedTrainingStep (~2 min; fused training is covered by the suite's
// graph/train-step and TestMLPTrains). TestConformance runs in wasmsuite.
const packageTests = "^(TestAvailable|TestSplitLargeBindings|TestMemoryPlan|TestRebind|TestMemoryEstimate|TestDeviceTime|TestFusionPatterns|TestOptimizerGroups|TestMatmulF16Tiles|TestMatmulSpeed|TestRunPlans|TestLazyStepPlans|TestReadLater|TestReadLaterClose|TestReadLaterPipelined|TestStepLater)$"

// packageSkips: TestFusionPatterns/sgd-group expects its five SGD updates
// (four buffers each) in one dispatch, which needs 21 storage buffers per
// kernel; SwiftShader offers 10, so the backend correctly makes 3. The
// expectation should follow maxStorageBuffersPerShaderStage as
// TestOptimizerGroups does.
const packageSkips = "^TestFusionPatterns$/^sgd-group$"

// binaries: the conformance suite (with its large-tensor cases: a
// 40M-element add takes ~20 s on SwiftShader) and the MLP training check
// (wasmsuite), then the webgpu package's tests of packageTests. On 2 busy
// cores they take ~2-4 min and ~40 s in the page; their timeouts guard
// against a hang only, at ten times that or more (less where the go test
// deadline is nearer, see TestInBrowser), so a busy machine reaches none.
var binaries = []binary{
	{"conformance", "./wasmsuite", []string{"-test.v"},
		[]string{"TestConformance", "TestMLPTrains"}, 300, 40 * time.Minute},
	{"package", "..", []string{"-test.v", "-test.run=" + packageTests, "-test.skip=" + packageSkips},
		[]string{"TestAvailable", "TestSplitLargeBindings", "TestMemoryPlan", "TestRebind", "TestMemoryEstimate", "TestDeviceTime", "TestFusionPatterns", "TestOptimizerGroups", "TestRunPlans", "TestLazyStepPlans",
			"TestReadLater", "TestReadLaterClose", "TestReadLaterPipelined", "TestStepLater"}, 17, 10 * time.Minute},
}

// TestInBrowser runs the WebGPU backend's tests compiled to wasm inside
// headless Chromium on its SwiftShader adapter, one subtest per binary.
// Under -short the binaries get -test.short (the conformance suite then
// skips its large-tensor cases). With AG_BROWSERTEST_LOG=PREFIX the whole
// -test.v output of each binary goes to PREFIX<name>.txt.
func TestInBrowser(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	copyWasmExec(t, dir)
	base := serve(t, dir)
	st, _, err := runWasm(ctx, base, "", nil, time.Minute)
	// A GPU process starting on Vulkan may not offer the adapter at once.
	for try := 0; os.Getenv(gpuEnv) != "" && err == nil && !strings.HasPrefix(st.Adapter, "ok") && try < 10; try++ {
		time.Sleep(2 * time.Second)
		st, _, err = runWasm(ctx, base, "", nil, time.Minute)
	}
	switch {
	case err != nil:
		t.Fatalf("probing the adapter: %v", err)
	case st.Error != "":
		t.Fatalf("probing the adapter: page error:\n%s", st.Error)
	case !strings.HasPrefix(st.Adapter, "ok") && os.Getenv(gpuEnv) != "":
		t.Fatalf("%s is set and Chromium offers no WebGPU adapter: %s", gpuEnv, st.Adapter)
	case !strings.HasPrefix(st.Adapter, "ok"):
		testenv.SkipDevice(t, "chromium", fmt.Sprintf("Chromium offers no WebGPU adapter: %s (with --enable-unsafe-webgpu SwiftShader should be one; see notes/PLATFORM.md)", st.Adapter))
	}
	t.Logf("adapter: %s", strings.TrimPrefix(st.Adapter, "ok: "))
	for _, b := range binaries {
		buildWasm(t, dir, b.pkg, b.name+".wasm")
	}
	if os.Getenv(gpuEnv) != "" && strings.Contains(st.Adapter, "fallback") {
		t.Errorf("%s is set but the adapter is a software one: %s", gpuEnv, st.Adapter)
	}
	for _, b := range binaries {
		if testing.Short() {
			b.args = append(slices.Clip(b.args), "-test.short")
		}
		if d, ok := t.Deadline(); ok {
			// Leave time for the cleanup that stops Chromium: a go test
			// timeout panics past it and would leave the browser running.
			b.timeout = min(b.timeout, time.Until(d)-30*time.Second)
		}
		if b.timeout < time.Minute {
			t.Fatalf("%s: %v left before the go test deadline; run with a longer -timeout", b.name, b.timeout)
		}
		b.args = append(slices.Clip(b.args), fmt.Sprintf("-test.timeout=%v", b.timeout-20*time.Second))
		t.Run(b.name, func(t *testing.T) { runBinary(t, ctx, base, b) })
	}
}

// TestBuildWasm writes the wasm binaries and wasm_exec.js into the folder
// AG_BROWSERTEST_WASM names, for TestInBrowser on a machine without Go.
func TestBuildWasm(t *testing.T) {
	dir := os.Getenv(prebuiltEnv)
	if dir == "" {
		t.Skip("AG_BROWSERTEST_WASM names no folder to build into (only bench/h200-browser.sh prepare needs this)")
	}
	t.Setenv(prebuiltEnv, "") // build, don't copy
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyWasmExec(t, dir)
	for _, b := range binaries {
		buildWasm(t, dir, b.pkg, b.name+".wasm")
	}
}

// runBinary runs b in the page and fails unless it exits 0 with PASS, no
// failing test and at least b.minPasses passing ones.
func runBinary(t *testing.T, ctx context.Context, base string, b binary) {
	start := time.Now()
	st, out, err := runWasm(ctx, base, b.name+".wasm", b.args, b.timeout)
	wall := time.Since(start)
	if p := os.Getenv("AG_BROWSERTEST_LOG"); p != "" {
		if err := os.WriteFile(p+b.name+".txt", []byte(out), 0o644); err != nil {
			t.Errorf("writing the output to AG_BROWSERTEST_LOG: %v", err)
		}
	}
	r := summarize(out)
	t.Logf("%s: %v in the page, %d passed, %d failed, %d skipped", b.pkg, wall.Round(100*time.Millisecond), r.pass, r.fail, r.skip)
	if err != nil {
		t.Fatalf("%v\noutput (runs, passes and error ratios left out):\n%s", err, r.report)
	}
	if st.Error != "" {
		t.Errorf("page error:\n%s", st.Error)
	}
	var missing []string
	for _, name := range b.mustPass {
		if !r.passedTop[name] {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) > 0:
		t.Errorf("tests %v did not pass (skipped, failed or missing) although the page found an adapter:\n%s", missing, r.report)
	case st.ExitCode != 0 || r.fail > 0 || !r.passLine:
		t.Errorf("failed (exit code %d, %d failed, PASS line %v):\n%s", st.ExitCode, r.fail, r.passLine, r.report)
	case r.pass < b.minPasses:
		t.Errorf("only %d tests passed, want at least %d: the binary did not run its tests:\n%s", r.pass, b.minPasses, r.report)
	default:
		t.Logf("output (runs, passes and error ratios left out):\n%s", r.report)
	}
}

// result is the digest of a `go test -v` output.
type result struct {
	pass, fail, skip int
	passLine         bool            // a line "PASS": the binary's overall verdict
	passedTop        map[string]bool // top-level tests that passed
	report           string
}

var verdict = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+)`)

// summarize counts the verdict lines and keeps every line but the "=== RUN"
// and "--- PASS" lines and the suite's "worst error is" ratios: failures
// with their messages, skips with reasons, other logs and the summary.
func summarize(out string) result {
	r := result{passedTop: map[string]bool{}}
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if m := verdict.FindStringSubmatch(line); m != nil {
			switch m[2] {
			case "PASS":
				r.pass++
				r.passedTop[m[3]] = r.passedTop[m[3]] || m[1] == ""
				continue
			case "FAIL":
				r.fail++
			case "SKIP":
				r.skip++
			}
		}
		if strings.HasPrefix(line, "=== ") || strings.Contains(line, ": worst error is ") {
			continue
		}
		if line == "PASS" {
			r.passLine = true
		}
		keep = append(keep, line)
	}
	r.report = strings.TrimSpace(strings.Join(keep, "\n"))
	if r.report == "" {
		r.report = fmt.Sprintf("(no output; %d bytes in all)", len(out))
	}
	return r
}
