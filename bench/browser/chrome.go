package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/systeminfo"
	"github.com/chromedp/chromedp"

	"github.com/ag-go/ag/backend/webgpu/browsertest/chrome"
)

// chromiumPath finds the browser: the flag, else chrome.Path.
func chromiumPath(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	p, err := chrome.Path()
	if err != nil {
		return "", fmt.Errorf("chromiumPath: %w (or pass -chromium)", err)
	}
	return p, nil
}

// Browser is one headless Chromium that every page runs in.
type Browser struct {
	ctx     context.Context
	stop    func()
	Version string
	// CommandLine is the browser's command line as it reports it
	// (SystemInfo.getInfo): every flag it really got, the wrapper's too.
	CommandLine string
}

// browserConfig is how startBrowser starts Chromium beyond the flags of
// browsertest/chrome.
type browserConfig struct {
	GPU   bool       // add gpuFlags
	Extra []flagSpec // -chrome-args, last: they override the others
	Log   io.Writer  // Chromium's stdout and stderr (nil: dropped)
}

// flagSpec is one Chromium switch: Value true for --name, a string for
// --name=value, false to drop a switch set before.
type flagSpec struct {
	Name  string
	Value any
}

func (f flagSpec) String() string {
	switch v := f.Value.(type) {
	case bool:
		if !v {
			return "(no --" + f.Name + ")"
		}
		return "--" + f.Name
	default:
		return fmt.Sprintf("--%s=%v", f.Name, v)
	}
}

// gpuFlags are the switches of -gpu: chrome.GPUSwitches, the recipe for
// WebGPU on a real GPU through Vulkan in headless Chromium without a
// display (its doc says why each is there).
func gpuFlags() []flagSpec {
	var out []flagSpec
	for _, f := range chrome.GPUSwitches() {
		out = append(out, flagSpec{f.Name, f.Value})
	}
	return out
}

// parseChromeArgs reads -chrome-args: switches separated by spaces,
// "--name" or "--name=value"; "--name=false" drops a switch the recipe
// sets. --enable-features and --disable-features add to the lists set
// before instead of replacing them.
func parseChromeArgs(s string) ([]flagSpec, error) {
	var out []flagSpec
	for _, f := range strings.Fields(s) {
		name, value, hasValue := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !strings.HasPrefix(f, "--") || name == "" {
			return nil, fmt.Errorf("-chrome-args: %q: want --name or --name=value", f)
		}
		switch {
		case !hasValue:
			out = append(out, flagSpec{name, true})
		case value == "false":
			out = append(out, flagSpec{name, false})
		default:
			out = append(out, flagSpec{name, value})
		}
	}
	return out, nil
}

// effectiveFlags is the list startBrowser adds to browsertest/chrome's: the
// GPU recipe with -gpu, then the extra switches. As with chromedp.Flag, a
// switch set again keeps its place and takes the new value;
// --enable-features and --disable-features add to their lists instead
// (chromedp's defaults included).
func effectiveFlags(cfg browserConfig) []flagSpec {
	var in []flagSpec
	if cfg.GPU {
		in = gpuFlags()
	}
	in = append(in, cfg.Extra...)
	lists := map[string]string{"enable-features": chrome.ChromedpFeatures, "disable-features": "Translate,BlinkGenPropertyTrees"}
	var out []flagSpec
	at := map[string]int{}
	for _, f := range in {
		if v, ok := f.Value.(string); ok {
			if cur, merge := lists[f.Name]; merge {
				if !strings.HasPrefix(v+",", cur+",") { // gpuFlags' list starts with chromedp's
					v = cur + "," + v
				}
				lists[f.Name], f.Value = v, v
			}
		}
		if i, seen := at[f.Name]; seen {
			out[i] = f
			continue
		}
		at[f.Name] = len(out)
		out = append(out, f)
	}
	return out
}

// startBrowser starts Chromium with the flags of notes/PLATFORM.md
// (browsertest/chrome: WebGPU on the SwiftShader adapter with
// --enable-unsafe-webgpu, since CPU adapters are blocklisted; headless as
// root; no network but 127.0.0.1), then cfg's. exe may be a wrapper script
// that execs Chromium; the browser inherits this process's environment
// (LD_LIBRARY_PATH, VK_DRIVER_FILES...).
func startBrowser(exe, profileDir string, timeout time.Duration, cfg browserConfig) (*Browser, error) {
	opts := append(chrome.Options(exe, profileDir), chromedp.WindowSize(1024, 768))
	for _, f := range effectiveFlags(cfg) {
		opts = append(opts, chromedp.Flag(f.Name, f.Value))
	}
	if cfg.Log != nil {
		opts = append(opts, chromedp.CombinedOutput(cfg.Log))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	b := &Browser{ctx: ctx, stop: func() { cancelCtx(); cancelAlloc() }}
	// The first call starts the browser, which lives as long as the context
	// of that call: it must be ctx itself, not one with a deadline. The
	// deadline comes from a timer instead.
	timer := time.AfterFunc(timeout, b.stop)
	err := chromedp.Do(ctx)
	var v browser.GetVersionResult
	if err == nil {
		v, err = chromedp.CallBrowser(ctx, browser.GetVersion, struct{}{})
	}
	if !timer.Stop() {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("startBrowser: starting %s (timeout %s): %w", exe, timeout, err)
	}
	b.Version = v.Product
	if info, err := b.SystemInfo(); err == nil {
		b.CommandLine = info.CommandLine
	}
	return b, nil
}

// SystemInfo is the browser's SystemInfo.getInfo (chrome://gpu's data:
// GPU devices, driver, feature status, command line).
func (b *Browser) SystemInfo() (systeminfo.GetInfoResult, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	return chromedp.CallBrowser(ctx, systeminfo.GetInfo, cdp.Empty{})
}

// Close stops the browser.
func (b *Browser) Close() { b.stop() }

// console collects a tab's console: all of it for -v and diagnostics, and
// the errors and uncaught exceptions apart.
type console struct {
	mu     sync.Mutex
	lines  []string
	errors []string
	echo   func(string)
}

func (c *console) add(m chromedp.ConsoleMessage) {
	line := fmt.Sprintf("[%s] %s", m.Type, m.String())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
	if m.Type == chromedp.ConsoleError || m.IsException() {
		c.errors = append(c.errors, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line+1))
	}
	if c.echo != nil {
		c.echo(line)
	}
}

func (c *console) snapshot() (lines, errs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...), append([]string(nil), c.errors...)
}

// tail is the last n console lines, for error messages.
func (c *console) tail(n int) string {
	lines, _ := c.snapshot()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(console empty)"
	}
	return strings.Join(lines, "\n")
}

// PageRun is what runPage returns: the JSON runBench resolved with and
// the tab's console errors.
type PageRun struct {
	Result        string
	ConsoleErrors []string
}

// runPage opens url in a fresh tab, waits up to loadTimeout for runBench to
// be defined, calls runBench(cfg) and waits up to runTimeout for it. The
// tab is closed afterwards, so every run starts from a fresh page.
func (b *Browser) runPage(url string, cfg any, loadTimeout, runTimeout time.Duration, echo func(string)) (PageRun, error) {
	tab, closeTab := chromedp.NewContext(b.ctx)
	defer closeTab()
	// As for the browser: the tab lives as long as the context of the first
	// call, so open it with tab itself; later calls may have deadlines.
	if err := chromedp.Do(tab); err != nil {
		return PageRun{}, fmt.Errorf("runPage %s: opening a tab: %w", url, err)
	}
	con := &console{echo: echo}
	msgs := chromedp.Console(tab)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			con.add(m)
		}
	}()
	arg, err := json.Marshal(cfg)
	if err != nil {
		return PageRun{}, fmt.Errorf("runPage %s: encoding the config: %w", url, err)
	}
	status := func() string {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#status") ? document.querySelector("#status").textContent : document.readyState`))
		if err != nil {
			return fmt.Sprintf("(unreadable: %v)", err)
		}
		return s
	}

	load, cancel := context.WithTimeout(tab, loadTimeout)
	err = chromedp.Do(load, chromedp.Navigate(url))
	if err == nil {
		_, err = chromedp.Run(load, chromedp.Poll[chromedp.Void](`document.readyState === "complete" && typeof runBench === "function"`,
			chromedp.WithPollingInterval(100*time.Millisecond)))
	}
	cancel()
	if err != nil {
		_, errs := con.snapshot()
		return PageRun{ConsoleErrors: errs}, fmt.Errorf("runPage %s: page not ready within %s: %w\npage status: %s\nconsole:\n%s", url, loadTimeout, err, status(), con.tail(20))
	}

	run, cancel := context.WithTimeout(tab, runTimeout)
	defer cancel()
	t0 := time.Now()
	res, err := chromedp.Run(run, chromedp.Evaluate[string](`runBench(`+string(arg)+`).then(r => JSON.stringify(r))`, chromedp.EvalAwaitPromise))
	_, errs := con.snapshot()
	if err != nil {
		if errors.Is(run.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no result after %s (raise -timeout): %w", time.Since(t0).Round(time.Second), err)
		}
		return PageRun{ConsoleErrors: errs}, fmt.Errorf("runPage %s: runBench: %w\npage status: %s\nconsole:\n%s", url, err, status(), con.tail(20))
	}
	time.Sleep(50 * time.Millisecond) // let the last console events arrive
	_, errs = con.snapshot()
	return PageRun{Result: res, ConsoleErrors: errs}, nil
}
