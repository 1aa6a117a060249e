// Package vkenv is what the Vulkan users of the process (backend/native's
// ggml-vulkan, backend/webgpu's wgpu-native) share about the Vulkan loader's
// environment: preparing it before the first instance, and naming the
// overrides a user set when no driver is found.
package vkenv

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// runtimeDirEnv is the XDG base directory for per-user runtime files.
const runtimeDirEnv = "XDG_RUNTIME_DIR"

var prepare sync.Once

// Prepare readies the environment for the Vulkan loader and drivers; call it
// before anything in the process creates a Vulkan instance or an EGL
// display. It only fills in what is unset.
//
// Headless machines (containers, CI, ssh without a login session) have no
// XDG_RUNTIME_DIR, and Mesa's window-system probes then print "error:
// XDG_RUNTIME_DIR is invalid or not set in the environment." to stderr on
// every instance, although nothing is wrong and no window is wanted. A
// private directory of the user's ($TMPDIR/ag-runtime-<uid>, mode 0700,
// reused by every run) silences that without hiding any real error, which
// redirecting the C stderr around the calls would.
func Prepare() {
	prepare.Do(func() {
		if _, set := os.LookupEnv(runtimeDirEnv); set {
			return
		}
		if dir, err := privateDir(); err == nil {
			os.Setenv(runtimeDirEnv, dir) // with cgo, also the C environment
		}
	})
}

// loaderEnv are the Vulkan loader's variables that replace its driver search
// (VK_ICD_FILENAMES before loader 1.3.207, VK_DRIVER_FILES since) or add to
// it.
var loaderEnv = []string{"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"}

// Overrides names the loader variables that are set, as
// "VK_ICD_FILENAMES=/x.json", for a message saying why no driver was found;
// "" when none is set.
func Overrides() string {
	var set []string
	for _, k := range loaderEnv {
		if v, ok := os.LookupEnv(k); ok {
			set = append(set, k+"="+v)
		}
	}
	return strings.Join(set, " ")
}

// ChildEnv is parent (as os.Environ gives it) with set appended, for a
// child process of a test; where set names a loader variable, the parent's
// loader variables go first: a parent's VK_DRIVER_FILES (set on GPU
// machines whose loader misses the driver) would otherwise win over the
// child's VK_ICD_FILENAMES. Where set names none, the child finds the
// driver as the parent does.
func ChildEnv(parent, set []string) []string {
	names := func(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }
	if !slices.ContainsFunc(set, func(kv string) bool { return slices.Contains(loaderEnv, names(kv)) }) {
		return append(slices.Clip(parent), set...)
	}
	var out []string
	for _, kv := range parent {
		if !slices.Contains(loaderEnv, names(kv)) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
