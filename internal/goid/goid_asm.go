//go:build amd64 || arm64

package goid

func getg() uintptr

func get() uintptr { return getg() }
