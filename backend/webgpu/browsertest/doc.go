// Package browsertest runs ag's WebGPU backend conformance suite
// (backendtest.Run on the "webgpu" driver) inside headless Chromium, where
// the backend talks to navigator.gpu through syscall/js (device_js.go) on
// Chromium's SwiftShader adapter.
//
// Its test builds the wasm test binary of package wasmsuite with
// `GOOS=js GOARCH=wasm go test -c`, serves it with Go's wasm_exec.js and a
// small page (index.html) on 127.0.0.1, drives /usr/bin/chromium through
// the DevTools protocol (chromedp), collects the binary's standard output
// from the page and fails on any failing case. Run it with
//
//	go test ./backend/webgpu/browsertest/
//
// It skips when Chromium is not installed (`make deps` installs it) or
// when the browser offers no WebGPU adapter, with the reason.
package browsertest
