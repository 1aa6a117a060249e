//go:build !js

// Package chrome finds headless Chromium and the flags that give it WebGPU on
// these machines (notes/PLATFORM.md), for the browser tests and benchmarks.
// It is test support of the WebGPU browser tests (package browsertest),
// public so that the browser benchmark (bench/browser) and the page's tests
// (web) start Chromium the same way without a backend's test importing the
// module root's internal/. It starts Chromium from the host, so it does not
// build for GOOS=js (chromedp does not), like the harness that uses it.
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

// Switch is one Chromium command-line switch: --Name=Value, or --Name for
// Value true (chromedp.Flag's convention).
type Switch struct {
	Name  string
	Value any
}

// ChromedpFeatures is the --enable-features list of
// chromedp.DefaultExecAllocatorOptions: a later enable-features flag
// replaces it, so more features are appended to it.
const ChromedpFeatures = "NetworkService,NetworkServiceInProcess"

// GPUSwitches are the switches for WebGPU (Dawn) on a real GPU through
// Vulkan in headless Chromium on Linux without a display. After Chrome's
// own recipe for headless Chrome on NVIDIA GPUs
// (developer.chrome.com/blog/supercharge-web-ai-testing,
// github.com/jasonmayes/headless-chrome-nvidia-t4-gpu-support) and
// Chromium's source (gpu/command_buffer/service/webgpu_decoder_impl.cc,
// service_utils.cc, gpu/config/gpu_util.cc):
//   - enable-features=Vulkan: on Linux, requestAdapter fails unless Skia's
//     context is Vulkan ("WebGPU on Linux requires ... --enable-features=Vulkan");
//   - use-vulkan=native: the system Vulkan loader and ICD (the NVIDIA one),
//     not SwiftShader's;
//   - use-gl=angle, use-angle=vulkan: GL on the GPU through ANGLE's Vulkan
//     backend, which needs no display or EGL driver; when GL falls back to
//     SwiftShader, Chromium marks WebGPU "software" and forces Dawn's
//     fallback adapter (SwiftShader) even with a GPU present;
//   - disable-vulkan-surface: no VK_KHR_surface / swapchain, there is no
//     display;
//   - ignore-gpu-blocklist: the GPU blocklist must not send a server GPU to
//     software compositing (same effect as above);
//   - enable-unsafe-webgpu (in Options): no WebGPU adapter
//     blocklist, WebGPU on Linux at all;
//   - enable-webgpu-developer-features: adapter.info also says driver,
//     backend ("vulkan") and type ("discrete GPU"), which the probe prints;
//   - disable-gpu-sandbox: the GPU process may open /dev/nvidia* and an ICD
//     outside the sandbox's allowed paths (as root --no-sandbox already
//     covers it);
//   - enable-dawn-features=vulkan_enable_f16_on_nvidia: Dawn refuses
//     shader-f16 on every NVIDIA GPU unless this toggle is set (its Vulkan
//     backend, crbug.com/42251215), and without shader-f16 it also drops
//     the f16 configurations of chromium-experimental-subgroup-matrix; a
//     page cannot set toggles (notes/TENSOR-CORES.md). ag's f16 tiles check
//     their numbers at Open wherever the feature is offered. Not yet tried
//     on a GPU in Chromium (session 28 had no browser call).
func GPUSwitches() []Switch {
	return []Switch{
		{"enable-features", ChromedpFeatures + ",Vulkan"},
		{"use-vulkan", "native"},
		{"use-gl", "angle"},
		{"use-angle", "vulkan"},
		{"disable-vulkan-surface", true},
		{"ignore-gpu-blocklist", true},
		{"enable-webgpu-developer-features", true},
		{"disable-gpu-sandbox", true},
		{"enable-dawn-features", "vulkan_enable_f16_on_nvidia"},
	}
}
