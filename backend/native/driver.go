//go:build ggml

package native

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lggml -lggml-vulkan -lggml-cpu -lggml-base -lvulkan -lgomp -lstdc++ -lm -lpthread -ldl
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/internal/vkenv"
)

// Vulkan physical device types (VkPhysicalDeviceType).
const (
	vkTypeIntegrated = 1
	vkTypeDiscrete   = 2
	vkTypeCPU        = 4
)

// visibleEnv is ggml's variable that picks Vulkan devices by index; without
// it ggml skips CPU-type devices such as lavapipe.
const visibleEnv = "GGML_VK_VISIBLE_DEVICES"

type vkDevice struct {
	name string
	typ  int
}

// probeVulkan lists the Vulkan physical devices in loader order, which is
// the order GGML_VK_VISIBLE_DEVICES indexes.
func probeVulkan() ([]vkDevice, error) {
	vkenv.Prepare()
	var out [C.AG_VK_MAX_DEVICES]C.ag_vk_device
	n := int(C.ag_vk_probe(&out[0], C.AG_VK_MAX_DEVICES))
	if n < 0 {
		return nil, fmt.Errorf("vkCreateInstance: %s", vkResult(n))
	}
	devs := make([]vkDevice, n)
	for i := range devs {
		devs[i] = vkDevice{C.GoString(&out[i].name[0]), int(out[i]._type)}
	}
	return devs, nil
}

// vkResult names the VkResult codes vkCreateInstance returns.
func vkResult(r int) string {
	names := map[int]string{-1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
		-3: "VK_ERROR_INITIALIZATION_FAILED", -6: "VK_ERROR_LAYER_NOT_PRESENT",
		-7: "VK_ERROR_EXTENSION_NOT_PRESENT", -9: "VK_ERROR_INCOMPATIBLE_DRIVER"}
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("VkResult %d", r)
}

// noDriver says that the loader found no usable driver, naming the loader
// variables the user set (the usual cause when a driver is installed).
func noDriver(detail string) string {
	if o := vkenv.Overrides(); o != "" {
		detail += ", with " + o
	}
	return "no Vulkan driver found (" + detail + "): install mesa-vulkan-drivers or a GPU driver"
}

// overrides is " (with VK_ICD_FILENAMES=...)" when loader variables are set.
func overrides() string {
	if o := vkenv.Overrides(); o != "" {
		return " (with " + o + ")"
	}
	return ""
}

// visibleIndices parses GGML_VK_VISIBLE_DEVICES as ggml does (indices
// separated by commas) and checks each against the n devices found: ggml
// throws on an index past them.
func visibleIndices(env string, n int) ([]int, error) {
	bad := fmt.Errorf("%s=%q names no device (%d found, indices 0..%d)", visibleEnv, env, n, n-1)
	var out []int
	for _, f := range strings.Split(env, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue // ggml reads "0," as "0"
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= n {
			return nil, bad
		}
		out = append(out, i)
	}
	if len(out) == 0 {
		return nil, bad
	}
	return out, nil
}

type vulkanDriver struct{}

// Available reports OK for a GPU-type Vulkan device, and for a CPU-type one
// (lavapipe) only when GGML_VK_VISIBLE_DEVICES selects it: then Auto is
// false, because lavapipe is far slower than ggml's CPU backend.
func (vulkanDriver) Available() backend.Availability {
	devs, err := probeVulkan()
	if err != nil {
		return backend.Availability{Why: noDriver(err.Error())}
	}
	if len(devs) == 0 {
		return backend.Availability{Why: noDriver("the loader lists no device")}
	}
	if env, ok := os.LookupEnv(visibleEnv); ok {
		idx, err := visibleIndices(env, len(devs))
		if err != nil {
			return backend.Availability{Why: err.Error()}
		}
		d := devs[idx[0]]
		if d.typ == vkTypeCPU {
			return backend.Availability{OK: true, Auto: false,
				Why: fmt.Sprintf("%s (Vulkan, CPU-type software device selected by %s=%s; correctness only, slower than ggml-cpu)", d.name, visibleEnv, env)}
		}
		return backend.Availability{OK: true, Auto: true, Why: d.name + " (Vulkan)"}
	}
	var cpuNames []string
	for _, d := range devs {
		if d.typ == vkTypeDiscrete || d.typ == vkTypeIntegrated {
			return backend.Availability{OK: true, Auto: true, Why: d.name + " (Vulkan)"}
		}
		if d.typ == vkTypeCPU {
			cpuNames = append(cpuNames, d.name)
		}
	}
	if len(cpuNames) > 0 {
		return backend.Availability{Why: fmt.Sprintf("only a CPU-type Vulkan device (%s), which ggml skips: set %s=0 to use it (slow, for testing)",
			strings.Join(cpuNames, ", "), visibleEnv)}
	}
	return backend.Availability{Why: fmt.Sprintf("no GPU-type Vulkan device among %d found", len(devs))}
}

// lpThreadsEnv is lavapipe's worker thread count. Mesa 22.3's lavapipe
// (Debian bookworm) does not make a pipeline barrier at the start of a
// command buffer wait for dispatches of an earlier submit still running on
// its other threads; ggml-vulkan splits a graph into several submits and
// relies on exactly that barrier, so results come out stale or NaN. One
// thread serializes the dispatches. Only a CPU-type device gets this, and
// only when the user has not set the variable.
const lpThreadsEnv = "LP_NUM_THREADS"

// selectedIsCPU reports whether ggml will use a CPU-type Vulkan device:
// GGML_VK_VISIBLE_DEVICES picks one (ggml itself never picks one).
func selectedIsCPU() bool {
	env, ok := os.LookupEnv(visibleEnv)
	if !ok {
		return false
	}
	devs, err := probeVulkan()
	if err != nil {
		return false
	}
	idx, err := visibleIndices(env, len(devs))
	return err == nil && devs[idx[0]].typ == vkTypeCPU
}

// f16Env lets a user keep ggml-vulkan's f16 matmul tiles (faster, about
// 1e-3 relative error) instead of the f32 the IR specifies.
const f16Env = "AG_GGML_VK_F16"

// Open checks Available first, so that a machine without a usable driver
// gets its reason; the calls into ggml-vulkan are guarded all the same
// (ag_vk_guard.cpp), because ggml can throw where the probe succeeded (a
// device it cannot create, Vulkan older than 1.2), and a C++ exception would
// abort the process.
func (d vulkanDriver) Open() (backend.Backend, error) {
	if err := checkVKMatmulEnv(); err != nil {
		return nil, fmt.Errorf("native: %s: %w", VulkanName, err)
	}
	if a := d.Available(); !a.OK {
		return nil, fmt.Errorf("native: %s is unavailable: %s", VulkanName, a.Why)
	}
	// On devices with f16 arithmetic ggml-vulkan stages even f32 x f32
	// matmul tiles in f16 (relative error ~1e-3). The IR is f32, so turn
	// that off before ggml initializes the device, unless asked to keep it.
	if os.Getenv(f16Env) != "1" {
		os.Setenv("GGML_VK_DISABLE_F16", "1")
	}
	// One probe (a Vulkan instance of its own) for both uses below.
	software := selectedIsCPU()
	if _, set := os.LookupEnv(lpThreadsEnv); !set && software {
		os.Setenv(lpThreadsEnv, "1")
	}
	n, err := vkDeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("native: %s: ggml finds no Vulkan device it uses (the probe found: %s)", VulkanName, d.Available().Why)
	}
	var msg [512]C.char
	var be C.ggml_backend_t
	if C.ag_vk_init(0, &be, &msg[0], C.size_t(len(msg))) != 0 {
		return nil, fmt.Errorf("native: %s: ggml_backend_vk_init(0) threw %s%s", VulkanName, C.GoString(&msg[0]), overrides())
	}
	if be == nil {
		return nil, fmt.Errorf("native: %s: ggml_backend_vk_init(0) failed", VulkanName)
	}
	var desc [256]C.char
	if C.ag_vk_description(0, &desc[0], C.size_t(len(desc)), &msg[0], C.size_t(len(msg))) != 0 {
		C.ggml_backend_free(be)
		return nil, fmt.Errorf("native: %s: ggml_backend_vk_get_device_description(0) threw %s", VulkanName, C.GoString(&msg[0]))
	}
	dev, err := newDevice(VulkanName, C.GoString(&desc[0])+" (Vulkan)", be, false, software)
	if dev != nil {
		dev.matrixCores = C.GoString(C.ag_vk_matrix_cores(0))
		if dev.coopmat() {
			// which shaders the f16 products get (issue 40's question on
			// each GPU): KHR_coopmat or NV_coopmat2
			dev.caps.Device += ", matrix cores " + dev.matrixCores
		}
	}
	return dev, err
}

// vkDeviceCount is the number of Vulkan devices ggml uses. Its first call
// creates ggml's Vulkan instance, which throws when there is no driver.
func vkDeviceCount() (int, error) {
	var msg [512]C.char
	var n C.int
	if C.ag_vk_device_count(&n, &msg[0], C.size_t(len(msg))) != 0 {
		return 0, fmt.Errorf("native: %s: ggml_backend_vk_get_device_count threw %s%s", VulkanName, C.GoString(&msg[0]), overrides())
	}
	return int(n), nil
}

type cpuDriver struct{}

func (cpuDriver) Available() backend.Availability {
	return backend.Availability{OK: true, Auto: true,
		Why: fmt.Sprintf("%s (ggml CPU backend, %d threads)", cpuDescription(), runtime.NumCPU())}
}

func (cpuDriver) Open() (backend.Backend, error) {
	be := C.ggml_backend_cpu_init()
	if be == nil {
		return nil, fmt.Errorf("native: ggml_backend_cpu_init failed")
	}
	C.ggml_backend_cpu_set_n_threads(be, C.int(runtime.NumCPU()))
	return newDevice(CPUName, cpuDescription()+" (ggml CPU)", be, true, false)
}

// cpuDescription is the CPU's model name as ggml's CPU device reports it.
func cpuDescription() string {
	reg := C.ggml_backend_cpu_reg()
	if reg == nil || C.ggml_backend_reg_dev_count(reg) == 0 {
		return "CPU"
	}
	return strings.TrimSpace(C.GoString(C.ggml_backend_dev_description(C.ggml_backend_reg_dev_get(reg, 0))))
}

// LogEnv names the ggml log levels shown: "debug", "info", "warn" (the
// default: ggml's debug and info lines, such as ggml-vulkan's memory
// queries, stay out of normal output) or "error".
const LogEnv = "AG_GGML_LOG"

func init() {
	level := C.GGML_LOG_LEVEL_WARN
	switch os.Getenv(LogEnv) {
	case "debug":
		level = C.GGML_LOG_LEVEL_DEBUG
	case "info":
		level = C.GGML_LOG_LEVEL_INFO
	case "error":
		level = C.GGML_LOG_LEVEL_ERROR
	}
	C.ag_log_init(C.int(level))
	backend.Register(VulkanName, VulkanPriority, vulkanDriver{})
	backend.Register(CPUName, CPUPriority, cpuDriver{})
}
