package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/ag-go/ag/internal/chrome"
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
}

// startBrowser starts Chromium with the flags of notes/PLATFORM.md: WebGPU
// on the SwiftShader adapter (--enable-unsafe-webgpu, since CPU adapters
// are blocklisted), headless as root, no network but 127.0.0.1.
func startBrowser(exe, profileDir string, timeout time.Duration) (*Browser, error) {
	opts := append(chrome.Options(exe, profileDir), chromedp.WindowSize(1024, 768))
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
	return b, nil
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
