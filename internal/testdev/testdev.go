// Package testdev opens the device the device-independent tests run on
// (AG_TEST_DEVICE, see backend/backendtest/testenv) and closes it when the test ends.
// It is its own package because core's own tests import testenv, which
// therefore cannot import core.
package testdev

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
)

// Open opens testenv.Device() for t, failing t when it cannot: a device
// named in AG_TEST_DEVICE never falls back to cpu.
func Open(t testing.TB) *core.Device {
	t.Helper()
	dev, err := core.Open(testenv.Device())
	if err != nil {
		t.Fatalf("%s=%s: %v", testenv.DeviceEnv, testenv.Device(), err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
