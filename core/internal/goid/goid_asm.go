//go:build amd64 || arm64 || wasm

package goid

func getg() uintptr

func get() uintptr { return getg() }
