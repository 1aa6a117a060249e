//go:build !amd64 && !arm64 && !wasm

package goid

import "runtime"

// get parses "goroutine N [" from the top of the goroutine's stack trace.
func get() uintptr {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	var id uintptr
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}
