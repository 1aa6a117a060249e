//go:build !js

package webgpu

import (
	"os"

	"github.com/cogentcore/webgpu/wgpu"
)

// wgpu-native logs warnings about absent windowing systems and config files
// on every adapter probe: noise in a headless library. Errors still print;
// AG_WEBGPU_LOG=warn (or info, debug, trace) restores more.
func init() {
	level := map[string]wgpu.LogLevel{"warn": wgpu.LogLevelWarn, "info": wgpu.LogLevelInfo,
		"debug": wgpu.LogLevelDebug, "trace": wgpu.LogLevelTrace}[os.Getenv("AG_WEBGPU_LOG")]
	if level == 0 {
		level = wgpu.LogLevelError
	}
	wgpu.SetLogLevel(level)
}
