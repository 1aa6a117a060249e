// Package browsertest runs ag's WebGPU backend tests inside headless
// Chromium, where the backend talks to navigator.gpu through syscall/js
// (package gpu's js.go) on Chromium's SwiftShader adapter.
//
// Its test builds two wasm test binaries with `GOOS=js GOARCH=wasm go test
// -c`: package wasmsuite (the conformance suite, backendtest.Run on
// "webgpu", and an MLP trained through core and nn on "webgpu" against the
// "cpu" backend) and a subset of the webgpu package's own tests (see
// packageTests in suite_test.go). It serves them with Go's wasm_exec.js and
// a small page (index.html) on 127.0.0.1, drives /usr/bin/chromium through
// the DevTools protocol (chromedp), collects each binary's output from the
// page and fails on any failing test. Run it with
//
//	go test ./backend/webgpu/browsertest/
//
// (about 2-4 minutes on 2 cores; -short skips the suite's large-tensor
// cases; AG_BROWSERTEST_LOG=/tmp/bt- keeps each binary's whole -test.v
// output in /tmp/bt-<name>.txt). It skips when Chromium is not installed
// (`make deps` installs it) or when the browser offers no WebGPU adapter,
// with the reason.
package browsertest
