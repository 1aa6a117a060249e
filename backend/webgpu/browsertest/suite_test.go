package browsertest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// suiteArgs are the wasm test binary's flags. -test.short skips the two
// large-tensor cases (40M-element add, 33.5M-element get_rows table): on
// SwiftShader (~0.2 GFLOP/s, 2 cores) they dominate the run, and the split
// dispatches they exercise are also covered natively on lavapipe. The
// binary's own timeout turns a hang into a goroutine dump in the output.
var suiteArgs = []string{"-test.v", "-test.short", "-test.timeout=7m"}

// suiteTimeout bounds the whole run in the page.
const suiteTimeout = 8 * time.Minute

// TestConformanceInBrowser runs backendtest.Run(t, "webgpu") compiled to
// wasm inside headless Chromium on its SwiftShader WebGPU adapter. With
// AG_BROWSERTEST_LOG=FILE the binary's whole -test.v output goes to FILE.
func TestConformanceInBrowser(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	buildWasm(t, dir, "./wasmsuite")
	base := serve(t, dir)

	start := time.Now()
	st, out, err := runWasm(ctx, base, suiteArgs, suiteTimeout)
	wall := time.Since(start)
	if strings.HasPrefix(st.Adapter, "no adapter") {
		t.Skipf("Chromium offers no WebGPU adapter: %s (with --enable-unsafe-webgpu SwiftShader should be one; see notes/PLATFORM.md)", st.Adapter)
	}
	if f := os.Getenv("AG_BROWSERTEST_LOG"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Errorf("writing the full output to AG_BROWSERTEST_LOG: %v", err)
		}
	}
	r := summarize(out)
	t.Logf("adapter %s; suite ran %v in the page: %d passed, %d failed, %d skipped", strings.TrimPrefix(st.Adapter, "ok: "), wall.Round(time.Second), r.pass, r.fail, r.skip)
	if err != nil {
		t.Fatalf("%v\noutput (runs and passes left out):\n%s", err, r.report)
	}
	if st.Error != "" {
		t.Errorf("page error:\n%s", st.Error)
	}
	switch {
	case r.topSkipped:
		t.Errorf("the suite skipped itself in the browser although the page found an adapter:\n%s", r.report)
	case st.ExitCode != 0 || r.fail > 0 || !r.passLine:
		t.Errorf("suite failed (exit code %d, %d failed, PASS line %v):\n%s", st.ExitCode, r.fail, r.passLine, r.report)
	case r.pass < minPasses:
		t.Errorf("only %d cases passed, want at least %d: the suite did not run fully:\n%s", r.pass, minPasses, r.report)
	default:
		t.Logf("suite output (runs and passes left out):\n%s", r.report)
	}
}

// minPasses is a floor on the passing (sub)tests: a run that reports PASS
// with fewer did not run the suite.
const minPasses = 100

// result is the digest of a `go test -v` output.
type result struct {
	pass, fail, skip int
	passLine         bool // a line "PASS": the binary's overall verdict
	topSkipped       bool // TestConformance itself skipped (driver unavailable)
	report           string
}

var verdict = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// summarize counts the verdict lines and keeps every line but the "=== RUN"
// and "--- PASS" noise: failures with their messages, skips with reasons,
// the suite's logs and the summary.
func summarize(out string) result {
	var r result
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if m := verdict.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				r.pass++
				continue
			case "FAIL":
				r.fail++
			case "SKIP":
				r.skip++
				r.topSkipped = r.topSkipped || m[2] == "TestConformance"
			}
		}
		if strings.HasPrefix(line, "=== ") {
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
