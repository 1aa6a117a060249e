//go:build js

package wasmsuite

import (
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/backend/backendtest/edge"
	_ "github.com/ag-go/ag/backend/webgpu" // registers "webgpu" (navigator.gpu under GOOS=js)
)

// TestConformance runs the shared backend suite on the browser's WebGPU
// adapter (SwiftShader in the headless Chromium of the tests), then its
// edge points through core.
func TestConformance(t *testing.T) {
	backendtest.Run(t, "webgpu")
	edge.Run(t, "webgpu")
}
