// Package all registers every backend of ag: import it for its side effect
// when core.Open("auto") should consider them all.
//
//	import _ "github.com/ag-go/ag/backend/all"
//
// The pure-Go cpu backend is always registered by core; webgpu needs cgo
// natively (gcc only) and the browser's WebGPU under GOOS=js; the ggml
// backends are real only in builds with -tags ggml (see `make vulkan`).
package all

import (
	_ "github.com/ag-go/ag/backend/cpu"
	_ "github.com/ag-go/ag/backend/native"
	_ "github.com/ag-go/ag/backend/webgpu"
)
