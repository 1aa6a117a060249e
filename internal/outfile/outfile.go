// Package outfile checks the path of an output file given on a command
// line before the work that fills it: a run that trained or measured for
// minutes must not fail at its end on a missing folder.
package outfile

import (
	"errors"
	"fmt"
	"os"
)

// ErrFolder is Check's error for a path that names a folder.
var ErrFolder = errors.New("is a folder, want a file")

// Check reports a path that cannot be written, in words that follow the
// path (ErrFolder, or "cannot be written: " and the cause): its folder missing or
// read-only, or the path a folder. An existing file is opened for writing
// and left as it is; a new one is created and removed again. The empty
// path (no file asked for) is fine.
func Check(path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err == nil && st.IsDir() {
		return ErrFolder
	}
	existed := err == nil
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot be written: %w", err)
	}
	f.Close()
	if !existed {
		os.Remove(path)
	}
	return nil
}
