//go:build !js

package webgpu

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/internal/vkenv"
	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// childEnv selects the child role of TestNoAdapterIsAnError: the test binary
// runs TestNoAdapterChild in a child process with a broken Vulkan or EGL
// setup, so that a crash inside wgpu-native fails this test instead of
// killing the test binary.
const childEnv = "AG_WEBGPU_NOADAPTER_CHILD"

// TestNoAdapterChild checks, in the child, that the driver's availability
// and Open agree with the case: want is in Why and Open's error (not OK),
// or the driver opens (want "ok", then "ok X": X is in Why).
func TestNoAdapterChild(t *testing.T) {
	want := os.Getenv(childEnv)
	if want == "" {
		t.Skip("only run as a child of TestNoAdapterIsAnError")
	}
	a := driver{}.Available()
	be, err := driver{}.Open()
	if rest, ok := strings.CutPrefix(want, "ok"); ok {
		if !a.OK || err != nil || !strings.Contains(a.Why, strings.TrimSpace(rest)) {
			t.Fatalf("availability %+v, Open error %v: want a device%s", a, err, rest)
		}
		be.Close()
		t.Logf("opened: %s", a.Why)
		return
	}
	if a.OK || !strings.Contains(a.Why, want) {
		t.Errorf("availability %+v, want not OK saying %q", a, want)
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open() = %v, want an error saying %q", err, want)
	}
	t.Logf("Open: %v", err)
}

// TestNoAdapterIsAnError runs TestNoAdapterChild without a Vulkan driver
// and without an EGL vendor (libEGL finds no display: wgpu's OpenGL backend
// panics, aborting the process, when it is enabled), with a Vulkan driver
// but a broken EGL (webgpu must still work on Vulkan), and with a bad
// AG_WEBGPU_BACKENDS.
func TestNoAdapterIsAnError(t *testing.T) {
	const noVulkan, noEGL = "VK_ICD_FILENAMES=/nonexistent.json", "__EGL_VENDOR_LIBRARY_FILENAMES=/nonexistent.json"
	cases := []struct {
		name        string
		env         []string
		want        string
		needsVulkan bool
	}{
		{"no Vulkan, no EGL", []string{noVulkan, noEGL},
			"webgpu: no adapter on Vulkan, Metal or D3D12", false},
		{"no Vulkan", []string{noVulkan}, "with VK_ICD_FILENAMES=/nonexistent.json; AG_WEBGPU_BACKENDS=all also tries OpenGL", false},
		{"Vulkan, no EGL", []string{noEGL}, "ok", true},
		{"bad AG_WEBGPU_BACKENDS", []string{gpu.BackendsEnv + "=metal2"}, `AG_WEBGPU_BACKENDS="metal2": want primary, all, vulkan or gl`, false},
		// The backends reach wgpu: OpenGL when asked for (llvmpipe here).
		{"OpenGL on request", []string{gpu.BackendsEnv + "=gl"}, "ok via OpenGL", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if a := (driver{}).Available(); c.needsVulkan && !a.OK {
				testenv.SkipDevice(t, "webgpu", a.Why)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoAdapterChild$", "-test.v")
			cmd.Env = vkenv.ChildEnv(os.Environ(), c.env)
			cmd.Env = append(cmd.Env, gpu.BackendsEnv+"=", childEnv+"="+c.want)
			if strings.HasPrefix(c.env[0], gpu.BackendsEnv) {
				cmd.Env = append(cmd.Env, c.env...) // after the reset above
			}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNoAdapterChild") {
				t.Fatalf("child with %v: %v (a crash in wgpu-native shows as SIGABRT):\n%.3000s", c.env, err, out)
			}
			t.Logf("child with %v:\n%s", c.env, out)
		})
	}
}
