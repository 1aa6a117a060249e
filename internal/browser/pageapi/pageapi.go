// Package pageapi is the page's API as package app's browser runner (the
// one browser build: the page's MLP, examples/mlp, and every other app)
// answers it: the devices and the pick of "best", the training loop of
// ag.train, the readers of its arguments, and the profiler switched as
// `ag demo -profile` switches it, with the traces of the last profiles.
package pageapi

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/profile"
)

// DriverJSON is one row of ag.devices().
type DriverJSON struct {
	Name     string `json:"name"`
	Priority int    `json:"priority"`
	OK       bool   `json:"ok"`
	Auto     bool   `json:"auto"`
	Why      string `json:"why"`
}

// DevicesInfo is ag.devices()'s answer.
type DevicesInfo struct {
	Drivers []DriverJSON `json:"drivers"`
	// Best is the device a build uses for "best": webgpu when OK, else cpu.
	Best string `json:"best"`
	// WebGPU says whether the webgpu driver runs here and its adapter or
	// why not ("not compiled in" when this build lacks the driver).
	WebGPU struct {
		OK  bool   `json:"ok"`
		Why string `json:"why"`
	} `json:"webgpu"`
	Current string `json:"current"` // the open device, "" before build
}

// Devices lists the drivers; current is the open device (nil before build).
func Devices(current *core.Device) DevicesInfo {
	var d DevicesInfo
	d.Drivers = []DriverJSON{}
	d.WebGPU.Why = "the webgpu driver is not compiled into this build"
	for _, di := range backend.Drivers() {
		d.Drivers = append(d.Drivers, DriverJSON{di.Name, di.Priority, di.OK, di.Auto, di.Why})
		if di.Name == "webgpu" {
			d.WebGPU.OK, d.WebGPU.Why = di.OK, di.Why
		}
	}
	d.Best = PickDevice("best", d.Drivers)
	if current != nil {
		d.Current = current.String()
	}
	return d
}

// PickDevice resolves "best" (or ""): webgpu when its driver is OK - in a
// browser even a software adapter is the point of the page - else cpu.
// Other names pass through.
func PickDevice(name string, drivers []DriverJSON) string {
	if name != "" && name != "best" {
		return name
	}
	for _, d := range drivers {
		if d.Name == "webgpu" && d.OK {
			return "webgpu"
		}
	}
	return "cpu"
}

// StartProfile resets the profiler and switches every pass and the
// transfer counter on, as `ag demo -profile` does.
func StartProfile() {
	profile.Reset()
	profile.Forward(true)
	profile.Backward(true)
	profile.Switch(profile.PassUpdate, true)
	profile.Count(true)
}

// StopProfile switches them off again.
func StopProfile() {
	profile.Forward(false)
	profile.Backward(false)
	profile.Switch(profile.PassUpdate, false)
	profile.Count(false)
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Traces keeps the Chrome trace of the last profile of each mode.
type Traces struct {
	byMode map[string][]byte
	last   string
}

// Record stores the profiler's trace as mode's.
func (t *Traces) Record(mode string) error {
	var tr bytes.Buffer
	if err := profile.WriteTrace(&tr); err != nil {
		return fmt.Errorf("profile %s: %w", mode, err)
	}
	if t.byMode == nil {
		t.byMode = map[string][]byte{}
	}
	t.byMode[mode], t.last = tr.Bytes(), mode
	return nil
}

// JSON returns the trace of the last profile in mode ("" for the last
// profile of any mode).
func (t *Traces) JSON(mode string) (string, error) {
	if mode == "" {
		mode = t.last
	}
	tr, ok := t.byMode[mode]
	if !ok {
		return "", fmt.Errorf("trace: no profile in mode %q yet: call ag.profile first", mode)
	}
	return string(tr), nil
}
