package main

import (
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
