// Package wasmsuite holds the browser build of the WebGPU conformance suite:
// its test file (GOOS=js only) runs backendtest.Run on the "webgpu" driver,
// which under GOOS=js talks to navigator.gpu. The parent package
// browsertest compiles it with `GOOS=js GOARCH=wasm go test -c` and runs the
// binary in headless Chromium; natively this package has no tests.
package wasmsuite
