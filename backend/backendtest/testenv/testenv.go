// Package testenv is the one policy for tests that need a device which may
// be missing on a machine (a WebGPU adapter, a ggml build, a Vulkan driver,
// Chromium): such a test skips loudly, naming itself, the device and the
// reason, or fails when AG_REQUIRE_DEVICES names the device. `make test`
// sets AG_REQUIRE_DEVICES to everything it installed, so a run with a device
// missing can never look green.
//
// go test prints nothing of a passing package, skips included; with
// AG_SKIP_LOG set, every skip made here also appends one line to that file,
// which `make test` prints at the end.
//
// It is test support, public beside the conformance suite (backendtest)
// rather than in an internal/ folder, because its users span every floor:
// core's and the backends' tests as well as nn, buffer, models and the
// commands above them. Go's internal rule would admit them all only from
// the module root's internal/, which core and the backends must not import.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// RequireEnv names the devices that must be present, comma-separated, e.g.
// "cpu,webgpu,ggml-cpu,ggml-vulkan,chromium".
const RequireEnv = "AG_REQUIRE_DEVICES"

// SkipLogEnv names a file to which every skip made here appends a line.
const SkipLogEnv = "AG_SKIP_LOG"

// DeviceEnv names the device the device-independent tests (nn, buffer) run
// on; unset, they run on "cpu".
const DeviceEnv = "AG_TEST_DEVICE"

// Devices are the names AG_REQUIRE_DEVICES may hold: the backends, and
// "chromium" for headless Chromium with a WebGPU adapter.
var Devices = []string{"cpu", "webgpu", "ggml-cpu", "ggml-vulkan", "chromium"}

// Required reports whether AG_REQUIRE_DEVICES names device.
func Required(device string) bool {
	return slices.Contains(required(), device)
}

func required() []string {
	var out []string
	for _, f := range strings.Split(os.Getenv(RequireEnv), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// checkNames fails t when AG_REQUIRE_DEVICES holds a name no test knows: a
// misspelt device would otherwise be required by nobody, silently.
func checkNames(t testing.TB) {
	t.Helper()
	for _, d := range required() {
		if !slices.Contains(Devices, d) {
			t.Fatalf("testenv: %s=%q names %q, which is not one of %v", RequireEnv, os.Getenv(RequireEnv), d, Devices)
		}
	}
}

// SkipDevice ends t because device is unavailable here for the reason why:
// it fails t when AG_REQUIRE_DEVICES names the device, and skips it
// otherwise, with a message naming the test, the device and the reason.
func SkipDevice(t testing.TB, device, why string) {
	t.Helper()
	checkNames(t)
	if Required(device) {
		t.Fatalf("%s: device %s is unavailable here (%s), but %s=%s requires it", t.Name(), device, why, RequireEnv, os.Getenv(RequireEnv))
	}
	msg := fmt.Sprintf("device %s unavailable here: %s (%s=%s would make this a failure)", device, why, RequireEnv, device)
	record(t, "skipped", msg)
	t.Skip(msg)
}

// MustHave fails t when AG_REQUIRE_DEVICES names device, for a test that
// does not skip without the device but would pass on a weaker path (the
// web page falling back from WebGPU to the CPU); otherwise it logs why.
func MustHave(t testing.TB, device, why string) {
	t.Helper()
	checkNames(t)
	if Required(device) {
		t.Errorf("%s: device %s is unavailable here (%s), but %s=%s requires it", t.Name(), device, why, RequireEnv, os.Getenv(RequireEnv))
		return
	}
	msg := fmt.Sprintf("device %s unavailable here, the test runs without it: %s", device, why)
	record(t, "degraded", msg)
	t.Log(msg)
}

// Skipf skips t for a reason other than a missing device, such as an op the
// backend under test does not support, and records it in the skip log.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, "skipped", msg)
	t.Skip(msg)
}

// record appends "<package dir> <test>: <what>: <msg>" as one line to the
// AG_SKIP_LOG file, if set. Test binaries of several packages append at
// once: one write per line, with O_APPEND, keeps the lines whole.
func record(t testing.TB, what, msg string) {
	t.Helper()
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	line := fmt.Sprintf("%s %s: %s: %s", packageDir(), t.Name(), what, msg)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("testenv: %s=%s: %v", SkipLogEnv, path, err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(strings.ReplaceAll(line, "\n", " ") + "\n"); err != nil {
		t.Errorf("testenv: writing %s: %v", path, err)
	}
}

// packageDir is the test's package folder relative to the module root (go
// test runs a test binary in its package's folder), or the folder's path.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			if rel, err := filepath.Rel(root, wd); err == nil {
				return "./" + filepath.ToSlash(rel)
			}
			return wd
		}
		up := filepath.Dir(root)
		if up == root {
			return wd
		}
		root = up
	}
}

// Device is the device named by AG_TEST_DEVICE, or "cpu".
func Device() string {
	if d := os.Getenv(DeviceEnv); d != "" {
		return d
	}
	return "cpu"
}
