// Package goid identifies the calling goroutine, so that a Device can tell
// the goroutine inside a Backward, NoGrad or Capture recording from the
// others: such modes belong to one goroutine, and Go has no goroutine-local
// storage.
//
// On amd64, arm64 and wasm Get reads the runtime's g pointer (one
// instruction), so a Device asks on every op; on other architectures it
// parses the goroutine id from runtime.Stack, which costs a microsecond.
package goid

// Get returns an identity of the calling goroutine: distinct among live
// goroutines, nonzero, stable for the goroutine's life. An identity may be
// reused after its goroutine exits.
func Get() uintptr { return get() }
