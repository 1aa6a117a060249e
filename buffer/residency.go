package buffer

import "github.com/ag-go/ag/core"

// onDevice reports whether t's realized value is in device memory (false
// while Device.Close has moved it to the host).
func onDevice(t *core.Tensor) bool { return t.OnDevice() }
