//go:build !js

package gpu

import (
	"os"

	"github.com/cogentcore/webgpu/wgpu"
)

// wgpu-native logs warnings about absent windowing systems and config files
// on every adapter probe: noise in a headless library. Errors still print;
// AG_WEBGPU_LOG=warn (or info, debug, trace) restores more.
func init() {
	logLevel = map[string]wgpu.LogLevel{"warn": wgpu.LogLevelWarn, "info": wgpu.LogLevelInfo,
		"debug": wgpu.LogLevelDebug, "trace": wgpu.LogLevelTrace}[os.Getenv("AG_WEBGPU_LOG")]
	if logLevel == 0 {
		logLevel = wgpu.LogLevelError
	}
	wgpu.SetLogLevel(logLevel)
}

// logLevel is wgpu-native's log level as set at init.
var logLevel wgpu.LogLevel

// quietly runs f with wgpu-native's logging off: for probes whose errors
// are expected answers (a shader feature the compiler lacks), not faults.
func Quietly(f func()) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	defer wgpu.SetLogLevel(logLevel)
	f()
}
