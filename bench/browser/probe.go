package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Adapter is what a page's bench.adapterInfo (static/common.js) says about
// the WebGPU adapter it got: GPUAdapterInfo, isFallbackAdapter, features
// and, for the probe, limits.
type Adapter struct {
	Available    bool   `json:"available"`
	Why          string `json:"why,omitempty"` // why there is none
	Vendor       string `json:"vendor"`
	Architecture string `json:"architecture"`
	Device       string `json:"device"`
	Description  string `json:"description"`
	IsFallback   bool   `json:"is_fallback"`
	// Driver, Backend ("vulkan") and Type ("discrete GPU", "CPU") are set
	// with --enable-webgpu-developer-features (-gpu).
	Driver          string             `json:"driver,omitempty"`
	Backend         string             `json:"backend,omitempty"`
	Type            string             `json:"type,omitempty"`
	SubgroupMinSize int                `json:"subgroupMinSize,omitempty"`
	SubgroupMaxSize int                `json:"subgroupMaxSize,omitempty"`
	Features        []string           `json:"features"`
	Limits          map[string]float64 `json:"limits,omitempty"`
}

// Software reports whether the adapter runs on the CPU: a fallback adapter,
// SwiftShader, or a CPU-type one. Such a run is no GPU run.
func (a *Adapter) Software() bool {
	if a == nil || !a.Available {
		return false
	}
	all := strings.ToLower(strings.Join([]string{a.Vendor, a.Architecture, a.Device, a.Description, a.Driver}, " "))
	return a.IsFallback || strings.Contains(all, "swiftshader") || strings.Contains(all, "llvmpipe") ||
		strings.Contains(all, "lavapipe") || strings.EqualFold(a.Type, "CPU")
}

// Has reports whether the adapter has a WebGPU feature.
func (a *Adapter) Has(feature string) bool { return a != nil && slices.Contains(a.Features, feature) }

// keyFeatures are the features the summary names: what ag's kernels can
// use beyond core WebGPU.
var keyFeatures = []string{"shader-f16", "timestamp-query", "subgroups"}

// Summary is the adapter in one line: names, backend, whether it is a real
// GPU, and the key features.
func (a *Adapter) Summary() string {
	if a == nil {
		return "not reported"
	}
	if !a.Available {
		return "NONE (" + a.Why + ")"
	}
	name := a.Description
	if name == "" {
		name = strings.Join(strings.Fields(a.Vendor+" "+a.Architecture+" "+a.Device), " ")
	}
	var parts []string
	for _, kv := range [][2]string{{"vendor", a.Vendor}, {"arch", a.Architecture}, {"device", a.Device}, {"backend", a.Backend}, {"type", a.Type}, {"driver", a.Driver}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	kind := "hardware GPU"
	if a.Software() {
		kind = "SOFTWARE/FALLBACK adapter, not a GPU"
	}
	var feats []string
	for _, f := range keyFeatures {
		yes := "no"
		if a.Has(f) {
			yes = "yes"
		}
		feats = append(feats, f+" "+yes)
	}
	return fmt.Sprintf("%s (%s; isFallbackAdapter %v) - %s; %s", orDash(name), strings.Join(parts, ", "), a.IsFallback, kind, strings.Join(feats, ", "))
}

// adapterOf is the adapter a run's page reported (nil when none: not a
// WebGPU run, or it failed first).
func adapterOf(r *Run) *Adapter {
	raw, ok := r.Info["adapter"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var a Adapter
	if json.Unmarshal(b, &a) != nil {
		return nil
	}
	return &a
}

// ProbeResult is what the probe page (static/probe.js) resolves with.
type ProbeResult struct {
	Adapter *Adapter `json:"adapter"`
	Compute *struct {
		OK  bool    `json:"ok"`
		MS  float64 `json:"ms"`
		Why string  `json:"why,omitempty"`
	} `json:"compute,omitempty"`
	UserAgent           string `json:"user_agent"`
	SecureContext       bool   `json:"secure_context"`
	CrossOriginIsolated bool   `json:"cross_origin_isolated"`
	HardwareConcurrency int    `json:"hardware_concurrency"`
	Error               string `json:"error,omitempty"`
}

// BrowserGPU is the part of SystemInfo.getInfo (chrome://gpu) that says
// which GPU and GL the browser itself runs on, and whether it treats WebGPU
// as hardware-accelerated ("enabled") or software ("unavailable_software").
type BrowserGPU struct {
	Devices       []string          `json:"devices"`
	FeatureStatus map[string]string `json:"feature_status"`
	// Aux is the auxAttributes subset that names the GL and its backend.
	Aux         map[string]any `json:"aux,omitempty"`
	Workarounds int            `json:"driver_bug_workarounds"`
}

// auxKeys are the auxAttributes kept in BrowserGPU.Aux.
var auxKeys = []string{"glRenderer", "glVendor", "glVersion", "glImplementationParts", "displayType", "skiaBackendType", "vulkanVersion", "optimus", "inProcessGpu", "sandboxed", "passthroughCmdDecoder", "targetCpuBits"}

// browserGPU reads SystemInfo.getInfo ("" fields where it says nothing).
func (b *Browser) browserGPU() (*BrowserGPU, error) {
	info, err := b.SystemInfo()
	if err != nil {
		return nil, fmt.Errorf("SystemInfo.getInfo: %w", err)
	}
	g := &BrowserGPU{FeatureStatus: map[string]string{}}
	if info.GPU == nil {
		return g, nil
	}
	for _, d := range info.GPU.Devices {
		g.Devices = append(g.Devices, strings.TrimSpace(fmt.Sprintf("%04x:%04x %s %s (driver %s %s)", int64(d.VendorID), int64(d.DeviceID),
			d.VendorString, d.DeviceString, d.DriverVendor, d.DriverVersion)))
	}
	g.Workarounds = len(info.GPU.DriverBugWorkarounds)
	var fs map[string]any
	if len(info.GPU.FeatureStatus) > 0 && json.Unmarshal(info.GPU.FeatureStatus, &fs) == nil {
		for k, v := range fs {
			g.FeatureStatus[k] = fmt.Sprint(v)
		}
	}
	var aux map[string]any
	if len(info.GPU.AuxAttributes) > 0 && json.Unmarshal(info.GPU.AuxAttributes, &aux) == nil {
		g.Aux = map[string]any{}
		for _, k := range auxKeys {
			if v, ok := aux[k]; ok {
				g.Aux[k] = v
			}
		}
	}
	return g, nil
}

// print writes the browser's GPU in a few lines.
func (g *BrowserGPU) print(w io.Writer) {
	if g == nil {
		return
	}
	for _, d := range g.Devices {
		fmt.Fprintf(w, "  GPU device:   %s\n", d)
	}
	var st []string
	for _, k := range []string{"webgpu", "gpu_compositing", "webgl2", "rasterization", "vulkan"} {
		if v, ok := g.FeatureStatus[k]; ok {
			st = append(st, k+" "+v)
		}
	}
	fmt.Fprintf(w, "  chrome://gpu: %s\n", strings.Join(st, ", "))
	if len(g.Aux) > 0 {
		keys := make([]string, 0, len(g.Aux))
		for k := range g.Aux {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %v", k, g.Aux[k]))
		}
		fmt.Fprintf(w, "  GL/GPU info:  %s\n", strings.Join(parts, "; "))
	}
}

// Probe is the -probe report, and the benchmark's first step.
type Probe struct {
	Browser     string       `json:"browser"`
	CommandLine string       `json:"command_line"` // the browser's, as it reports it
	ExtraFlags  []string     `json:"extra_flags"`  // what -gpu and -chrome-args added to browsertest/chrome's
	Page        *ProbeResult `json:"page"`
	BrowserGPU  *BrowserGPU  `json:"browser_gpu,omitempty"`
	WallS       float64      `json:"wall_s"`
}

// probe opens static/probe.html in a fresh tab and reads the browser's GPU
// info.
func probe(br *Browser, base string, extra []string, load, timeout time.Duration, echo func(string)) (*Probe, error) {
	t0 := time.Now()
	p := &Probe{Browser: br.Version, CommandLine: br.CommandLine, ExtraFlags: extra}
	// requestAdapter can hang while the GPU process restarts in a loop (a
	// Vulkan driver Skia cannot use): the probe waits 90 s at most.
	pr, err := br.runPage(base+"/probe.html", struct{}{}, load, min(timeout, 90*time.Second), echo)
	p.WallS = time.Since(t0).Seconds()
	if err != nil {
		return p, fmt.Errorf("probe: %w", err)
	}
	var res ProbeResult
	if err := json.Unmarshal([]byte(pr.Result), &res); err != nil {
		return p, fmt.Errorf("probe: decoding %.300s: %w", pr.Result, err)
	}
	p.Page = &res
	if g, err := br.browserGPU(); err == nil {
		p.BrowserGPU = g
	} else {
		logf("probe: %v", err)
	}
	return p, nil
}

// Adapter is the adapter the probe page got (nil when it did not answer).
func (p *Probe) Adapter() *Adapter {
	if p == nil || p.Page == nil {
		return nil
	}
	return p.Page.Adapter
}

// check says what is wrong with the probe's answer for this run: no
// adapter, a compute shader that failed, or, when a GPU is required (-gpu),
// a software adapter.
func (p *Probe) check(requireGPU bool) error {
	a := p.Adapter()
	switch {
	case p.Page == nil:
		return fmt.Errorf("the probe page gave no answer")
	case p.Page.Error != "":
		return fmt.Errorf("the probe page failed: %s", firstLine(p.Page.Error))
	case a == nil || !a.Available:
		why := "no answer"
		if a != nil {
			why = a.Why
		}
		return fmt.Errorf("no WebGPU adapter: %s", why)
	case p.Page.Compute != nil && !p.Page.Compute.OK:
		return fmt.Errorf("WebGPU adapter %q: a compute shader failed: %s", a.Description, p.Page.Compute.Why)
	case requireGPU && a.Software():
		return fmt.Errorf("-gpu: the WebGPU adapter is a software one (%s), not a GPU: see chrome://gpu's lines above and -chrome-log", a.Summary())
	}
	return nil
}

// print writes the probe's report.
func (p *Probe) print(w io.Writer) {
	fmt.Fprintf(w, "WebGPU probe in %s (%.1f s)\n", p.Browser, p.WallS)
	fmt.Fprintf(w, "  flags added:  %s\n", orDash(strings.Join(p.ExtraFlags, " ")))
	fmt.Fprintf(w, "  command line: %s\n", orDash(p.CommandLine))
	p.BrowserGPU.print(w)
	if p.Page == nil {
		fmt.Fprintf(w, "  adapter:      no answer from the page\n")
		return
	}
	a := p.Page.Adapter
	fmt.Fprintf(w, "  adapter:      %s\n", a.Summary())
	if a != nil && a.Available {
		fmt.Fprintf(w, "  features:     %s\n", orDash(strings.Join(a.Features, " ")))
		keys := make([]string, 0, len(a.Limits))
		for k := range a.Limits {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var lim []string
		for _, k := range keys {
			lim = append(lim, fmt.Sprintf("%s %.0f", k, a.Limits[k]))
		}
		fmt.Fprintf(w, "  limits:       %s\n", orDash(strings.Join(lim, ", ")))
	}
	if c := p.Page.Compute; c != nil {
		if c.OK {
			fmt.Fprintf(w, "  compute:      ok (device, y = 2x+1 over 4096 floats, read back: %.0f ms)\n", c.MS)
		} else {
			fmt.Fprintf(w, "  compute:      FAILED: %s\n", c.Why)
		}
	}
	fmt.Fprintf(w, "  page:         secure %v, cross-origin isolated %v, %d hardware threads; %s\n",
		p.Page.SecureContext, p.Page.CrossOriginIsolated, p.Page.HardwareConcurrency, p.Page.UserAgent)
	if p.Page.Error != "" {
		fmt.Fprintf(w, "  page error:   %s\n", p.Page.Error)
	}
}
