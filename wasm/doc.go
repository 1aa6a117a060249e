// Command wasm will be the GOOS=js entry point: the Promise-based JS API the
// web page calls (list devices, build and train a model, profile a step).
// Not built yet: its issue comes after core, profile and webgpu.
package main
