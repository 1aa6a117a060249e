package nn

import (
	"os"

	_ "github.com/ag-go/ag/backend/all"
)

// testDevice lets the same tests run on another backend:
// AG_TEST_DEVICE=webgpu go test ./nn/
func testDevice() string {
	if d := os.Getenv("AG_TEST_DEVICE"); d != "" {
		return d
	}
	return "cpu"
}
