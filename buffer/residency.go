package buffer

import (
	"reflect"

	"github.com/ag-go/ag/core"
)

// onDevice reports whether t's realized value is in device memory (false
// while Device.Close has moved it to the host). core has no public accessor
// for this yet, so it is read through reflection over core's unexported
// fields (Tensor.stor.buf), read-only. It only feeds Buffer.String; if core
// renames the fields it answers true ("device") and the String tests fail.
//
// TODO(lead): replace with core's Tensor.OnDevice() once it exists.
func onDevice(t *core.Tensor) bool {
	s := reflect.ValueOf(t).Elem().FieldByName("stor")
	if !s.IsValid() || s.Kind() != reflect.Pointer {
		return true
	}
	if s.IsNil() {
		return false
	}
	buf := s.Elem().FieldByName("buf")
	if !buf.IsValid() || buf.Kind() != reflect.Interface {
		return true
	}
	return !buf.IsNil()
}
