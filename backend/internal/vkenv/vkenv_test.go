package vkenv

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestPrepareSetsPrivateRuntimeDir(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" {
		t.Skip("XDG_RUNTIME_DIR is a Unix convention")
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv(runtimeDirEnv, "")
	os.Unsetenv(runtimeDirEnv)
	prepare = sync.Once{}
	Prepare()
	dir := os.Getenv(runtimeDirEnv)
	fi, err := os.Stat(dir)
	if dir == "" || err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("after Prepare %s=%q (%v, %v), want a private directory", runtimeDirEnv, dir, fi, err)
	}
	// A set value is the user's: never replaced.
	t.Setenv(runtimeDirEnv, "/run/user/1234")
	prepare = sync.Once{}
	Prepare()
	if got := os.Getenv(runtimeDirEnv); got != "/run/user/1234" {
		t.Errorf("Prepare replaced a set %s with %q", runtimeDirEnv, got)
	}
}

func TestPrivateDirRefusesOthers(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" {
		t.Skip("XDG_RUNTIME_DIR is a Unix convention")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir, err := privateDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := privateDir(); err == nil {
		t.Errorf("privateDir accepted %s with mode 0755", dir)
	}
	os.Remove(dir)
	if err := os.Symlink(tmp, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := privateDir(); err == nil {
		t.Errorf("privateDir accepted a symlink at %s", dir)
	}
}

func TestOverrides(t *testing.T) {
	for _, k := range loaderEnv {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if got := Overrides(); got != "" {
		t.Errorf("Overrides() = %q with none set", got)
	}
	t.Setenv("VK_ICD_FILENAMES", "/nonexistent.json")
	if got := Overrides(); !strings.Contains(got, "VK_ICD_FILENAMES=/nonexistent.json") {
		t.Errorf("Overrides() = %q, want it to name VK_ICD_FILENAMES", got)
	}
}

func TestChildEnv(t *testing.T) {
	parent := []string{"HOME=/root", "VK_DRIVER_FILES=/nvidia.json"}
	got := ChildEnv(parent, []string{"VK_ICD_FILENAMES=/none.json"})
	if !slices.Equal(got, []string{"HOME=/root", "VK_ICD_FILENAMES=/none.json"}) {
		t.Errorf("a child that sets a loader variable: %q", got)
	}
	got = ChildEnv(parent, []string{"__EGL_VENDOR_LIBRARY_FILENAMES=/none.json"})
	if !slices.Equal(got, append(slices.Clone(parent), "__EGL_VENDOR_LIBRARY_FILENAMES=/none.json")) {
		t.Errorf("a child that sets none keeps the parent's driver: %q", got)
	}
}
