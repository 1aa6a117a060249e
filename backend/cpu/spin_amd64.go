//go:build amd64 && !purego

package cpu

// spinPause is one PAUSE: a spinning loop then leaves the core's other
// hardware thread (on these VMs possibly the other CPU) its resources.
func spinPause()
