// Command wasm is ag in the browser: compiled with GOOS=js GOARCH=wasm it
// puts a small Promise-based API on globalThis.ag, which the page of
// `ag serve` (package web) calls:
//
//	ag.devices()                          drivers, the best device, WebGPU's adapter or why none
//	ag.build({width, depth, batch, lr, device})  a fresh MLP workload on device ("best": webgpu when it runs, else cpu)
//	ag.train(steps, onProgress(step, loss, ms), {mode, every})  trains ("lazy" by default, or "captured", "eager"), reading the loss every `every` steps (1 by default) and at the last; resolves with the losses and step times
//	ag.profile({mode, steps})             profiles steps in mode "eager", "lazy" or "captured" (see ModeEager...)
//	ag.trace(mode?)                       the Chrome trace JSON (a string) of the last profile
//	ag.stop()                             ends a running train after its current read
//
// Every call but stop returns a Promise. The work runs on one worker
// goroutine, in call order, never inside a js.FuncOf callback: the WebGPU
// backend waits on JS promises, which would deadlock a callback. Errors
// reject the Promise with an Error holding the Go error text. Counts
// (train's steps and every) must be whole numbers: NaN, 2.5 or "10" reject
// the call, naming the value. So do build's width, depth and batch; lr is a
// number in (0, 1]; an option that is misspelt or of the wrong type, an
// options argument that is no object, an onProgress that is no function
// reject at once (undefined and null are the defaults). An onProgress that
// throws stops the train at its next read and rejects naming the step.
//
// A read of the loss waits a round trip to the GPU process (2-4 ms in
// Chromium, whatever the step's size); the steps between reads are
// submitted without waiting. {every: 10} is what makes small models train
// fast in the page.
//
// Built natively the command only says how to build it; the session logic
// (session.go) is tested natively.
package main
