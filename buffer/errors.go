package buffer

import (
	"errors"
	"fmt"
)

// Sentinel errors; the errors returned wrap them with the function and the
// values involved, so callers branch with errors.Is and people read details.
var (
	// ErrFreed: the buffer was freed with Free and cannot be used.
	ErrFreed = errors.New("buffer has been freed")
	// ErrOutOfRange: an offset, a count or a host index lies outside the buffer.
	ErrOutOfRange = errors.New("out of range")
	// ErrTooLarge: the buffer does not fit the device (85% of the free memory
	// it reports, or its largest allocation).
	ErrTooLarge = errors.New("buffer too large for the device")
)

// detailErr is an error whose text is the detailed message alone (the seed's
// wording) and which unwraps to a sentinel.
type detailErr struct {
	msg      string
	sentinel error
}

func (e *detailErr) Error() string { return e.msg }
func (e *detailErr) Unwrap() error { return e.sentinel }

// errorf formats a message that unwraps to sentinel.
func errorf(sentinel error, format string, args ...any) error {
	return &detailErr{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}
