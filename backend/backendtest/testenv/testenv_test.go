package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childEnv selects the child role of TestSkipDevicePolicy: the test binary
// runs TestChild in a child process, so that its skip or failure can be
// observed rather than ending this test.
const childEnv = "AG_TESTENV_CHILD"

// TestChild is the child's test: a test that needs "webgpu", missing here.
func TestChild(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("only run as a child of TestSkipDevicePolicy")
	case "skip":
		SkipDevice(t, "webgpu", "no adapter (test)")
		t.Error("SkipDevice returned")
	case "degraded":
		MustHave(t, "chromium", "no WebGPU adapter in the page (test)")
	}
}

func TestSkipDevicePolicy(t *testing.T) {
	cases := []struct {
		name, role, require string
		fail                bool
		out, log            []string // wanted in the child's output and its skip log
	}{
		{"not required", "skip", "", false,
			[]string{"--- SKIP: TestChild", "device webgpu unavailable here: no adapter (test)", "AG_REQUIRE_DEVICES=webgpu would make this a failure"},
			[]string{"./backend/backendtest/testenv TestChild: skipped: device webgpu unavailable here: no adapter (test)"}},
		{"other device required", "skip", "cpu, ggml-cpu", false, []string{"--- SKIP: TestChild"}, []string{"skipped: device webgpu"}},
		{"required", "skip", "cpu,webgpu", true,
			[]string{"--- FAIL: TestChild", "TestChild: device webgpu is unavailable here (no adapter (test)), but AG_REQUIRE_DEVICES=cpu,webgpu requires it"}, nil},
		{"misspelt", "skip", "web-gpu", true, []string{"--- FAIL: TestChild", `names "web-gpu", which is not one of`}, nil},
		{"degraded", "degraded", "", false, []string{"--- PASS: TestChild"}, []string{"TestChild: degraded: device chromium unavailable here"}},
		{"degraded required", "degraded", "chromium", true, []string{"--- FAIL: TestChild", "device chromium is unavailable here"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "skips.txt")
			cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+c.role, RequireEnv+"="+c.require, SkipLogEnv+"="+log)
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fail {
				t.Errorf("child failed: %v, want failure %v", err, c.fail)
			}
			for _, w := range c.out {
				if !strings.Contains(string(out), w) {
					t.Errorf("child output lacks %q:\n%s", w, out)
				}
			}
			got, _ := os.ReadFile(log)
			if len(c.log) == 0 && len(got) > 0 {
				t.Errorf("skip log %q, want it empty (the test failed, it did not skip)", got)
			}
			for _, w := range c.log {
				if !strings.Contains(string(got), w) {
					t.Errorf("skip log lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestRequired(t *testing.T) {
	t.Setenv(RequireEnv, " webgpu ,ggml-vulkan,")
	for d, want := range map[string]bool{"webgpu": true, "ggml-vulkan": true, "ggml": false, "cpu": false, "": false} {
		if got := Required(d); got != want {
			t.Errorf("Required(%q) = %v with %s=%q", d, got, RequireEnv, os.Getenv(RequireEnv))
		}
	}
}

func TestDevice(t *testing.T) {
	t.Setenv(DeviceEnv, "")
	if d := Device(); d != "cpu" {
		t.Errorf("Device() = %q unset, want cpu", d)
	}
	t.Setenv(DeviceEnv, "ggml-cpu")
	if d := Device(); d != "ggml-cpu" {
		t.Errorf("Device() = %q, want ggml-cpu", d)
	}
}
