//go:build ggml

package native

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/internal/vkenv"
)

// childEnv selects the child role of TestNoDriverIsAnError: the test binary
// runs TestNoDriverChild in a child process with a broken Vulkan setup, so
// that an abort (the C++ exception ggml-vulkan throws) fails this test
// instead of killing the test binary.
const childEnv = "AG_NATIVE_NODRIVER_CHILD"

// TestNoDriverChild checks, in the child, that ggml-vulkan reports the setup
// as unavailable, that Open returns an error saying why (want), and that
// ggml's own first call, which throws, comes back as an error naming the
// exception (threw).
func TestNoDriverChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("only run as a child of TestNoDriverIsAnError")
	}
	want, threw := os.Getenv(childEnv+"_WANT"), os.Getenv(childEnv+"_THREW")
	a := driverAvailability(VulkanName)
	if a.OK || !strings.Contains(a.Why, want) {
		t.Errorf("availability %+v, want not OK saying %q", a, want)
	}
	if _, err := backend.Open(VulkanName); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(%s) = %v, want an error saying %q", VulkanName, err, want)
	} else {
		t.Logf("Open: %v", err)
	}
	if n, err := vkDeviceCount(); err == nil || !strings.Contains(err.Error(), threw) {
		t.Errorf("vkDeviceCount() = %d, %v: want an error naming %q", n, err, threw)
	} else {
		t.Logf("ggml: %v", err)
	}
	// ggml-cpu is not affected.
	if be, err := backend.Open(CPUName); err != nil {
		t.Errorf("Open(%s) with Vulkan broken: %v", CPUName, err)
	} else {
		be.Close()
	}
}

// TestNoDriverIsAnError runs TestNoDriverChild without a usable Vulkan
// driver (both loader variables: VK_ICD_FILENAMES is the one bookworm's
// loader 1.3.239 reads first, VK_DRIVER_FILES the newer name) and with a
// GGML_VK_VISIBLE_DEVICES index past the devices (ggml throws
// std::runtime_error). Each must be an error, never an abort.
func TestNoDriverIsAnError(t *testing.T) {
	cases := []struct {
		name        string
		env         []string
		want, threw string
		needsDriver bool
	}{
		{"VK_ICD_FILENAMES", []string{"VK_ICD_FILENAMES=/nonexistent.json"},
			"no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER, with VK_ICD_FILENAMES=/nonexistent.json): install mesa-vulkan-drivers",
			"threw vk::IncompatibleDriverError: vk::createInstance: ErrorIncompatibleDriver (with VK_ICD_FILENAMES=/nonexistent.json)", false},
		{"VK_DRIVER_FILES", []string{"VK_DRIVER_FILES=/nonexistent.json"},
			"no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER, with VK_DRIVER_FILES=/nonexistent.json)",
			"threw vk::IncompatibleDriverError", false},
		{"bad GGML_VK_VISIBLE_DEVICES", []string{visibleEnv + "=0,7"},
			`GGML_VK_VISIBLE_DEVICES="0,7" names no device`, "threw std::runtime_error: Invalid Vulkan device index", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needsDriver {
				if devs, err := probeVulkan(); err != nil || len(devs) == 0 || len(devs) > 7 {
					testenv.SkipDevice(t, VulkanName, "needs 1 to 7 Vulkan devices, found "+driverAvailability(VulkanName).Why)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoDriverChild$", "-test.v")
			cmd.Env = vkenv.ChildEnv(os.Environ(), c.env)
			cmd.Env = append(cmd.Env, childEnv+"=1", childEnv+"_WANT="+c.want, childEnv+"_THREW="+c.threw)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNoDriverChild") {
				t.Fatalf("child with %v: %v (an abort shows as a signal):\n%s", c.env, err, out)
			}
			t.Logf("child with %v:\n%s", c.env, out)
		})
	}
}

func TestVisibleIndices(t *testing.T) {
	cases := []struct {
		env  string
		n    int
		want []int // nil: an error
	}{
		{"0", 1, []int{0}}, {"1, 0", 2, []int{1, 0}}, {"0,", 1, []int{0}},
		{"1", 1, nil}, {"0,7", 2, nil}, {"", 1, nil}, {",", 1, nil}, {"-1", 1, nil}, {"x", 1, nil}, {"0", 0, nil},
	}
	for _, c := range cases {
		got, err := visibleIndices(c.env, c.n)
		if (err != nil) != (c.want == nil) || !slices.Equal(got, c.want) {
			t.Errorf("visibleIndices(%q, %d) = %v, %v; want %v", c.env, c.n, got, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), visibleEnv) {
			t.Errorf("visibleIndices(%q, %d): error %q does not name %s", c.env, c.n, err, visibleEnv)
		}
	}
}
