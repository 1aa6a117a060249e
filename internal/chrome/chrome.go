// Package chrome finds headless Chromium and the flags that give it WebGPU on
// these machines (notes/PLATFORM.md), for the browser tests and benchmarks.
package chrome

import (
	"errors"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Path finds the browser: $AG_CHROMIUM, then the usual names on PATH.
func Path() (string, error) {
	if p := os.Getenv("AG_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: apt-get install -y --no-install-recommends chromium (make deps), or set AG_CHROMIUM")
}

// Options are the allocator options for headless Chromium with WebGPU on a
// fresh profile in profileDir:
//   - --enable-unsafe-webgpu, without which requestAdapter() is null here
//     (CPU adapters such as SwiftShader are blocklisted); not
//     --use-angle=vulkan, which breaks WebGPU;
//   - no network but 127.0.0.1 (the machines have none, and Chromium's
//     background connections would be refused many at a time);
//   - no sandbox as root, where Chromium refuses to start with it;
//   - timers not throttled, so long runs in one tab keep their pace.
func Options(exe, profileDir string) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("enable-unsafe-webgpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
		chromedp.UserDataDir(profileDir),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}
