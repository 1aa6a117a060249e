//go:build !js

package browsertest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/webgpu/browsertest/chrome"
)

//go:embed index.html
var indexHTML []byte

// goCmd is the go command that builds the wasm binaries.
func goCmd(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	return p
}

// The environment of runs on a machine without Go and with a GPU (see
// bench/h200-browser.sh): AG_BROWSERTEST_WASM names a folder holding the
// wasm binaries (<name>.wasm) and wasm_exec.js built before
// (AG_BROWSERTEST_WASM=DIR go test -run TestBuildWasm writes them);
// AG_BROWSERTEST_GPU=1 starts Chromium with chrome.GPUSwitches and fails
// unless the page gets a hardware adapter.
const (
	prebuiltEnv = "AG_BROWSERTEST_WASM"
	gpuEnv      = "AG_BROWSERTEST_GPU"
)

// copyWasmExec copies the wasm_exec.js of the Go that builds the binaries
// into dir: binary and glue must come from the same Go version.
func copyWasmExec(t *testing.T, dir string) {
	t.Helper()
	src := ""
	if pre := os.Getenv(prebuiltEnv); pre != "" {
		src = filepath.Join(pre, "wasm_exec.js")
	} else {
		root, err := exec.Command(goCmd(t), "env", "GOROOT").Output()
		if err != nil {
			t.Fatalf("copyWasmExec: go env GOROOT: %v", err)
		}
		src = filepath.Join(strings.TrimSpace(string(root)), "lib", "wasm", "wasm_exec.js")
	}
	js, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("copyWasmExec: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm_exec.js"), js, 0o644); err != nil {
		t.Fatalf("copyWasmExec: %v", err)
	}
}

// buildWasm compiles pkg (relative to this folder) as a GOOS=js test binary
// into dir/bin, or with AG_BROWSERTEST_WASM set copies the one built there
// before (a machine without Go).
func buildWasm(t *testing.T, dir, pkg, bin string) {
	t.Helper()
	if pre := os.Getenv(prebuiltEnv); pre != "" {
		b, err := os.ReadFile(filepath.Join(pre, bin))
		if err != nil {
			t.Fatalf("buildWasm: %s=%s: %v", prebuiltEnv, pre, err)
		}
		if err := os.WriteFile(filepath.Join(dir, bin), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	start := time.Now()
	cmd := exec.Command(goCmd(t), "test", "-c", "-o", filepath.Join(dir, bin), pkg)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buildWasm: GOOS=js GOARCH=wasm go test -c %s: %v\n%s", pkg, err, out)
	}
	t.Logf("built %s for js/wasm in %v", pkg, time.Since(start).Round(time.Millisecond))
}

// serve serves dir and the embedded index.html on 127.0.0.1 (random port)
// until the test ends.
func serve(t *testing.T, dir string) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == "/" || r.URL.Path == "/index.html" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(indexHTML)
			return
		}
		files.ServeHTTP(w, r) // .wasm is served as application/wasm (instantiateStreaming needs it)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// browser starts headless Chromium with WebGPU enabled on a fresh profile
// and returns a tab context; it skips when Chromium is not installed. The
// browser's own output is logged if the test fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromium, err := chrome.Path()
	if err != nil {
		testenv.SkipDevice(t, "chromium", err.Error())
	}
	opts := chrome.Options(chromium, t.TempDir())
	if os.Getenv(gpuEnv) != "" {
		// Dawn on the machine's GPU instead of SwiftShader.
		for _, f := range chrome.GPUSwitches() {
			opts = append(opts, chromedp.Flag(f.Name, f.Value))
		}
	}
	var log syncBuffer
	opts = append(opts, chromedp.CombinedOutput(&log))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium output (D-Bus complaints left out):\n%s", withoutDBus(log.String()))
		}
	})
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("browser: start %s: %v\n%s", chromium, err, log.String())
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	return ctx
}

// withoutDBus drops the lines about the missing D-Bus, which headless
// Chromium prints by the dozen in containers.
func withoutDBus(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, "dbus") }), "\n")
}

// pageState is what index.html exposes on window, with the output written
// since the last poll.
type pageState struct {
	Adapter  string `json:"adapter"`
	Done     bool   `json:"done"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error"`
	Chunk    string `json:"chunk"`  // window.out from the offset asked for
	OutLen   int    `json:"outLen"` // length of window.out (UTF-16 units)
}

// stateJS reads the page state with the output from offset %d on.
const stateJS = `(() => { const o = window.out; return {adapter: window.adapter, done: window.done,
	exitCode: window.exitCode, error: window.error, chunk: o.slice(%d), outLen: o.length}; })()`

// pollTimeout bounds one read of the page state: it answers only when the
// page's event loop is free (the Go program yields to it whenever it waits
// on a GPU promise), so a longer wait means the page is stuck in wasm code.
const pollTimeout = 30 * time.Second

// runWasm opens the page at base to run the binary bin with args and polls
// until the binary exits or timeout passes; with bin "" the page only probes
// the WebGPU adapter. It returns the final state and the binary's output,
// read a piece per poll so that a run that hangs or times out still returns
// what it wrote until then, along with an error.
func runWasm(ctx context.Context, base, bin string, args []string, timeout time.Duration) (pageState, string, error) {
	var st pageState
	a, err := json.Marshal(args)
	if err != nil {
		return st, "", err
	}
	u := base + "/?args=" + url.QueryEscape(string(a))
	if bin != "" {
		u += "&bin=" + url.QueryEscape(bin)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		return st, "", fmt.Errorf("runWasm: navigate %s: %w", u, err)
	}
	var out strings.Builder
	deadline := time.Now().Add(timeout)
	lastAnswer := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, min(pollTimeout, time.Until(deadline)+time.Second))
		next, err := chromedp.Run(pctx, chromedp.Evaluate[pageState](fmt.Sprintf(stateJS, st.OutLen)))
		cancel()
		switch {
		case err == nil:
			out.WriteString(next.Chunk)
			st, lastAnswer = next, time.Now()
			st.Chunk = ""
			if st.Done {
				return st, out.String(), nil
			}
		case ctx.Err() != nil:
			return st, out.String(), fmt.Errorf("runWasm: %w", ctx.Err())
		}
		if time.Now().After(deadline) {
			return st, out.String(), fmt.Errorf("runWasm: %s not done after %v (the page last answered %v ago: %v)",
				bin, timeout, time.Since(lastAnswer).Round(time.Second), err)
		}
		time.Sleep(time.Second)
	}
}

// syncBuffer is a bytes.Buffer safe for Chromium's output goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
