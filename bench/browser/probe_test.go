package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChromeArgs(t *testing.T) {
	extra, err := parseChromeArgs("--use-angle=gl-egl --enable-features=Foo --ignore-gpu-blocklist=false --enable-logging --disable-features=Bar")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range effectiveFlags(browserConfig{GPU: true, Extra: extra}) {
		got = append(got, f.String())
	}
	s := strings.Join(got, " ")
	for _, want := range []string{
		"--enable-features=NetworkService,NetworkServiceInProcess,Vulkan,Foo --use-vulkan=native --use-gl=angle --use-angle=gl-egl", // in place, features merged
		"--disable-vulkan-surface (no --ignore-gpu-blocklist) --enable-webgpu-developer-features --disable-gpu-sandbox --enable-dawn-features=vulkan_enable_f16_on_nvidia --enable-logging --disable-features=Translate,BlinkGenPropertyTrees,Bar",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("flags %q lack %q", s, want)
		}
	}
	if fl := effectiveFlags(browserConfig{}); len(fl) != 0 {
		t.Errorf("no -gpu, no -chrome-args: flags %v, want none (browsertest/chrome's only)", fl)
	}
	for _, bad := range []string{"use-angle=vulkan", "-x", "--=1"} {
		if _, err := parseChromeArgs(bad); err == nil {
			t.Errorf("parseChromeArgs(%q): no error", bad)
		}
	}
}

func TestAdapter(t *testing.T) {
	swift := &Run{Info: map[string]any{"adapter": map[string]any{"available": true, "vendor": "google", "architecture": "swiftshader",
		"is_fallback": false, "features": []any{"timestamp-query"}}}}
	gpu := &Run{Info: map[string]any{"adapter": map[string]any{"available": true, "vendor": "nvidia", "architecture": "hopper",
		"description": "NVIDIA H200", "backend": "vulkan", "type": "discrete GPU", "features": []any{"shader-f16", "subgroups", "timestamp-query"}}}}
	a, g := adapterOf(swift), adapterOf(gpu)
	if a == nil || g == nil || adapterOf(&Run{}) != nil {
		t.Fatalf("adapterOf: %v %v", a, g)
	}
	if !a.Software() || g.Software() || (&Adapter{Available: true, Type: "CPU"}).Software() != true {
		t.Errorf("Software: swiftshader %v, H200 %v: want true, false", a.Software(), g.Software())
	}
	if s := g.Summary(); !strings.Contains(s, "NVIDIA H200") || !strings.Contains(s, "hardware GPU") || !strings.Contains(s, "shader-f16 yes, timestamp-query yes, subgroups yes") {
		t.Errorf("summary %q", s)
	}
	if s := a.Summary(); !strings.Contains(s, "SOFTWARE") || !strings.Contains(s, "shader-f16 no") {
		t.Errorf("summary %q", s)
	}
	if s := (&Adapter{Why: "requestAdapter returned null"}).Summary(); !strings.Contains(s, "NONE") {
		t.Errorf("summary %q", s)
	}
	p := &Probe{Page: &ProbeResult{Adapter: a}}
	if p.check(false) != nil || p.check(true) == nil {
		t.Errorf("check of a software adapter: %v without -gpu, %v with: want nil, an error", p.check(false), p.check(true))
	}
	if (&Probe{Page: &ProbeResult{Adapter: &Adapter{Why: "null"}}}).check(false) == nil {
		t.Error("check without an adapter: no error")
	}
	var b strings.Builder
	printAdapters(&b, []*Run{swift, gpu, gpu}, g)
	if out := b.String(); !strings.Contains(out, "adapter of 2 WebGPU runs: NVIDIA H200") || !strings.Contains(out, "NOT the probe's adapter") {
		t.Errorf("printAdapters:\n%s", out)
	}
}

// TestPackedFiles checks the prebuilt-folder paths: pack.sh copies every
// file the pages load, and a folder without them is refused with a reason.
func TestPackedFiles(t *testing.T) {
	sh, err := os.ReadFile("pack.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tfjsFiles {
		if !strings.Contains(string(sh), f) {
			t.Errorf("pack.sh does not copy %s", f)
		}
	}
	nm := t.TempDir()
	if err := ensureTfjs(nm, "", false, t.Logf); err == nil || !strings.Contains(err.Error(), "pack.sh") {
		t.Errorf("ensureTfjs on an empty -node-modules: %v", err)
	}
	for _, f := range tfjsFiles {
		os.MkdirAll(filepath.Join(nm, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(nm, f), []byte("x"), 0o644)
	}
	if err := ensureTfjs(nm, "", false, t.Logf); err != nil {
		t.Errorf("ensureTfjs on a full -node-modules: %v", err)
	}
	dist := t.TempDir()
	if err := checkWasmDir(dist, "-wasm: found"); err == nil {
		t.Error("checkWasmDir on an empty folder: no error")
	}
	for _, f := range wasmFiles {
		os.WriteFile(filepath.Join(dist, f), []byte("x"), 0o644)
	}
	if err := checkWasmDir(dist, "-wasm: found"); err != nil {
		t.Error(err)
	}
}
