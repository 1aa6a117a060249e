//go:build !amd64 || purego

package cpu

// spinPause does nothing here: spinning loops just poll.
func spinPause() {}
