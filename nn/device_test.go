package nn

import (
	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// testDevice lets the same tests run on another backend:
// AG_TEST_DEVICE=webgpu go test ./nn/. A device named there that cannot
// open fails the tests: it never falls back to cpu.
func testDevice() string { return testenv.Device() }
