//go:build ggml

package native

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the Vulkan tests run on a machine whose only Vulkan device
// is CPU-type (lavapipe): ggml skips such devices unless
// GGML_VK_VISIBLE_DEVICES selects them. A GPU-type device is left to ggml's
// own choice.
func TestMain(m *testing.M) {
	if _, set := os.LookupEnv(visibleEnv); !set {
		devs, _ := probeVulkan()
		gpu, cpu := false, -1
		for i, d := range devs {
			switch d.typ {
			case vkTypeDiscrete, vkTypeIntegrated:
				gpu = true
			case vkTypeCPU:
				if cpu < 0 {
					cpu = i
				}
			}
		}
		if !gpu && cpu >= 0 {
			os.Setenv(visibleEnv, fmt.Sprint(cpu))
			softwareVulkan = true
		}
	} else if devs, err := probeVulkan(); err == nil {
		// Say whether the selected device is lavapipe: see keepMemory.
		var i int
		fmt.Sscan(os.Getenv(visibleEnv), &i)
		softwareVulkan = i >= 0 && i < len(devs) && devs[i].typ == vkTypeCPU
	}
	if softwareVulkan {
		// Debian bookworm's lavapipe (Mesa 22.3.6) sometimes corrupts its heap
		// ("corrupted double-linked list") when a Vulkan buffer is freed and
		// more work follows. The tests therefore keep every Vulkan buffer and
		// program alive until the process ends (see keepMemory).
		keepMemory = true
	}
	os.Exit(m.Run())
}

// softwareVulkan is true when the Vulkan tests run on a CPU-type device.
var softwareVulkan bool
