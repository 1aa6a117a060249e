package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func TestAutoNote(t *testing.T) {
	drivers := []backend.DriverInfo{
		{Name: "webgpu", Priority: 40, Availability: backend.Availability{OK: true, Why: "llvmpipe via Vulkan, software (CPU) (not picked by auto)"}},
		{Name: "ggml-vulkan", Priority: 35, Availability: backend.Availability{Why: "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)"}},
		{Name: "gpu-x", Priority: 30, Availability: backend.Availability{OK: true, Auto: true, Why: "X"}},
		{Name: "cpu", Priority: 25, Availability: backend.Availability{OK: true, Auto: true, Why: "pure Go"}},
		{Name: "ggml-cpu", Priority: 20, Availability: backend.Availability{OK: true, Auto: true, Why: "ggml"}},
	}
	got := autoNote("cpu", drivers)
	for _, want := range []string{
		"auto chose cpu over: ",
		"webgpu not for auto (llvmpipe via Vulkan, software (CPU) (not picked by auto))",
		"ggml-vulkan unavailable (no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER))",
		"gpu-x failed to open (-device gpu-x shows why)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("autoNote(cpu) = %q, want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "ggml-cpu") || strings.Contains(got, "\n") {
		t.Errorf("autoNote(cpu) = %q: want one line naming only the drivers ranked above cpu", got)
	}
	if got := autoNote("webgpu", drivers); got != "" {
		t.Errorf("autoNote(webgpu) = %q, want nothing when the best driver was chosen", got)
	}
}

// Bad flags are refused before the device opens, each error naming the
// flag and its value: -lr 0 trained at workload's default 1e-3 while the
// model line said 0, and an output file in a missing folder failed after
// the training.
func TestDemoFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-lr", "0"}, "-lr 0: want a finite number > 0"},
		{[]string{"-lr", "-0.1"}, "-lr -0.1: want a finite number > 0"},
		{[]string{"-lr", "NaN"}, "-lr NaN: want a finite number > 0"},
		{[]string{"-lr", "Inf"}, "-lr +Inf: want a finite number > 0"},
		{[]string{"-every", "-1"}, "-every -1: want >= 0"},
		{[]string{"-steps", "0"}, "-steps 0: want at least 1"},
		{[]string{"-trace", filepath.Join(dir, "no", "t.json")}, "-trace " + filepath.Join(dir, "no", "t.json") + ": cannot be written"},
		{[]string{"-profile-json", dir}, "-profile-json " + dir + ": is a folder"},
		// The profile overwrote the trace just written there.
		{[]string{"-trace", filepath.Join(dir, "p.json"), "-profile-json", filepath.Join(dir, ".", "p.json")}, "-trace " + filepath.Join(dir, "p.json") + " and -profile-json " + filepath.Join(dir, "p.json") + ": the same file"},
		{[]string{"-steps", "3", "x", "-mode", "captured"}, `unexpected arguments ["x" "-mode" "captured"]`},
	} {
		err := demo(append([]string{"-device", "cpu", "-width", "8", "-depth", "1", "-batch", "4"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ag demo %s: error %v, want one with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); err == nil {
		t.Error("the refused -trace made a folder")
	}
	// Words after the flags are refused by every command, not ignored with
	// the flags among them.
	for name, cmd := range commands {
		if err := cmd([]string{"extra"}); err == nil || !strings.Contains(err.Error(), `unexpected arguments ["extra"]`) {
			t.Errorf("ag %s extra: error %v, want the word refused", name, err)
		}
	}
}

// ag demo -profile-json writes the profile of the steps, and an existing
// file that checkOutput opened beforehand is replaced whole.
func TestDemoProfileJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := demo([]string{"-device", "cpu", "-width", "8", "-depth", "1", "-batch", "4", "-steps", "3", "-profile-json", path}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Steps int    `json:"steps"`
		Mode  string `json:"mode"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Steps != 1 || p.Mode != "lazy" {
		t.Errorf("profile JSON: %+v, %v; want 1 profiled step of mode lazy", p, err)
	}
}
